/* Two static hot functions with known shares, for the debuginfod tests:
 * the binary is stripped, so only a separate debug file names them.
 *
 *   stripped UNITS   each round runs 2 units in hot_two_thirds, then 1 unit
 *                    in hot_one_third: 2/3 and 1/3 of the time
 *
 * A unit is the same inlined loop in both. Build:
 *   cc -O1 -g -fno-omit-frame-pointer -o stripped stripped.c
 *   objcopy --only-keep-debug stripped stripped.debug; strip stripped
 */
#include <stdio.h>
#include <stdlib.h>

#define UNIT_ITERATIONS 2000000UL

static volatile unsigned long sink;

static inline __attribute__((always_inline)) unsigned long unit(unsigned long x) {
    for (unsigned long i = 0; i < UNIT_ITERATIONS; i++) {
        x = x * 6364136223846793005UL + i; /* LINE_UNIT */
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static __attribute__((noinline)) unsigned long hot_two_thirds(unsigned long x) {
    x = unit(x);
    return unit(x);
}

static __attribute__((noinline)) unsigned long hot_one_third(unsigned long x) {
    return unit(x);
}

int main(int argc, char **argv) {
    unsigned long units = argc > 1 ? strtoul(argv[1], NULL, 10) : 150;
    unsigned long x = 1;
    for (unsigned long r = 0; r < units; r++) {
        x = hot_two_thirds(x);
        x = hot_one_third(x);
        sink = x;
    }
    printf("%lu\n", sink);
    return 0;
}
