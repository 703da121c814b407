/* Compiled by the objdump test with cc -O2: loops, a switch (jump table), recursion,
 * PLT calls, SSE, division, string instructions, an atomic, and libgcc's popcount. */
#include <stdio.h>
#include <string.h>

struct node { struct node *next; long v; double w; };
struct big { long a[40]; };

__attribute__((noinline)) long sum_list(struct node *n) {
  long s = 0;
  for (; n; n = n->next) s += n->v * 3;
  return s;
}
__attribute__((noinline)) int classify(int x) {
  switch (x) {
  case 0: return 11; case 1: return 22; case 2: return puts("two"); case 3: return 44;
  case 4: return 55; case 5: return 66; case 6: return 7; default: return -1;
  }
}
__attribute__((noinline)) double dot(const double *a, const double *b, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}
__attribute__((noinline)) long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__attribute__((noinline)) void fill(char *p, size_t n) { memset(p, 'x', n); p[n / 2] = 0; }
__attribute__((noinline)) void zero(struct big *b) { *b = (struct big){0}; }
__attribute__((noinline)) unsigned long divmix(unsigned long a, unsigned long b) {
  return a / b + a % (b | 1) + __builtin_popcountl(a) + (a >> 7 ^ b << 3);
}
__attribute__((noinline)) int cmpstr(const char *a, const char *b) {
  return strcmp(a, b) < 0 ? -1 : (int)strlen(a);
}
static int counter;
__attribute__((noinline)) int bump(int k) {
  __atomic_fetch_add(&counter, k, __ATOMIC_SEQ_CST);
  return counter;
}
int main(int argc, char **argv) {
  struct node b = {0, 2, 1.5}, a = {&b, 1, 2.5};
  double x[4] = {1, 2, 3, 4};
  char buf[64];
  struct big big;
  fill(buf, 10);
  zero(&big);
  printf("%ld %d %f %ld %lu %d %d %ld\n", sum_list(&a), classify(argc), dot(x, x, argc + 3),
         fib(argc + 10), divmix(argc * 1000, 7), cmpstr(buf, argv[0]), bump(argc), big.a[3]);
  return 0;
}
