/* The demo workload: two threads, each spinning in its own non-leaf hot
 * function for a fixed amount of work, so a profile shows both and where
 * they ran. Build: cc -O1 -g -fno-omit-frame-pointer -pthread spin.c */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long step(unsigned long x, unsigned long i) {
    return x * 6364136223846793005UL + i;
}

__attribute__((noinline)) unsigned long hot_alpha(unsigned long n) {
    unsigned long x = 1;
    for (unsigned long i = 0; i < n; i++) x = step(x, i);
    return x;
}

__attribute__((noinline)) unsigned long hot_beta(unsigned long n) {
    unsigned long x = 2;
    for (unsigned long i = 0; i < n; i++) x = step(x, i ^ 0x55);
    return x;
}

static void *run_beta(void *arg) {
    sink = hot_beta((unsigned long)arg);
    return NULL;
}

int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 300000000UL;
    pthread_t t;
    pthread_create(&t, NULL, run_beta, (void *)n);
    sink = hot_alpha(n);
    pthread_join(t, NULL);
    printf("spin: done (%lu iterations per thread)\n", n);
    return 0;
}
