/* Two loops in one function, for profreport --annotate's tests.
 *
 *   loops ROUNDS   each round runs the first loop three times as many
 *                  iterations as the second, the same work per iteration:
 *                  the first loop's lines get 75 % of two_loops' samples,
 *                  the second's 25 %.
 *
 * Each loop body is on lines of its own, so per source line the split is
 * visible. Build:
 *   cc -O1 -g -fno-omit-frame-pointer -o loops loops.c
 */
#include <stdio.h>
#include <stdlib.h>

#define ITERATIONS 1000000UL

static volatile unsigned long sink;

__attribute__((noinline)) unsigned long two_loops(unsigned long x) {
    for (unsigned long i = 0; i < 3 * ITERATIONS; i++) {
        x = x * 6364136223846793005UL + i; /* first loop */
        x ^= x >> 29;                      /* first loop */
    }
    for (unsigned long i = 0; i < ITERATIONS; i++) {
        x = x * 6364136223846793005UL + i; /* second loop */
        x ^= x >> 29;                      /* second loop */
    }
    return x;
}

int main(int argc, char **argv) {
    unsigned long rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 400;
    unsigned long x = 1;
    for (unsigned long r = 0; r < rounds; r++)
        x = two_loops(x);
    sink = x;
    printf("%lu\n", x);
    return 0;
}
