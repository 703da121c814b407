/* The library half of the shared-library workload (shlib_main.c is the
 * program), for DWARF call graphs (`--call-graph dwarf`): a hot path in a
 * shared object built without frame pointers, called from a program built
 * without them either, so only .eh_frame can name the callers.
 *
 *   shlib_main: main ─┬─► outer_a ──► hot_entry ──► hot_inner     once a round
 *                     └─► outer_b ──► hot_entry ──► hot_inner     twice a round
 *                                     └──────── libhot.so ──────┘
 *
 * hot_entry calls hot_inner (a leaf: no frame at all, its return address
 * on top of the stack), then does an eighth of that work itself with rbx
 * pushed (a frame of its own). Every call does the same work whatever its
 * argument, so the library's samples split 1/3 (outer_a) : 2/3 (outer_b).
 * The library calls hot_inner through its PLT (a default-visibility
 * symbol of a -fPIC object); no call is a tail call: each caller uses the
 * result after the call.
 *
 * Build (see shlib_main.c for the program):
 *   cc -O2 -fomit-frame-pointer -shared -fPIC -o libhot.so libhot.c
 */

__attribute__((noinline)) double hot_inner(double x, long n) {
    for (long i = 0; i < n; i++) {
        x = x * 0.999 + 1.0;
        __asm__ volatile("" : "+x"(x));
    }
    return x;
}

__attribute__((noinline)) double hot_entry(double x, long n) {
    double r = hot_inner(x, n);
    for (long i = 0; i < n / 8; i++) {
        r = r * 0.999 + 0.5;
        __asm__ volatile("" : "+x"(r));
    }
    return r;
}
