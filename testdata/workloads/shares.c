/* Known shares of time, for profreport's tests.
 *
 *   shares ratio UNITS   one thread; each round runs 2 units in f_a, then 1 unit
 *                        in f_b: f_a gets 2/3 of the time, f_b 1/3
 *   shares pinned UNITS  two threads, the main one pinned to CPU 0 running
 *                        f_cpu0, a second one pinned to CPU 1 running f_cpu1,
 *                        UNITS units each
 *
 * A unit is the same inlined loop everywhere, so time is proportional to
 * units. The hot functions are not leaves (each calls tick() once per unit),
 * so they keep their frames. Build:
 *   cc -O1 -g -fno-omit-frame-pointer -pthread -o shares shares.c
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNIT_ITERATIONS 2000000UL

static volatile unsigned long sink;
static volatile unsigned long ticks;

__attribute__((noinline)) void tick(void) { ticks++; }

static inline __attribute__((always_inline)) unsigned long unit(unsigned long x) {
    for (unsigned long i = 0; i < UNIT_ITERATIONS; i++) {
        x = x * 6364136223846793005UL + i;
        __asm__ volatile("" : "+r"(x));
    }
    tick();
    return x;
}

__attribute__((noinline)) unsigned long f_a(unsigned long x) {
    x = unit(x);
    return unit(x);
}

__attribute__((noinline)) unsigned long f_b(unsigned long x) { return unit(x); }

__attribute__((noinline)) unsigned long f_cpu0(unsigned long n) {
    unsigned long x = 3;
    for (unsigned long i = 0; i < n; i++) x = unit(x);
    return x;
}

__attribute__((noinline)) unsigned long f_cpu1(unsigned long n) {
    unsigned long x = 5;
    for (unsigned long i = 0; i < n; i++) x = unit(x);
    return x;
}

static int pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int err = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (err) fprintf(stderr, "shares: cannot pin to CPU %d: %s\n", cpu, strerror(err));
    return err;
}

static void *run_cpu1(void *arg) {
    if (pin(1)) exit(3);
    sink = f_cpu1((unsigned long)arg);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: shares ratio|pinned UNITS\n");
        return 2;
    }
    unsigned long n = strtoul(argv[2], NULL, 10);
    if (!strcmp(argv[1], "ratio")) {
        unsigned long x = 1;
        for (unsigned long i = 0; i < n; i++) x = f_b(f_a(x));
        sink = x;
    } else if (!strcmp(argv[1], "pinned")) {
        if (pin(0)) return 3;
        pthread_t t;
        pthread_create(&t, NULL, run_cpu1, (void *)n);
        sink = f_cpu0(n);
        pthread_join(t, NULL);
    } else {
        fprintf(stderr, "shares: unknown mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
