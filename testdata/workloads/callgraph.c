/* A known call structure, for profreport's call-graph tests:
 *
 *   main ─┬─► a ──► c ──► tick        a calls c once per round
 *         └─► b ──► c ──► tick        b calls c twice per round
 *
 * All the time is in c (a unit of work per call), so c's callers split
 * 1/3 (a) : 2/3 (b), and the inclusive shares of a and b are 1/3 and 2/3.
 * c is not a leaf (it calls tick() once per unit), so it keeps its frame
 * and samples in it name their caller; no call is a tail call
 * (-fno-optimize-sibling-calls, and every result is used after the call).
 *
 *   callgraph ROUNDS      (about 8 ms per round on the development VM)
 *
 * Build: cc -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -o callgraph callgraph.c
 */
#include <stdio.h>
#include <stdlib.h>

#define UNIT_ITERATIONS 2000000UL

static volatile unsigned long sink;
static volatile unsigned long ticks;

__attribute__((noinline)) void tick(void) { ticks++; }

__attribute__((noinline)) unsigned long c(unsigned long x) {
    for (unsigned long i = 0; i < UNIT_ITERATIONS; i++) {
        x = x * 6364136223846793005UL + i;
        __asm__ volatile("" : "+r"(x));
    }
    tick();
    return x + 1;
}

__attribute__((noinline)) unsigned long a(unsigned long x) {
    x = c(x);
    return x ^ 1;
}

__attribute__((noinline)) unsigned long b(unsigned long x) {
    x = c(x);
    x = c(x);
    return x ^ 2;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: callgraph ROUNDS\n");
        return 2;
    }
    unsigned long n = strtoul(argv[1], NULL, 10);
    unsigned long x = 1;
    for (unsigned long i = 0; i < n; i++) x = b(a(x));
    sink = x;
    return 0;
}
