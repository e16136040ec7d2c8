#!/usr/bin/env bash
# Off-CPU recording overhead on a context-switch-heavy workload: switch_heavy (two threads
# ping-ponging a byte over two pipes) run alone, under `bpfprof record --no-off-cpu --`,
# `--off-cpu --no-wakers` and `--off-cpu` (with wakers: each wakeup's waker and its stack),
# interleaved for ROUNDS rounds so that drift of the machine hits the modes alike. Reports, per mode, the median round trips/s and
# context switches/s (the fixture's own getrusage(RUSAGE_THREAD) counts), the slowdown
# against the baseline measured in the same run, bpfprof's own CPU time (its process and
# children from /usr/bin/time, minus the fixture's threads' CPU clocks; BPF programs run in
# the traced threads' context, so their cost shows as the workload's slowdown instead), and
# what bpfprof reports about samples and losses. Needs root. Run from the repo root.
#   ROUNDS=5 DURATION_MS=2000 FREQUENCY=1000 bench/offcpu_overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BPFPROF=${BPFPROF:-build/bpfprof}
SWITCH_HEAVY=${SWITCH_HEAVY:-build/tests/fixtures/switch_heavy}
ROUNDS=${ROUNDS:-5}
DURATION_MS=${DURATION_MS:-2000}
FREQUENCY=${FREQUENCY:-1000}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
[ -x "$BPFPROF" ] && [ -x "$SWITCH_HEAVY" ] || { echo "build first: cmake --build build" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One run: prints `mode roundtrips_per_s switches_per_s bpfprof_cpu_s samples lost`.
run_one() {
  local mode=$1 log=$out/run.log stdout=$out/run.out
  case $mode in
    alone)  /usr/bin/time -f 'cpu %U %S' -o "$log" "$SWITCH_HEAVY" "$DURATION_MS" >"$stdout" ;;
    no-off) /usr/bin/time -f 'cpu %U %S' -o "$log" "$BPFPROF" record --no-off-cpu -F "$FREQUENCY" \
              -o "$out/p.json.gz" -- "$SWITCH_HEAVY" "$DURATION_MS" >"$stdout" 2>"$out/err" ;;
    off-nowake) /usr/bin/time -f 'cpu %U %S' -o "$log" "$BPFPROF" record --off-cpu --no-wakers \
              -F "$FREQUENCY" -o "$out/p.json.gz" -- "$SWITCH_HEAVY" "$DURATION_MS" >"$stdout" 2>"$out/err" ;;
    off)    /usr/bin/time -f 'cpu %U %S' -o "$log" "$BPFPROF" record --off-cpu -F "$FREQUENCY" \
              -o "$out/p.json.gz" -- "$SWITCH_HEAVY" "$DURATION_MS" >"$stdout" 2>"$out/err" ;;
  esac
  local rt rps sw fixture_ns total samples lost
  rt=$(sed -n 's/^roundtrips=//p' "$stdout")
  rps=$(sed -n 's/^roundtrips_per_s=//p' "$stdout")
  sw=$(sed -n 's/^ctxt_switches=//p' "$stdout")
  fixture_ns=$(sed -n 's/^cputime .* ns=//p' "$stdout" | paste -sd+ | bc)
  total=$(awk '/^cpu /{print $2 + $3}' "$log")
  samples=-; lost=-
  if [ "$mode" != alone ]; then
    samples=$(sed -n 's/^bpfprof: \([0-9]*\) samples.*/\1/p' "$out/err")
    lost=$(sed -n 's/.*; \([0-9]*\) events lost.*/\1/p' "$out/err")
  fi
  awk -v m="$mode" -v rt="$rt" -v rps="$rps" -v sw="$sw" -v fx="$fixture_ns" -v tot="$total" \
      -v s="${samples:--}" -v l="${lost:--}" 'BEGIN {
        own = (m == "alone") ? 0 : tot - fx / 1e9; if (own < 0) own = 0;
        printf "%s %.0f %.0f %.3f %s %s\n", m, rps, sw * rps / rt, own, s, l }'
}

echo "switch_heavy ${DURATION_MS} ms, ${ROUNDS} interleaved rounds, bpfprof -F ${FREQUENCY}, $(nproc) CPUs, kernel $(uname -r)" >&2
for round in $(seq "$ROUNDS"); do
  for mode in alone no-off off-nowake off; do
    line=$(run_one "$mode")
    echo "$line" >>"$out/results"
    echo "round $round: $line" >&2
  done
done

python3 - "$out/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for m, rps, sps, own, samples, lost in rows:
    by.setdefault(m, []).append((float(rps), float(sps), float(own), samples, lost))
med = lambda xs: statistics.median(xs)
base_rps = med([r[0] for r in by['alone']])
base_sps = med([r[1] for r in by['alone']])
names = {'alone': 'alone', 'no-off': 'bpfprof --no-off-cpu',
         'off-nowake': 'bpfprof --off-cpu --no-wakers', 'off': 'bpfprof --off-cpu (wakers)'}
print('| mode | round trips/s (median) | context switches/s (median) | slowdown vs alone | bpfprof CPU s (median) | samples (median) | lost (max) |')
print('| --- | ---: | ---: | ---: | ---: | ---: | ---: |')
for m in ('alone', 'no-off', 'off-nowake', 'off'):
    rs = by.get(m, [])
    if not rs:
        continue
    rps, sps = med([r[0] for r in rs]), med([r[1] for r in rs])
    own = '-' if m == 'alone' else f"{med([r[2] for r in rs]):.3f}"
    samples = '-' if m == 'alone' else f"{med([int(r[3]) for r in rs if r[3].isdigit()] or [0]):.0f}"
    lost = '-' if m == 'alone' else str(max([int(r[4]) for r in rs if r[4].isdigit()] or [0]))
    print(f"| {names[m]} | {rps:,.0f} | {sps:,.0f} | {base_rps / rps:.2f}x | {own} | {samples} | {lost} |")
if by.get('off') and by.get('off-nowake'):
    wake = med([r[0] for r in by['off']])
    nowake = med([r[0] for r in by['off-nowake']])
    print(f"\nwakers cost: {nowake / wake:.3f}x the time per round trip of off-CPU recording without them")
PY
