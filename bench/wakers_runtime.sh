#!/usr/bin/env bash
# What recording off-CPU time and wakers costs in the kernel on a context-switch-heavy workload:
# BPF run time (kernel.bpf_stats_enabled) of the scheduler programs (on_switch, and on_waking
# with wakers) while bpfprof records tests/fixtures/switch_heavy (two threads ping-ponging a
# byte over pipes: every round trip is two sleeps and two wakeups) with `--off-cpu` and with
# `--off-cpu --no-wakers`, ROUNDS interleaved rounds of 5 s. The counters are read 0.5 s and 2.5 s
# into each run; the BPF time in between is divided by the context switches the fixture made
# in that time (its own count, scaled to the window): on_switch also runs (and returns at
# once) for the switches of every other process of the machine. Throughput on this shared machine moves
# by 2x between runs (bench/offcpu_overhead.sh); the programs' own time does not. BASELINE=another
# build's bpfprof is measured in the same rounds, interleaved. Needs root.
#   ROUNDS=5 CALL_GRAPH=dwarf [BASELINE=/path/to/bpfprof] bench/wakers_runtime.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BPFPROF=${BPFPROF:-build/bpfprof}
SWITCH_HEAVY=${SWITCH_HEAVY:-build/tests/fixtures/switch_heavy}
ROUNDS=${ROUNDS:-5}
BASELINE=${BASELINE:-}
CALL_GRAPH=${CALL_GRAPH:-dwarf}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
[ -x "$BPFPROF" ] && [ -x "$SWITCH_HEAVY" ] || { echo "build first: cmake --build build" >&2; exit 1; }
out=$(mktemp -d)
before=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled=$before; rm -rf "$out"' EXIT
sysctl -qw kernel.bpf_stats_enabled=1

# The fdinfo file of process $1's descriptor of its program named $2 (empty if none): other
# recorders (other sessions' tests) may run at the same time, with programs of those names.
program_fdinfo() {
  python3 - "$1" "$2" <<'PY'
import glob, json, re, subprocess, sys
pid, name = sys.argv[1], sys.argv[2]
progs = json.loads(subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True,
                                  text=True).stdout or "[]")
names = {str(p["id"]): p.get("name") for p in progs}
for info in glob.glob(f"/proc/{pid}/fdinfo/*"):
    try:
        text = open(info).read()
    except OSError:
        continue
    m = re.search(r"^prog_id:\s*(\d+)", text, re.M)
    if m and "run_time_ns" in text and names.get(m.group(1)) == name:
        print(info)
        break
PY
}

# "run_time_ns run_cnt" from a program's fdinfo ("0 0" without one).
counters() {
  if [ -n "$1" ]; then
    awk '/^run_time_ns:/{t=$2} /^run_cnt:/{c=$2} END{print t+0, c+0}' "$1"
  else
    echo 0 0
  fi
}

# The scheduler programs' run time and runs, summed: "ns runs".
sched_counters() {
  local ns=0 runs=0 t c
  for info in "$@"; do
    read -r t c < <(counters "$info")
    ns=$((ns + t)) runs=$((runs + c))
  done
  echo "$ns $runs"
}

# One run of build $1 (its bpfprof $2): prints `mode ns runs switches_in_window`.
run_one() {
  local build=$1 recorder_path=$2 wakers=$3 flags=(--off-cpu)
  [ "$wakers" = no-wakers ] && flags+=(--no-wakers)
  "$recorder_path" record "${flags[@]}" --call-graph "$CALL_GRAPH" -F 1000 -o "$out/p.json.gz" -- \
    "$SWITCH_HEAVY" 5000 >"$out/stdout" 2>"$out/stderr" &
  local recorder=$!
  sleep 0.3
  local infos=() info
  # The walkers run tail-called by their dispatchers, whose counters take their time (builds
  # before the dispatchers have none).
  for name in on_switch on_waking dispatch_switch dispatch_waking; do
    info=$(program_fdinfo "$recorder" "$name")
    [ -n "$info" ] && infos+=("$info")
  done
  sleep 0.2
  read -r n0 r0 < <(sched_counters "${infos[@]}")
  sleep 2
  read -r n1 r1 < <(sched_counters "${infos[@]}")
  wait "$recorder"
  local switches
  switches=$(sed -n 's/^ctxt_switches=//p' "$out/stdout")
  # The fixture's switches over its 5 s, scaled to the 2 s window.
  echo "$build/$wakers $((n1 - n0)) $((r1 - r0)) $((switches * 2 / 5))"
}

builds=("build=$BPFPROF")
[ -n "$BASELINE" ] && builds+=("baseline=$BASELINE")
echo "switch_heavy 5000 ms, ${ROUNDS} interleaved rounds, --call-graph ${CALL_GRAPH}, $(nproc) CPUs, kernel $(uname -r); ${builds[*]}" >&2
for round in $(seq "$ROUNDS"); do
  for build in "${builds[@]}"; do
    for wakers in no-wakers wakers; do
      line=$(run_one "${build%%=*}" "${build#*=}" "$wakers")
      echo "$line" >>"$out/results"
      echo "round $round: $line" >&2
    done
  done
done

python3 - "$out/results" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    mode, ns, runs, switches = line.split()
    by.setdefault(mode, []).append((int(ns), int(runs), int(switches)))
med = statistics.median
print('| build, mode | scheduler programs ns/run | runs per switch | BPF ns per context switch (median) |')
print('| --- | ---: | ---: | ---: |')
for mode, rs in by.items():
    per_run = med([r[0] / r[1] for r in rs if r[1]])
    runs = med([r[1] / r[2] for r in rs if r[2]])
    per_switch = med([r[0] / r[2] for r in rs if r[2]])
    print(f"| {mode} | {per_run:,.0f} | {runs:.2f} | {per_switch:,.0f} |")
PY
