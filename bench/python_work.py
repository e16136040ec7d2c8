"""A fixed amount of CPU-bound Python work for bench/python_overhead.sh: recursion (about 30
Python frames deep, the walk's cost grows with depth), method calls and a str/dict mix.
Prints wall_ms=N (its own wall time) and cpu_ms=N (its own CPU time, which includes the
sampling interrupts and BPF programs that run on its CPU time, and not the time it waits for
a CPU on a busy machine)."""
import sys
import time


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Counter:
    def __init__(self):
        self.counts = {}

    def add(self, word):
        self.counts[word] = self.counts.get(word, 0) + 1


def words(rounds):
    c = Counter()
    for i in range(rounds):
        c.add("w%d" % (i % 997))
    return len(c.counts)


start = time.monotonic()
cpu_start = time.process_time()
scale = int(sys.argv[1]) if len(sys.argv) > 1 else 1
for _ in range(scale):
    fib(25)
    words(200000)
print("wall_ms=%.1f cpu_ms=%.1f" % ((time.monotonic() - start) * 1000,
                                   (time.process_time() - cpu_start) * 1000))
