#!/usr/bin/env bash
# What recording wakers costs in the kernel on a context-switch-heavy workload: BPF run time
# (kernel.bpf_stats_enabled) of the off-CPU program (on_switch) and the waker program
# (on_waking) while bpfprof records tests/fixtures/switch_heavy (two threads ping-ponging a
# byte over pipes: every round trip is two sleeps and two wakeups) with `--off-cpu` and with
# `--off-cpu --no-wakers`, ROUNDS interleaved rounds of 5 s. The counters are read 0.5 s and 2.5 s
# into each run; the BPF time in between is divided by the context switches the fixture made
# in that time (its own count, scaled to the window): on_switch also runs (and returns at
# once) for the switches of every other process of the machine. Throughput on this shared machine moves
# by 2x between runs (bench/offcpu_overhead.sh); the programs' own time does not. Needs root.
#   ROUNDS=5 CALL_GRAPH=dwarf bench/wakers_runtime.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BPFPROF=${BPFPROF:-build/bpfprof}
SWITCH_HEAVY=${SWITCH_HEAVY:-build/tests/fixtures/switch_heavy}
ROUNDS=${ROUNDS:-5}
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

# One run: prints `mode switch_ns switch_runs waking_ns waking_runs switches_in_window`.
run_one() {
  local mode=$1 flags=(--off-cpu)
  [ "$mode" = no-wakers ] && flags+=(--no-wakers)
  "$BPFPROF" record "${flags[@]}" --call-graph "$CALL_GRAPH" -F 1000 -o "$out/p.json.gz" -- \
    "$SWITCH_HEAVY" 5000 >"$out/stdout" 2>"$out/stderr" &
  local recorder=$!
  sleep 0.3
  local switch_info waking_info
  switch_info=$(program_fdinfo "$recorder" on_switch)
  waking_info=$(program_fdinfo "$recorder" on_waking)
  sleep 0.2
  read -r s0 c0 < <(counters "$switch_info")
  read -r w0 v0 < <(counters "$waking_info")
  sleep 2
  read -r s1 c1 < <(counters "$switch_info")
  read -r w1 v1 < <(counters "$waking_info")
  wait "$recorder"
  local switches rps
  switches=$(sed -n 's/^ctxt_switches=//p' "$out/stdout")
  # The fixture's switches over its 5 s, scaled to the 2 s window.
  echo "$mode $((s1 - s0)) $((c1 - c0)) $((w1 - w0)) $((v1 - v0)) $((switches * 2 / 5))"
}

echo "switch_heavy 5000 ms, ${ROUNDS} interleaved rounds, --call-graph ${CALL_GRAPH}, $(nproc) CPUs, kernel $(uname -r)" >&2
for round in $(seq "$ROUNDS"); do
  for mode in no-wakers wakers; do
    line=$(run_one "$mode")
    echo "$line" >>"$out/results"
    echo "round $round: $line" >&2
  done
done

python3 - "$out/results" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    m, sw_ns, sw_runs, wk_ns, wk_runs, switches = line.split()
    by.setdefault(m, []).append(tuple(map(int, (sw_ns, sw_runs, wk_ns, wk_runs, switches))))
med = statistics.median
print('| mode | on_switch ns/run | on_waking ns/run | on_waking runs per switch | BPF ns per context switch (median) |')
print('| --- | ---: | ---: | ---: | ---: |')
per_switch = {}
for m in ('no-wakers', 'wakers'):
    rs = by.get(m, [])
    if not rs:
        continue
    sw = med([r[0] / r[1] for r in rs if r[1]])
    wk = med([r[2] / r[3] for r in rs if r[3]]) if any(r[3] for r in rs) else 0
    ratio = med([r[3] / r[4] for r in rs if r[4]])
    per_switch[m] = med([(r[0] + r[2]) / r[4] for r in rs if r[4]])
    wk_text = f"{wk:,.0f}" if wk else '-'
    print(f"| --off-cpu{' --no-wakers' if m == 'no-wakers' else ''} | {sw:,.0f} | {wk_text} | {ratio:.2f} | {per_switch[m]:,.0f} |")
if len(per_switch) == 2:
    print(f"\nwakers: {per_switch['wakers'] / per_switch['no-wakers']:.2f}x the BPF time per context switch of off-CPU recording without them")
PY
