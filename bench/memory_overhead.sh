#!/usr/bin/env bash
# Cost of recording memory on an allocation-heavy program (bench/alloc_work.c: malloc and free
# in a loop for a fixed time while another function grows the heap to 600 MiB, page by page):
# the loop's iterations done alone, under bpfprof without and with --memory (the memory track
# and one in 64 page faults with its stack) and with --allocations (a uprobe on every malloc and
# free, one call per 512 KiB sampled with its stack), under heaptrack (every malloc and free),
# and under perf record -e page-faults -g (every page fault with its stack). Modes interleaved for ROUNDS
# rounds; medians; the work each does as a share of alone's. Needs root.
#   ROUNDS=5 MS=3000 bench/memory_overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/rounds.sh
BPFPROF=${BPFPROF:-build/bpfprof}
ROUNDS=${ROUNDS:-5}
MS=${MS:-3000}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Built here, as a C program outside the project's build would be.
WORK_BIN=${WORK_BIN:-$out/alloc_work}
[ -x "$WORK_BIN" ] || cc -O2 -g -o "$WORK_BIN" bench/alloc_work.c

modes=(alone bpfprof bpfprof-memory bpfprof-allocations heaptrack perf-page-faults)
run_one() {
  case $1 in
    alone) "$WORK_BIN" "$MS" ;;
    bpfprof) "$BPFPROF" record -o "$out/p.json.gz" -- "$WORK_BIN" "$MS" 2>/dev/null ;;
    bpfprof-memory) "$BPFPROF" record --memory -o "$out/m.json.gz" -- "$WORK_BIN" "$MS" 2>"$out/summary" ;;
    bpfprof-allocations)
      "$BPFPROF" record --allocations -o "$out/a.json.gz" -- "$WORK_BIN" "$MS" 2>"$out/allocations" ;;
    heaptrack) heaptrack -o "$out/heaptrack" "$WORK_BIN" "$MS" 2>/dev/null | grep '^work' ;;
    perf-page-faults) perf record -q -e page-faults -g -o "$out/perf.data" -- "$WORK_BIN" "$MS" 2>/dev/null ;;
  esac | sed -n 's/^work iterations=\([0-9]*\) .*/\1/p'
}

run_rounds
base=$(mode_median alone)
echo "| mode | loop iterations in $MS ms (median of $ROUNDS) | work done, vs alone |"
echo "| --- | ---: | ---: |"
for mode in "${modes[@]}"; do
  m=$(mode_median "$mode")
  printf '| %s | %.0f | %.1f%% |\n' "$mode" "$m" "$(echo "100 * $m / $base" | bc -l)"
done
grep -E 'bpfprof: (peak resident|memory brought in)' "$out/summary" || true
grep -E 'bpfprof: (allocated|still held)' "$out/allocations" || true
