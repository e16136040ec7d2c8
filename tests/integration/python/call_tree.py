"""A Python program with a known call tree on two threads, for bpfprof's Python frames.

Main thread: main > harvest > ripen (a generator), main > catcher > thrower x4 (an exception
caught three frames up), main > digest (hashlib: native code under a Python caller), main >
import of orchard_import (its top-level code runs ripen_on_import); then thread "late":
late_worker > recursion_leaf.
Thread "grove": grove_worker > Grove.tend (a method) > orchard > orchard.<locals>.medlar (a
closure) > recurse x4 (recursion) > recursion_leaf; then grove_worker > parse (json).

`call_tree.py SECONDS` runs each part for SECONDS of its thread's CPU time (not the clock's: on a
busy machine each part still gets as many samples, it only takes longer); `call_tree.py --describe` prints
the line ranges of the functions as JSON ({qualname: [first, last]}) and exits.
"""
import hashlib
import json
import os
import sys
import threading
import time


def cpu_now():
    """This thread's CPU time: the parts are timed by it, and so is the profile's sampling.
    A system call (the clock's vDSO has no thread clocks): tight loops read it every 64 turns."""
    return time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)


def recursion_leaf(seconds):
    end = cpu_now() + seconds
    x = 1
    while cpu_now() < end:
        for _ in range(64):
            x = x * 7 % 1000003
    return x


def recurse(depth, seconds):
    if depth == 0:
        return recursion_leaf(seconds)
    return recurse(depth - 1, seconds) + 1


def orchard(seconds):
    def medlar():
        return recurse(3, seconds)

    return medlar()


class Grove:
    def tend(self, seconds):
        return orchard(seconds)


def parse(seconds):
    text = json.dumps({"trees": [{"name": "medlar", "age": i} for i in range(2000)]})
    end = cpu_now() + seconds
    while cpu_now() < end:
        json.loads(text)


def grove_worker(seconds):
    Grove().tend(seconds)
    parse(seconds / 2)


def ripen(seconds):
    end = cpu_now() + seconds
    x = 1
    while cpu_now() < end:
        for _ in range(64):
            x = x * 5 % 1000003
            yield x


def harvest(seconds):
    total = 0
    for fruit in ripen(seconds):
        total += fruit
    return total


def thrower(depth):
    if depth == 0:
        x = 1
        for _ in range(2000):
            x = x * 11 % 1000003
        raise ValueError(x)
    thrower(depth - 1)


def catcher(seconds):
    end = cpu_now() + seconds
    caught = 0
    while cpu_now() < end:
        try:
            thrower(3)
        except ValueError:
            caught += 1
    return caught


def digest(seconds):
    # Under 2 KiB hashlib keeps the GIL while it hashes: with more it lets go and then waits
    # for it behind the two spinning threads, and the phase is mostly off the CPU.
    data = b"orchard" * 290
    end = cpu_now() + seconds
    while cpu_now() < end:
        for _ in range(8):
            hashlib.sha256(data).hexdigest()


def late_worker(seconds):
    return recursion_leaf(seconds)


def main(seconds):
    worker = threading.Thread(target=grove_worker, args=(seconds * 2,), name="grove")
    worker.start()
    harvest(seconds)
    catcher(seconds)
    digest(seconds)
    os.environ["ORCHARD_IMPORT_SECONDS"] = str(seconds / 2)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import orchard_import  # noqa: F401  (its top-level code is the point)

    # A thread started late: with -p, after the recording attached.
    late = threading.Thread(target=late_worker, args=(seconds,), name="late")
    late.start()
    late.join()
    worker.join()


def describe():
    import inspect

    import orchard_import

    ranges = {}
    for module in (sys.modules[__name__], orchard_import):
        for name, obj in vars(module).items():
            for fn in [obj] + [v for v in vars(obj).values()] if inspect.isclass(obj) else [obj]:
                if inspect.isfunction(fn) and fn.__module__ == module.__name__:
                    lines, first = inspect.getsourcelines(fn)
                    ranges[fn.__qualname__] = [first, first + len(lines) - 1]
    lines, first = inspect.getsourcelines(orchard)
    ranges["orchard.<locals>.medlar"] = [first + 1, first + 2]
    print(json.dumps(ranges))


if __name__ == "__main__":
    if sys.argv[1:] == ["--describe"]:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        os.environ["ORCHARD_IMPORT_SECONDS"] = "0"
        describe()
    else:
        main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
