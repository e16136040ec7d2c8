#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (sanitizers on) and runs each for a bounded time
# over its seed corpus in tests/fuzz/corpus/<target>/ (new inputs go to a temporary
# directory, not into the repository). Exits non-zero on the first crash, leak, hang or
# sanitizer report; the reproducer is left in the build directory.
#   SECONDS_PER_TARGET=10 FUZZ_OPT=-O1 tests/fuzz/run.sh [build-dir]
# INPUT_TIMEOUT (seconds, default 10): an input that runs longer is a hang. `make test` runs
# this at idle priority beside the recordings, where wall time is not CPU time: it allows more.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build/fuzz}
mkdir -p "$build" && build=$(cd "$build" && pwd)  # the targets run from there
seconds=${SECONDS_PER_TARGET:-10}
input_timeout=${INPUT_TIMEOUT:-10}
command -v clang++ > /dev/null || { echo "fuzz: clang++ is needed" >&2; exit 1; }
# Ninja for a new build directory where it is installed (an existing one keeps its generator).
generator=()
[ -f "$build/CMakeCache.txt" ] || ! command -v ninja > /dev/null || generator=(-G Ninja)
# A unity build: half the compile time (see the Makefile's UNITY).
CC=clang CXX=clang++ cmake -S "$here" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFUZZ_OPT="${FUZZ_OPT:--O1}" -DCMAKE_UNITY_BUILD=ON > /dev/null
cmake --build "$build" -j "$(nproc)" > "$build/build.log" 2>&1 || { tail -30 "$build/build.log" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One target per CPU at a time: each keeps its full time, and the run takes a CPU-th of it.
run_target() {
  local target=$1
  mkdir -p "$work/$target"
  local log=$build/$target.log
  # Full malloc stacks where the suppression (lsan.supp) must see libdwfl's frames.
  local asan=""
  [ "$target" = fuzz_elf ] && asan=fast_unwind_on_malloc=0
  if (cd "$build" && ASAN_OPTIONS=$asan LSAN_OPTIONS=suppressions=$here/lsan.supp "./$target" -max_total_time="$seconds" -timeout="$input_timeout" -rss_limit_mb=2048 -print_final_stats=1 \
        "$work/$target" "$here/corpus/${target#fuzz_}" > "$log" 2>&1); then
    local runs speed
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    echo "fuzz: $target: ${runs:-?} runs in ${seconds} s (${speed:-?}/s), no failure"
  else
    echo "fuzz: $target FAILED; see $log (reproducer: $build/crash-* / leak-* / timeout-*)" >&2
    grep -m5 -E "ERROR|SUMMARY|runtime error" "$log" >&2 || tail -20 "$log" >&2
    return 1
  fi
}
status=0
running=0
# Every target the build made.
targets=$(find "$build" -maxdepth 1 -name 'fuzz_*' -type f -perm -u+x -printf '%f\n' | sort)
[ -n "$targets" ] || { echo "fuzz: no target built in $build" >&2; exit 1; }
for target in $targets; do
  if [ "$running" -ge "$(nproc)" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_target "$target" &
  running=$((running + 1))
done
for _ in $(seq "$running"); do wait -n || status=1; done
exit $status
