/* Names after fork: four children, each burning in a function of its own.
 *   forker N            parent: forks the four, waits
 *   child 1: fork only                    burn_forked   (named "forker")
 *   child 2: fork + prctl(PR_SET_NAME)    burn_renamed  (named "renamed")
 *   child 3: fork + exec ./stage1 once    burn_stage1   (named "stage1")
 *   child 4: fork + exec ./stage1, which execs ./stage2   burn_stage2
 * stage1 and stage2 are links to this program made by the caller; an exec'd
 * program picks its part by argv[0]. The rename happens at once after the
 * fork, so its COMM record is written on the child's CPU a few microseconds
 * after the FORK on the parent's: a profiler reading one CPU's ring before
 * the other must still name each child's function after the child.
 * Build: cc -O1 -g -fno-omit-frame-pointer forker.c */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long step(unsigned long x, unsigned long i) {
    return x * 6364136223846793005UL + i;
}

#define BURNER(name, salt)                                              \
    __attribute__((noinline)) unsigned long name(unsigned long n) {     \
        unsigned long x = salt;                                         \
        for (unsigned long i = 0; i < n; i++) x = step(x, i ^ salt);    \
        return x;                                                       \
    }
BURNER(burn_forked, 1)
BURNER(burn_renamed, 2)
BURNER(burn_stage1, 3)
BURNER(burn_stage2, 4)

static void run(const char *path, const char *n) {
    execl(path, path, n, "exec", (char *)NULL);
    perror(path);
    _exit(1);
}

int main(int argc, char **argv) {
    const char *arg = argc > 1 ? argv[1] : "100000000";
    unsigned long n = strtoul(arg, NULL, 10);
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    if (!strcmp(base, "stage1")) {
        if (argc > 2 && !strcmp(argv[2], "twice")) run("./stage2", arg);
        sink = burn_stage1(n);
        return 0;
    }
    if (!strcmp(base, "stage2")) {
        sink = burn_stage2(n);
        return 0;
    }
    for (int c = 1; c <= 4; c++) {
        if (fork() != 0) continue;
        switch (c) {
        case 1: sink = burn_forked(n); break;
        case 2:
            prctl(PR_SET_NAME, "renamed", 0, 0, 0);
            sink = burn_renamed(n);
            break;
        case 3: run("./stage1", arg); break;
        case 4: execl("./stage1", "./stage1", arg, "twice", (char *)NULL); _exit(1);
        }
        _exit(0);
    }
    while (wait(NULL) > 0) {
    }
    printf("forker: done (%lu iterations per child)\n", n);
    return 0;
}
