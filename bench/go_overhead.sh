#!/usr/bin/env bash
# Overhead on a CPU-bound Go program (the go_cpu fixture, tests/fixtures/go, with a fixed
# amount of work: `go_cpu work=N`, three goroutines hashing, encoding JSON and sorting), as
# its own wall time and CPU time: alone, under bpfprof at FREQ (the default: Go stacks walked
# in the kernel from Go's pcsp tables), under `perf record -g` (Go keeps frame pointers) and
# `perf record --call-graph dwarf` at the same rate. Modes interleaved for ROUNDS rounds;
# medians; slowdown against the alone baseline of the same run. Also bpfprof's ring-buffer
# bytes per sample and the share of stacks walked in the kernel, from its last summary. On a
# shared machine the wall times spread with the other load; the CPU times (the kernel's
# accounting of the workload's own threads) much less.
# Needs root.
#   ROUNDS=5 WORK=1500 bench/go_overhead.sh
#   GO_BIN=build/tests/fixtures/go/go_cpu_stripped bench/go_overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/rounds.sh
BUILD_DIR=${BUILD_DIR:-build}
BPFPROF=${BPFPROF:-$BUILD_DIR/bpfprof}
WORK_BIN=${GO_BIN:-$BUILD_DIR/tests/fixtures/go/go_cpu}
ROUNDS=${ROUNDS:-5}
WORK=${WORK:-1500}
FREQ=${FREQ:-1000}
WORK_ARGS=("work=$WORK")
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
[ -x "$WORK_BIN" ] || { echo "no $WORK_BIN (go not installed? build the fixtures)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

modes=(alone bpfprof-dwarf)
command -v perf >/dev/null && modes+=(perf-fp perf-dwarf)

# The workload's `wall_ms=.. cpu_ms=..` line as "WALL CPU"; bpfprof's -v summary kept.
run_one() {
  case $1 in
    bpfprof-dwarf) "$BPFPROF" record -v -F "$FREQ" -o "$out/p.json.gz" -- "$WORK_BIN" "${WORK_ARGS[@]}" \
      2>"$out/summary" ;;
    *) run_mode "$1" ;;
  esac | sed -n 's/^wall_ms=\([0-9.]*\) cpu_ms=\([0-9.]*\)/\1 \2/p'
}

run_rounds
base=$(mode_median alone)
base_cpu=$(mode_median alone 3)
echo "| mode | wall time (median of $ROUNDS) | vs alone | CPU time | vs alone |"
echo "| --- | ---: | ---: | ---: | ---: |"
for mode in "${modes[@]}"; do
  m=$(mode_median "$mode")
  c=$(mode_median "$mode" 3)
  [ -n "$m" ] || { echo "| $mode | failed | | | |"; continue; }
  printf '| %s | %.1f ms | %.3fx | %.1f ms | %.3fx |\n' "$mode" "$m" "$(echo "$m / $base" | bc -l)" \
    "$c" "$(echo "$c / $base_cpu" | bc -l)"
done
# bpfprof against perf, round by round (each against the alone run of its round).
if [[ " ${modes[*]} " == *" perf-fp "* ]]; then
  echo
  echo "| paired, per round (wall time) | rounds faster | median difference (points of slowdown) | range |"
  echo "| --- | ---: | ---: | ---: |"
  for other in perf-fp perf-dwarf; do paired_row bpfprof-dwarf "$other"; done
fi
echo
grep -E '^bpfprof: (Ring-buffer traffic|User stacks unwound in the kernel|user stacks complete)' \
  "$out/summary" | sed 's/^bpfprof: /bpfprof (last round): /' || true
