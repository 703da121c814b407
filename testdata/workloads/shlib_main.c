/* The program half of the shared-library workload (libhot.c is the
 * library), for DWARF call graphs (`--call-graph dwarf`): built without
 * frame pointers, it calls the library's hot path from two callers in a
 * known ratio.
 *
 *   main ─┬─► outer_a ──► hot_entry ──► hot_inner      one call a round
 *         └─► outer_b ──► hot_entry ──► hot_inner      two calls a round
 *
 * Each hot_entry call does the same work, so the library's samples split
 * 1/3 (outer_a) : 2/3 (outer_b). No call is a tail call: each caller uses
 * the result after the call.
 *
 *   shlib_main ROUNDS      (about 10 ms per round on the development VM)
 *
 * Build, beside libhot.so:
 *   cc -O2 -fomit-frame-pointer -o shlib_main shlib_main.c -L. -lhot -Wl,-rpath,'$ORIGIN'
 */
#include <stdio.h>
#include <stdlib.h>

#define N 2000000L

double hot_entry(double x, long n);

volatile double sink;

__attribute__((noinline)) double outer_a(double x) {
    return hot_entry(x, N) + 1.0;
}

__attribute__((noinline)) double outer_b(double x) {
    double r = hot_entry(x, N);
    r += hot_entry(r, N);
    return r * 0.5;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: shlib_main ROUNDS\n");
        return 2;
    }
    long rounds = strtol(argv[1], NULL, 10);
    for (long r = 0; r < rounds; r++) {
        sink += outer_a((double)r);
        sink += outer_b((double)r);
    }
    return 0;
}
