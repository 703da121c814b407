/* A context-switch storm, for the off-CPU cost tests: two threads pass a
 * byte back and forth over two pipes for SECONDS seconds, so each blocks
 * in read() once per round trip (hundreds of thousands of switches a
 * second). Prints the round trips made:
 *
 *   pingpong trips=N seconds=S
 *
 *   pingpong SECONDS
 *
 * Build: cc -O1 -g -pthread -fno-omit-frame-pointer -o pingpong pingpong.c
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int ab[2], ba[2];
static volatile int stop;

__attribute__((noinline)) static void pong_wait(char *c) {
    if (read(ab[0], c, 1) != 1)
        exit(1);
}

static void *ponger(void *arg) {
    (void)arg;
    char c;
    for (;;) {
        pong_wait(&c);
        if (c == 0)
            return NULL;
        if (write(ba[1], &c, 1) != 1)
            exit(1);
    }
}

__attribute__((noinline)) static void ping_wait(char *c) {
    if (read(ba[0], c, 1) != 1)
        exit(1);
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 10;
    if (pipe(ab) || pipe(ba))
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, ponger, NULL);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long trips = 0;
    char c = 1;
    for (;;) {
        if ((trips & 1023) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if ((now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 >= secs)
                break;
        }
        if (write(ab[1], &c, 1) != 1)
            return 1;
        ping_wait(&c);
        trips++;
    }
    c = 0;
    if (write(ab[1], &c, 1) != 1)
        return 1;
    pthread_join(t, NULL);
    printf("pingpong trips=%lu seconds=%g\n", trips, secs);
    return 0;
}
