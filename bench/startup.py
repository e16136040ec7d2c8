#!/usr/bin/env python3
"""Start-up and wind-down (issue 7, item 6), bpfprof against perf record, as root.

For each tool and call-graph mode, ROUNDS interleaved runs of `TOOL -- startup_probe 300`
(bench/startup_probe.c prints CLOCK_MONOTONIC at main and just before exit); medians of
  - spawn -> the command's main (includes loading the tool and its BPF programs),
  - the tool's first sample (bpfprof: as it reports it, from its own start; perf: the first
    sample's CLOCK_MONOTONIC timestamp in perf.data, from the spawn),
  - the command's exit -> the tool's exit with the output written (bpfprof symbolizes and
    writes the final profile; perf record only flushes perf.data, `perf script` comes on top
    and is shown separately).
Usage: ROUNDS=5 bench/startup.py
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BPFPROF = os.environ.get("BPFPROF", os.path.join(ROOT, "build", "bpfprof"))
PROBE = os.environ.get("PROBE", os.path.join(ROOT, "build", "bench", "startup_probe"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
have_perf = subprocess.run(["sh", "-c", "command -v perf"], capture_output=True).returncode == 0


def probe_times(stdout):
    main = int(re.search(r"main_ns=(\d+)", stdout).group(1))
    exit_ = int(re.search(r"exit_ns=(\d+)", stdout).group(1))
    return main, exit_


def run_bpfprof(tmp, call_graph):
    out = os.path.join(tmp, "p.json.gz")
    t0 = time.monotonic_ns()
    r = subprocess.run([BPFPROF, "record", "-v", "-F", "1000", "--call-graph", call_graph, "-o", out, "--", PROBE, "300"],
                       capture_output=True, text=True)
    t_end = time.monotonic_ns()
    if r.returncode != 0:
        sys.exit(f"bpfprof failed: {r.stderr}")
    main, exit_ = probe_times(r.stdout)
    first = float(re.search(r"first sample after (\d+) ms", r.stderr).group(1))
    return {"to_main": (main - t0) / 1e6, "to_first_sample": first, "exit_to_written": (t_end - exit_) / 1e6,
            "then_readable": 0.0}


def run_perf(tmp, call_graph):
    out = os.path.join(tmp, "perf.data")
    args = ["-g"] if call_graph == "fp" else ["--call-graph", "dwarf"]
    t0 = time.monotonic_ns()
    r = subprocess.run(["perf", "record", "-q", "-F", "1000", "-k", "CLOCK_MONOTONIC", *args, "-o", out, "--", PROBE, "300"],
                       capture_output=True, text=True)
    t_end = time.monotonic_ns()
    if r.returncode != 0:
        sys.exit(f"perf failed: {r.stderr}")
    main, exit_ = probe_times(r.stdout)
    s0 = time.monotonic_ns()
    script = subprocess.run(["perf", "script", "-i", out, "-F", "time"], capture_output=True, text=True)
    s1 = time.monotonic_ns()
    first_line = next(line for line in script.stdout.splitlines() if line.strip())
    first_ns = int(round(float(first_line.strip().rstrip(":")) * 1e9))
    return {"to_main": (main - t0) / 1e6, "to_first_sample": (first_ns - t0) / 1e6,
            "exit_to_written": (t_end - exit_) / 1e6, "then_readable": (s1 - s0) / 1e6}


def main():
    if os.geteuid() != 0:
        sys.exit("needs root")
    modes = [("bpfprof --call-graph fp", run_bpfprof, "fp"), ("bpfprof --call-graph dwarf", run_bpfprof, "dwarf")]
    if have_perf:
        modes += [("perf record -g", run_perf, "fp"), ("perf record --call-graph dwarf", run_perf, "dwarf")]
    results = {name: [] for name, _, _ in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(ROUNDS):
            for name, fn, cg in modes:
                results[name].append(fn(tmp, cg))
    print(f"| tool | spawn to the command's main | to the first sample | command exit to output written | + perf script |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, _, _ in modes:
        med = {k: statistics.median(r[k] for r in results[name]) for k in results[name][0]}
        extra = f"{med['then_readable']:.0f} ms" if name.startswith("perf") else "–"
        print(f"| {name} | {med['to_main']:.0f} ms | {med['to_first_sample']:.0f} ms | {med['exit_to_written']:.0f} ms | {extra} |")
    print(f"\nmedians of {ROUNDS} interleaved runs; bpfprof's first sample is counted from its own start")


if __name__ == "__main__":
    main()
