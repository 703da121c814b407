/* Four CPU-bound phases of about a second each, one function each
 * (phase_a .. phase_d), for tests of sample times: each phase's start and
 * end on CLOCK_MONOTONIC (perf's clock), in ns, one line per phase
 * ("phase_a START END"), go to the file named by argv[1] (stdout without
 * one). argv[2]: milliseconds per phase (default 1000).
 * Build: cc -O1 -g -fno-omit-frame-pointer phases.c */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static unsigned long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ULL + (unsigned long long)t.tv_nsec;
}

/* Spins until `until`, looking at the clock every ~20 us of work. */
#define PHASE(name, mul)                                                        \
    __attribute__((noinline)) void name(unsigned long long until) {             \
        unsigned long x = 1;                                                    \
        while (now() < until)                                                   \
            for (unsigned long i = 0; i < 20000; i++) x = x * (mul) + i;        \
        sink = x;                                                               \
    }

PHASE(phase_a, 6364136223846793005UL)
PHASE(phase_b, 2862933555777941757UL)
PHASE(phase_c, 3202034522624059733UL)
PHASE(phase_d, 3935559000370003845UL)

int main(int argc, char **argv) {
    FILE *out = argc > 1 ? fopen(argv[1], "w") : stdout;
    unsigned long long ms = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000;
    if (!out) return 1;
    void (*phases[])(unsigned long long) = {phase_a, phase_b, phase_c, phase_d};
    const char *names[] = {"phase_a", "phase_b", "phase_c", "phase_d"};
    for (int i = 0; i < 4; i++) {
        unsigned long long start = now();
        phases[i](start + ms * 1000000ULL);
        unsigned long long end = now();
        fprintf(out, "%s %llu %llu\n", names[i], start, end);
    }
    return fclose(out) != 0;
}
