#!/usr/bin/env python3
"""Pools the rounds of several bench/overhead.sh runs (their stderr logs, "round N: MODE X ms"
lines) and compares bpfprof's default with the other modes round by round: each mode's
slowdown against the same round's `alone` run, the median of the per-round differences in
points of slowdown, and a 95% bootstrap interval of that median.

    bench/overhead.sh 2> run1.log; bench/overhead.sh 2> run2.log
    bench/pool_rounds.py run1.log run2.log
"""
import random
import re
import statistics
import sys

ROUND = re.compile(r"round (\d+): (\S+) ([\d.]+) ms")
SUBJECT = "bpfprof-dwarf"


def read_rounds(paths):
    rounds = []
    for path in paths:
        by_round = {}
        with open(path) as log:
            for line in log:
                m = ROUND.match(line)
                if m:
                    by_round.setdefault(int(m[1]), {})[m[2]] = float(m[3])
        rounds += [r for r in by_round.values() if "alone" in r and SUBJECT in r]
    return rounds


def bootstrap_median(values, draws=5000):
    rng = random.Random(1)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    return medians[int(0.025 * draws)], medians[int(0.975 * draws) - 1]


def main(paths):
    rounds = read_rounds(paths)
    if not rounds:
        sys.exit(f"no round with both alone and {SUBJECT} in {' '.join(paths)}")
    modes = sorted({m for r in rounds for m in r} - {"alone"})
    print(f"{len(rounds)} rounds")
    print("| mode | median slowdown |\n| --- | ---: |")
    for mode in modes:
        ratios = [r[mode] / r["alone"] for r in rounds if mode in r]
        print(f"| {mode} | {statistics.median(ratios):.4f}x |")
    print("\n| default vs | rounds faster | median difference | 95% bootstrap interval |")
    print("| --- | ---: | ---: | ---: |")
    for other in modes:
        if other == SUBJECT:
            continue
        d = [100 * (r[SUBJECT] - r[other]) / r["alone"] for r in rounds if other in r]
        low, high = bootstrap_median(d)
        faster = sum(1 for x in d if x < 0)
        print(f"| {other} | {faster} of {len(d)} | {statistics.median(d):+.2f} points | "
              f"{low:+.2f} .. {high:+.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
