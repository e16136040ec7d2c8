#!/usr/bin/env bash
# Overhead on a fixed amount of work (tests/fixtures/fixed_work: two threads, both CPUs, user
# arithmetic and write() system calls), as the workload's own wall time: alone, under
# bpfprof at FREQ (1 kHz unless given; --call-graph fp and dwarf, defaults otherwise), under
# `perf record -g` and `perf record --call-graph dwarf` at the same rate; bpfprof dwarf is the default (stacks
# walked in the kernel, a stack copy as the fallback), dwarf-copy copies every stack. Modes interleaved for ROUNDS
# rounds; medians; slowdown against the alone baseline of the same run. Needs root.
# SHAPE=deep: the work runs in a qsort callback under a 24-deep recursion (~30 frames through
# libc, no frame pointers), the overhead workload.
#   ROUNDS=5 WORK=80000 SHAPE=deep bench/overhead.sh
#   ROUNDS=15 SHAPE=deep MODES="bpfprof-dwarf perf-fp perf-nostack" bench/overhead.sh
#   ROUNDS=7 WORK=40000 FREQ=10000 SHAPE=deep bench/overhead.sh  (per-sample costs x10)
#   BPFPROF_BASE=/tmp/old/bpfprof MODES="bpfprof-dwarf base-dwarf perf-fp" bench/overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/rounds.sh
BPFPROF=${BPFPROF:-build/bpfprof}
WORK_BIN=${WORK_BIN:-build/tests/fixtures/fixed_work}
ROUNDS=${ROUNDS:-5}
WORK=${WORK:-80000}
SHAPE=${SHAPE:-flat}
FREQ=${FREQ:-1000}  # samples per second; a higher rate magnifies the per-sample costs
[ "$SHAPE" = deep ] && WORK_ARGS=("$WORK" deep) || WORK_ARGS=("$WORK")
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
have_perf=1
command -v perf >/dev/null || have_perf=0

modes=(alone bpfprof-fp bpfprof-dwarf bpfprof-dwarf-copy)
((have_perf)) && modes+=(perf-nostack perf-fp perf-dwarf)
# MODES="alone bpfprof-dwarf perf-fp": only these (alone is always the baseline), for more
# rounds of a close comparison in the same time.
if [ -n "${MODES:-}" ]; then
  read -r -a modes <<< "$MODES"
  [[ " ${modes[*]} " == *" alone "* ]] || modes=(alone "${modes[@]}")
fi

run_one() { run_mode "$1" | sed -n 's/^wall_ms=//p'; }

run_rounds
base=$(mode_median alone)
echo "| mode | workload wall time (median of $ROUNDS) | slowdown vs alone |"
echo "| --- | ---: | ---: |"
for mode in "${modes[@]}"; do
  m=$(mode_median "$mode")
  printf '| %s | %.1f ms | %.3fx |\n' "$mode" "$m" "$(echo "$m / $base" | bc -l)"
done

# The default against perf, round by round.
pairs=()
for other in perf-fp perf-dwarf perf-nostack base-dwarf; do
  [[ " ${modes[*]} " == *" bpfprof-dwarf "* && " ${modes[*]} " == *" $other "* ]] &&
    pairs+=("bpfprof-dwarf $other")
done
if ((${#pairs[@]})); then
  echo
  echo "| paired, per round | rounds faster | median difference (points of slowdown) | range |"
  echo "| --- | ---: | ---: | ---: |"
  for pair in "${pairs[@]}"; do paired_row $pair; done
fi
