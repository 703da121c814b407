/* Built by the objdump test with cc -O2 -m32 -nostdlib -static: i386 code without a C
 * library (the 32-bit libc headers are often not installed). */
struct node { struct node *next; long v; };
__attribute__((noinline)) long sum_list(struct node *n) {
  long s = 0;
  for (; n; n = n->next) s += n->v * 3;
  return s;
}
__attribute__((noinline)) int classify(int x) {
  switch (x) {
  case 0: return 11; case 1: return 22; case 2: return 33; case 3: return 44;
  case 4: return 55; case 5: return 66; default: return -1;
  }
}
__attribute__((noinline)) long long fib(long long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
void _start(void) {
  struct node a = {0, 1};
  volatile long long r = sum_list(&a) + classify(3) + fib(10);
  (void)r;
  for (;;)
    ;
}
