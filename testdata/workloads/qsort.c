/* qsort through glibc from two callers in a known ratio, for DWARF call
 * graphs (`--call-graph dwarf`): built without frame pointers, like most
 * of a real system (and glibc itself).
 *
 *   main ─┬─► sort_once  ──► qsort ──► ... ──► by_key      one sort a round
 *         └─► sort_twice ──► qsort ──► ... ──► by_key      two sorts a round
 *
 * Every sort gets the same input, so the comparator's samples split 1/3
 * (sort_once) : 2/3 (sort_twice). The comparator does a little work per
 * call so that it holds most samples. No call is a tail call: each
 * caller uses the sorted array after qsort returns.
 *
 *   qsort ROUNDS      (about 25 ms per round on the development VM)
 *
 * Build: cc -O2 -fomit-frame-pointer -g -o qsort qsort.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 20000

static double input[N];
static double work[N];
volatile double sink;

__attribute__((noinline)) int by_key(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    /* A monotonic transform of both keys: keeps the order, costs time. */
    for (int i = 0; i < 24; i++) {
        a = a * 0.999 + 1.0;
        b = b * 0.999 + 1.0;
        __asm__ volatile("" : "+x"(a), "+x"(b));
    }
    return (a > b) - (a < b);
}

__attribute__((noinline)) double sort_once(void) {
    memcpy(work, input, sizeof work);
    qsort(work, N, sizeof work[0], by_key);
    return work[N / 2];
}

__attribute__((noinline)) double sort_twice(void) {
    double r = 0;
    for (int k = 0; k < 2; k++) {
        memcpy(work, input, sizeof work);
        qsort(work, N, sizeof work[0], by_key);
        r += work[N / 3];
    }
    return r;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: qsort ROUNDS\n");
        return 2;
    }
    long rounds = strtol(argv[1], NULL, 10);
    unsigned long x = 88172645463325252UL;
    for (int i = 0; i < N; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        input[i] = (double)(x % 1000000);
    }
    for (long r = 0; r < rounds; r++) {
        sink += sort_once();
        sink += sort_twice();
    }
    return 0;
}
