#!/usr/bin/env bash
# Overhead on a CPU-bound program of one runtime, as its wall time and CPU time: alone, under
# bpfprof at FREQ (the default: no flags, stacks walked in the kernel), under `perf record -g`
# and `perf record --call-graph dwarf` at the same rate; for node and java also with the flags
# that perf needs to walk or name their frames (node --perf-basic-prof, java
# -XX:+PreserveFramePointer), alone and under perf -g. Modes interleaved for ROUNDS rounds;
# medians; slowdown against the alone baseline of the same run. Also bpfprof's ring-buffer bytes
# per sample, the share of stacks walked in the kernel and the runtime's naming figures, from
# its last summary. On a shared machine the wall times spread with the other load; the CPU
# times (the kernel's accounting of the workload's own threads) much less.
#   RUNTIME=go:   the go_cpu fixture (tests/fixtures/go), `go_cpu work=WORK` (default 1500):
#                 three goroutines hashing, encoding JSON and sorting; it times its own work.
#   RUNTIME=node: the system's node on tests/fixtures/js/work.js `rounds=WORK` (default 1600);
#   RUNTIME=java: the system's java on fixture.Work `rounds=WORK` (default 1500):
#                 timed whole (start-up and JIT warm-up included) by build/bench/measure_child.
# Needs root.
#   RUNTIME=node ROUNDS=10 bench/runtime_overhead.sh
#   RUNTIME=go GO_BIN=build/tests/fixtures/go/go_cpu_stripped bench/runtime_overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/rounds.sh
BUILD_DIR=${BUILD_DIR:-build}
BPFPROF=${BPFPROF:-$BUILD_DIR/bpfprof}
RUNTIME=${RUNTIME:-go}
ROUNDS=${ROUNDS:-5}
FREQ=${FREQ:-1000}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
MEASURE=$BUILD_DIR/bench/measure_child
# FLAGS_ENV: how the perf-friendly flags reach the runtime (an environment variable it reads).
case $RUNTIME in
  go)
    WORK_BIN=${GO_BIN:-$BUILD_DIR/tests/fixtures/go/go_cpu}
    WORK_ARGS=("work=${WORK:-1500}")
    FLAGS_ENV= ;;
  node)
    WORK_BIN=$MEASURE
    WORK_ARGS=(node tests/fixtures/js/work.js "rounds=${WORK:-1600}")
    FLAGS_ENV="NODE_OPTIONS=--perf-basic-prof" ;;
  java)
    WORK_BIN=$MEASURE
    WORK_ARGS=(java -cp "$BUILD_DIR/tests/fixtures/java/classes" fixture.Work "rounds=${WORK:-1500}")
    FLAGS_ENV="JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer" ;;
  *) echo "RUNTIME is go, node or java" >&2; exit 1 ;;
esac
[ -x "$WORK_BIN" ] || { echo "no $WORK_BIN: build the fixtures and bench programs" >&2; exit 1; }
[ "$RUNTIME" = go ] || command -v "${WORK_ARGS[0]}" >/dev/null || { echo "no ${WORK_ARGS[0]}" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

modes=(alone bpfprof-dwarf)
command -v perf >/dev/null && modes+=(perf-fp perf-dwarf)
[ -n "$FLAGS_ENV" ] && modes+=(flags:alone) && command -v perf >/dev/null && modes+=(flags:perf-fp)

# The workload's `wall_ms=.. cpu_ms=..` line as "WALL CPU"; bpfprof's -v summary kept.
run_one() {
  case $1 in
    bpfprof-dwarf) "$BPFPROF" record -v -F "$FREQ" -o "$out/p.json.gz" -- "$WORK_BIN" "${WORK_ARGS[@]}" \
      2>"$out/summary" ;;
    flags:*) (export "${FLAGS_ENV?}"; run_mode "${1#flags:}" 2>/dev/null) ;;
    *) run_mode "$1" ;;
  esac | sed -n 's/^wall_ms=\([0-9.]*\) cpu_ms=\([0-9.]*\)/\1 \2/p'
}

# node's perf maps (--perf-basic-prof writes /tmp/perf-PID.map, and node 20 its V8 log into the
# working directory): those of this run removed.
perf_maps() {
  {
    find /tmp -maxdepth 1 -name 'perf-*.map' -user "$(id -u)" 2>/dev/null
    find . -maxdepth 1 -name 'isolate-0x*-v8.log' 2>/dev/null
  } | sort
}
perf_maps > "$out/maps.before"
trap 'perf_maps | comm -13 "$out/maps.before" - | xargs -r rm -f; rm -rf "$out"' EXIT

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
  [[ " ${modes[*]} " == *" flags:perf-fp "* ]] && paired_row bpfprof-dwarf flags:perf-fp
fi
echo
grep -E '^bpfprof: (Ring-buffer traffic|User stacks unwound in the kernel|user stacks complete|.*code objects read)' \
  "$out/summary" | sed 's/^bpfprof: /bpfprof (last round): /' || true
