/* A tiny JIT that writes a jitdump as runtimes do (perf's
 * tools/perf/Documentation/jitdump-specification.txt): it maps
 * `jit-PID.dump` (executable, so the kernel reports the mapping), generates
 * a hot loop into anonymous executable memory, describes it with
 * JIT_CODE_DEBUG_INFO (source lines of a made-up `minijit.src`) and
 * JIT_CODE_LOAD, and runs it. Halfway through it generates a second
 * function AT THE SAME ADDRESS (as a runtime reusing code memory does) and
 * runs that: a profiler must tell the two apart by time.
 *
 * Usage: minijit SECONDS. Prints "first N" and "second N": iterations of
 * each. The dump is written with stdio and flushed after each function
 * (Python and node flush theirs only when their buffer fills, or at exit).
 *
 * The generated function (System V, n in %rdi; returns in %rax):
 *   0: 31 c0          xor  %eax,%eax        line 10
 *   2: 48 01 f8       add  %rdi,%rax        line 11   <- loop
 *   5: 48 ff cf       dec  %rdi             line 12
 *   8: 75 f8          jne  2                line 12
 *   a: c3             ret                   line 13
 * The second one differs only in its first instruction (line 20..23).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static FILE *dump;
static uint64_t index_next = 1;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void prefix(uint32_t id, uint32_t size) {
    uint64_t t = now_ns();
    fwrite(&id, 4, 1, dump);
    fwrite(&size, 4, 1, dump);
    fwrite(&t, 8, 1, dump);
}

static void debug_info(uint64_t addr, int first_line) {
    /* One entry per instruction start above, file name in full first,
     * then "same file" (0xff 0x00). */
    static const uint8_t offs[] = {0, 2, 5, 10};
    static const int lines[] = {0, 1, 2, 3};
    const char *file = "minijit.src";
    uint64_t n = 4;
    uint32_t size = 16 + 16;
    for (int i = 0; i < 4; i++)
        size += 16 + (i == 0 ? (uint32_t)strlen(file) + 1 : 2);
    prefix(2, size);
    fwrite(&addr, 8, 1, dump);
    fwrite(&n, 8, 1, dump);
    for (int i = 0; i < 4; i++) {
        uint64_t a = addr + offs[i];
        uint32_t line = (uint32_t)(first_line + lines[i]), discrim = 0;
        fwrite(&a, 8, 1, dump);
        fwrite(&line, 4, 1, dump);
        fwrite(&discrim, 4, 1, dump);
        if (i == 0)
            fwrite(file, strlen(file) + 1, 1, dump);
        else
            fwrite("\xff", 2, 1, dump);
    }
}

static void code_load(uint64_t addr, const uint8_t *code, uint64_t size, const char *name) {
    uint32_t pid = (uint32_t)getpid(), tid = (uint32_t)syscall(SYS_gettid);
    uint32_t total = 16 + 4 + 4 + 8 * 4 + (uint32_t)strlen(name) + 1 + (uint32_t)size;
    prefix(0, total);
    fwrite(&pid, 4, 1, dump);
    fwrite(&tid, 4, 1, dump);
    fwrite(&addr, 8, 1, dump); /* vma */
    fwrite(&addr, 8, 1, dump); /* code_addr */
    fwrite(&size, 8, 1, dump);
    fwrite(&index_next, 8, 1, dump);
    index_next++;
    fwrite(name, strlen(name) + 1, 1, dump);
    fwrite(code, size, 1, dump);
    fflush(dump);
}

typedef uint64_t (*fn)(uint64_t);

static uint64_t run(fn f, uint64_t until) {
    uint64_t n = 0;
    while (now_ns() < until) {
        f(100000);
        n++;
    }
    return n;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    char path[64];
    snprintf(path, sizeof path, "jit-%d.dump", getpid());
    dump = fopen(path, "w+");
    if (!dump) {
        perror(path);
        return 1;
    }
    struct {
        uint32_t magic, version, total_size, elf_mach, pad1, pid;
        uint64_t timestamp, flags;
    } h = {0x4A695444, 1, 40, EM_X86_64, 0, (uint32_t)getpid(), now_ns(), 0};
    fwrite(&h, sizeof h, 1, dump);
    fflush(dump);
    /* The marker mapping perf (and profkit) look for. */
    void *marker = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fileno(dump), 0);
    if (marker == MAP_FAILED) {
        perror("mmap dump");
        return 1;
    }
    uint8_t *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        perror("mmap code");
        return 1;
    }
    static const uint8_t first[] = {0x31, 0xc0, 0x48, 0x01, 0xf8, 0x48, 0xff, 0xcf, 0x75, 0xf8, 0xc3};
    /* mov %rdi,%rax would change the result, not the timing: use
     * `xor %eax,%eax` again but via a 2-byte `sub %eax,%eax`. */
    static const uint8_t second[] = {0x29, 0xc0, 0x48, 0x01, 0xf8, 0x48, 0xff, 0xcf, 0x75, 0xf8, 0xc3};
    uint64_t addr = (uint64_t)(uintptr_t)(mem + 0x40);
    uint64_t start = now_ns(), half = start + (uint64_t)(secs * 0.5e9), end = start + (uint64_t)(secs * 1e9);

    memcpy(mem + 0x40, first, sizeof first);
    debug_info(addr, 10);
    code_load(addr, first, sizeof first, "minijit::first");
    uint64_t a = run((fn)(void *)(mem + 0x40), half);

    memcpy(mem + 0x40, second, sizeof second);
    __builtin___clear_cache((char *)mem, (char *)mem + 4096);
    debug_info(addr, 20);
    code_load(addr, second, sizeof second, "minijit::second");
    uint64_t b = run((fn)(void *)(mem + 0x40), end);

    printf("first %llu\nsecond %llu\n", (unsigned long long)a, (unsigned long long)b);
    fclose(dump);
    return 0;
}
