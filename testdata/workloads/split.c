/* One process whose time splits across three binaries: its own loop,
 * libc (memset/memcpy of 64 KiB) and the kernel (read(2) of 64 KiB from
 * /dev/zero), in turns of 10 ms each. Turns long against a sampling
 * period make two samplers running at once agree closely (each counts a
 * turn's length to within one sample); turns much shorter than a
 * period would make them differ by sampling noise. Prints its pid first,
 * then works for SECONDS (default 2). Used to compare profkit with perf
 * per binary. Build: cc -O1 -g -fno-omit-frame-pointer split.c */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static char a[65536], b[65536];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((noinline)) static unsigned long own(unsigned long n) {
    unsigned long x = sink;
    for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + i;
    return x;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
    int fd = open("/dev/zero", O_RDONLY);
    if (fd < 0) return 1;
    double end = now() + secs;
    int r = 0;
    for (double t = now(); t < end; t = now()) {
        while (now() < t + 0.010) sink += own(1000);
        while (now() < t + 0.020) {
            memset(a, r++, sizeof a);
            memcpy(b, a, sizeof a);
            sink += b[r % sizeof b];
        }
        while (now() < t + 0.030)
            if (read(fd, a, sizeof a) != sizeof a) return 1;
    }
    return 0;
}
