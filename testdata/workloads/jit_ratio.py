"""Two Python functions with a known 3:2 iteration ratio, for the JIT tests
(cli/tests/profreport/jit.rs): `f_three` runs 3000 iterations for each 2000
of `f_two`, called from `main` until SECONDS (argv[1]) have passed.
"""
import sys
import time


def f_three(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def f_two(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def main():
    end = time.time() + float(sys.argv[1] if len(sys.argv) > 1 else 3)
    while time.time() < end:
        f_three(3000)
        f_two(2000)


main()
