#!/usr/bin/env bash
# The cost of one sample, timed where it is paid: the cpu-clock event's hrtimer callback
# (perf_swevent_hrtimer), from the timer:hrtimer_expire_entry to the hrtimer_expire_exit
# tracepoint, for the samples of the workload (tests/fixtures/fixed_work) only. That callback
# holds everything a sampler does in the interrupt: perf's own sample output and call chain,
# or bpfprof's BPF program. The wall-time benchmark (overhead.sh) sees the same cost diluted
# in the interrupts' and the machine's noise; here it is measured per sample, so that a
# difference of a few hundred ns per sample shows at 1 kHz.
# Modes interleaved for ROUNDS rounds; per mode the median over rounds of the mean ns per
# sample, and that less perf-nostack's (the timer, perf's bookkeeping and a sample without a
# stack: what every sampler pays here). Needs root and bpftrace (scripts/install-deps.sh --bench).
#   ROUNDS=5 SHAPE=deep bench/sample_cost.sh
#   MODES="bpfprof-dwarf perf-fp" BPFPROF_BASE=/tmp/old/bpfprof bench/sample_cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BPFPROF=${BPFPROF:-build/bpfprof}
WORK_BIN=${WORK_BIN:-build/tests/fixtures/fixed_work}
ROUNDS=${ROUNDS:-5}
WORK=${WORK:-60000}
SHAPE=${SHAPE:-deep}
FREQ=${FREQ:-1000}
[ "$SHAPE" = deep ] && WORK_ARGS=("$WORK" deep) || WORK_ARGS=("$WORK")
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
command -v bpftrace >/dev/null || { echo "needs bpftrace (scripts/install-deps.sh --bench)" >&2; exit 1; }
. bench/rounds.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
read -r -a modes <<< "${MODES:-perf-nostack perf-fp perf-dwarf bpfprof-fp bpfprof-dwarf bpfprof-dwarf-copy}"
[[ " ${modes[*]} " == *" perf-nostack "* ]] || modes=(perf-nostack "${modes[@]}")
comm=$(basename "$WORK_BIN" | cut -c1-15)

cat > "$out/cost.bt" <<EOF
tracepoint:timer:hrtimer_expire_entry
/args->function == kaddr("perf_swevent_hrtimer") && comm == "$comm"/
{ @start[cpu] = nsecs; }
tracepoint:timer:hrtimer_expire_exit
/@start[cpu]/
{ @ns = stats(nsecs - @start[cpu]); delete(@start[cpu]); }
EOF

# bpftrace prints its maps and exits on SIGINT, but now and then misses the first one (seen
# once in ~20 rounds, a round then hung for good): send it again until it is gone.
stop_tracer() {
  for _ in $(seq 20); do
    kill -INT "$1" 2>/dev/null || break
    for _ in $(seq 30); do kill -0 "$1" 2>/dev/null || break 2; sleep 0.1; done
  done
  wait "$1" || true
}

# Prints "MEAN_NS COUNT" for one recording of mode $1 (run_rounds' "ms" column holds the mean).
run_one() {
  bpftrace "$out/cost.bt" > "$out/bt" 2>&1 &
  local tracer=$!
  for _ in $(seq 100); do grep -q "Attaching" "$out/bt" && break; sleep 0.1; done
  sleep 0.5
  run_mode "$1" >/dev/null || true
  stop_tracer "$tracer"
  sed -n 's/^@ns: count \([0-9]*\), average \([0-9]*\),.*/\2 \1/p' "$out/bt"
}

run_rounds
floor=$(mode_median perf-nostack)
echo "| mode | samples per run | ns per sample in the interrupt (median of $ROUNDS) | less perf-nostack |"
echo "| --- | ---: | ---: | ---: |"
for mode in "${modes[@]}"; do
  m=$(mode_median "$mode")
  printf '| %s | %.0f | %.0f | %+.0f |\n' "$mode" "$(mode_median "$mode" 3)" "$m" "$(echo "$m - $floor" | bc -l)"
done

echo
echo "| paired, per round | rounds cheaper | median difference (ns per sample) | range |"
echo "| --- | ---: | ---: | ---: |"
for other in perf-fp perf-dwarf base-dwarf; do
  [[ " ${modes[*]} " == *" bpfprof-dwarf "* && " ${modes[*]} " == *" $other "* ]] &&
    paired_row bpfprof-dwarf "$other" raw
done
