#!/usr/bin/env python3
"""bpfprof's own memory (issue 54), as root: peak RSS of `record -- CMD` and `record -a -d N`
against perf record -g in the same run, and where bpfprof's resident memory is at its peak,
by part: the BPF maps mapped into it (the ring buffer, mapped twice), the malloc heap and
arenas, the libraries, its own binary, the rest.

Every 10 ms /proc/PID/smaps of the recorder is read; the breakdown is the reading with the
largest total. Peak RSS is the kernel's (VmHWM), read just before the recorder exits.
Usage: ROUNDS=3 bench/memory.py
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
ROUNDS = int(os.environ.get("ROUNDS", "3"))
HAVE_PERF = subprocess.run(["sh", "-c", "command -v perf"], capture_output=True).returncode == 0


def part_of(name):
    if name.startswith("anon_inode:bpf"):
        return "BPF maps"
    if name in ("[heap]", ""):
        return "heap and arenas"
    if name.startswith("[stack"):
        return "stacks"
    if ".so" in name:
        return "libraries"
    if name == os.path.realpath(BPFPROF):
        return "binary"
    return "other"


def smaps_by_part(pid):
    parts = {}
    name = None
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                head = re.match(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$", line)
                if head:
                    name = head.group(1).strip()
                elif line.startswith("Rss:"):
                    part = part_of(name)
                    parts[part] = parts.get(part, 0) + int(line.split()[1])
    except OSError:
        return None
    return parts


def hwm_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1))
    except (OSError, AttributeError):
        return None


def run_watched(argv):
    """Runs argv; returns (peak RSS KB, the largest smaps reading by part)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    best, hwm = {}, 0
    while proc.poll() is None:
        parts = smaps_by_part(proc.pid)
        if parts and sum(parts.values()) > sum(best.values()):
            best = parts
        hwm = max(hwm, hwm_kb(proc.pid) or 0)
        time.sleep(0.01)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)}: exit {proc.returncode}")
    return hwm, best


def perf_rss(argv):
    """Peak RSS of perf record (its children's rusage: perf is the only child)."""
    script = ("import resource,subprocess,sys\n"
              "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
              "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True)
    return int(out.stdout.strip())


def main():
    tmp = tempfile.mkdtemp(prefix="bpfprof-memory-")
    out = os.path.join(tmp, "p.json.gz")
    cases = [("record -- sleep 1", ["record", "-o", out, "--", "sleep", "1"], ["--", "sleep", "1"]),
             ("record -a -d 3", ["record", "-a", "-d", "3", "-o", out], ["-a", "--", "sleep", "3"])]
    for label, args, perf_args in cases:
        peaks, perf_peaks, parts_seen = [], [], []
        for _ in range(ROUNDS):
            hwm, parts = run_watched([BPFPROF, *args])
            peaks.append(hwm / 1024)
            parts_seen.append(parts)
            if HAVE_PERF:
                perf_peaks.append(perf_rss(["perf", "record", "-g", "-o", os.path.join(tmp, "perf.data"),
                                            *perf_args]) / 1024)
        print(f"{label}: bpfprof peak RSS {statistics.median(peaks):.1f} MB "
              f"(runs {', '.join(f'{p:.1f}' for p in peaks)})" +
              (f"; perf record -g {statistics.median(perf_peaks):.1f} MB" if perf_peaks else ""))
        largest = max(parts_seen, key=lambda p: sum(p.values()))
        for part, kb in sorted(largest.items(), key=lambda x: -x[1]):
            print(f"    {part:16} {kb / 1024:6.1f} MB")


if __name__ == "__main__":
    main()
