/* Where a thread waits, known in advance, for the off-CPU tests:
 *
 *   worker, ROUNDS times:
 *     wait_sleep  ──► sleep_here ──► nanosleep 30 ms          (blocked: a timer)
 *     wait_pipe   ──► pipe_here  ──► read a pipe 10 ms        (blocked: the answerer thread
 *                                                              sleeps 10 ms, then writes)
 *     wait_mutex  ──► lock_here  ──► pthread_mutex_lock 20 ms (blocked: the holder thread
 *                                                              holds the lock 20 ms)
 *     compute     2 ms on the CPU
 *
 * The worker measures each of its waits on its own clock (CLOCK_MONOTONIC
 * around each wait_* call) and its lifetime, and prints them at the end:
 *
 *   worker tid=N lifetime_ns=L sleep_ns=S pipe_ns=P mutex_ns=M compute_ns=C cpu_ns=U
 *
 * Each wait_* function calls the blocking call through one more frame
 * (*_here): libc's wrappers set up no frame pointer, so a frame-pointer
 * walk from inside them skips their direct caller, never the one above.
 *
 *   offcpu ROUNDS      (about 62 ms per round)
 *
 * Build: cc -O1 -g -pthread -fno-omit-frame-pointer -fno-optimize-sibling-calls -o offcpu offcpu.c
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int req[2], resp[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sem_t go, held;
static volatile int done;
static volatile unsigned long sink;

static unsigned long long now_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

__attribute__((noinline)) int sleep_here(void) {
    sleep_ms(30);
    return (int)sink;
}

__attribute__((noinline)) int wait_sleep(void) { return sleep_here() + 1; }

__attribute__((noinline)) int pipe_here(void) {
    char c = 1;
    if (write(req[1], &c, 1) != 1 || read(resp[0], &c, 1) != 1)
        abort();
    return c;
}

__attribute__((noinline)) int wait_pipe(void) { return pipe_here() + 1; }

__attribute__((noinline)) int lock_here(void) {
    sem_post(&go);
    sem_wait(&held);
    pthread_mutex_lock(&lock);
    pthread_mutex_unlock(&lock);
    return (int)sink;
}

__attribute__((noinline)) int wait_mutex(void) { return lock_here() + 1; }

__attribute__((noinline)) int compute(void) {
    unsigned long long end = now_ns(CLOCK_MONOTONIC) + 2000000ULL;
    unsigned long x = sink;
    while (now_ns(CLOCK_MONOTONIC) < end) {
        for (int i = 0; i < 1000; i++)
            x = x * 6364136223846793005UL + i;
    }
    sink = x;
    return (int)x;
}

static void *answerer(void *arg) {
    (void)arg;
    char c;
    while (read(req[0], &c, 1) == 1) {
        sleep_ms(10);
        if (write(resp[1], &c, 1) != 1)
            abort();
    }
    return NULL;
}

static void *holder(void *arg) {
    (void)arg;
    for (;;) {
        sem_wait(&go);
        if (done)
            return NULL;
        pthread_mutex_lock(&lock);
        sem_post(&held);
        sleep_ms(20);
        pthread_mutex_unlock(&lock);
    }
}

static long rounds;

static void *worker(void *arg) {
    (void)arg;
    unsigned long long t0 = now_ns(CLOCK_MONOTONIC);
    unsigned long long s = 0, p = 0, m = 0, c = 0, t;
    int acc = 0;
    for (long r = 0; r < rounds; r++) {
        t = now_ns(CLOCK_MONOTONIC);
        acc += wait_sleep();
        s += now_ns(CLOCK_MONOTONIC) - t;
        t = now_ns(CLOCK_MONOTONIC);
        acc += wait_pipe();
        p += now_ns(CLOCK_MONOTONIC) - t;
        t = now_ns(CLOCK_MONOTONIC);
        acc += wait_mutex();
        m += now_ns(CLOCK_MONOTONIC) - t;
        t = now_ns(CLOCK_MONOTONIC);
        acc += compute();
        c += now_ns(CLOCK_MONOTONIC) - t;
    }
    unsigned long long cpu = now_ns(CLOCK_THREAD_CPUTIME_ID);
    unsigned long long life = now_ns(CLOCK_MONOTONIC) - t0;
    printf("worker tid=%ld lifetime_ns=%llu sleep_ns=%llu pipe_ns=%llu mutex_ns=%llu "
           "compute_ns=%llu cpu_ns=%llu\n",
           (long)syscall(SYS_gettid), life, s, p, m, c, cpu);
    fflush(stdout);
    sink = acc;
    return NULL;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atol(argv[1]) : 40;
    if (pipe(req) || pipe(resp))
        return 1;
    sem_init(&go, 0, 0);
    sem_init(&held, 0, 0);
    pthread_t a, h, w;
    pthread_create(&a, NULL, answerer, NULL);
    pthread_create(&h, NULL, holder, NULL);
    pthread_create(&w, NULL, worker, NULL);
    pthread_join(w, NULL);
    done = 1;
    sem_post(&go);
    close(req[1]);
    pthread_join(a, NULL);
    pthread_join(h, NULL);
    return 0;
}
