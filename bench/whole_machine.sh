#!/usr/bin/env bash
# A whole machine at 1 kHz: `bpfprof record -a -d 9` while clang++ compiles against
# LLVM's headers (libLLVM), headless Chromium runs a JavaScript loop, a JVM, node and a Go
# program run; once with an empty unwind-table cache and once with the cache that run filled,
# then `perf record -a -g` over the same mix. Prints the kernel-walk share after the first
# second, ring-buffer bytes per sample, the recorder's CPU, completeness, unwind rows and BPF
# map memory, evictions and table build times (bench/whole_machine.mjs). Needs root, the
# fixtures built (java, go) and clang++-14, llvm-14-dev, chromium, node (scripts/install-deps.sh).
#   SECONDS_TO_RECORD=9 KEEP=/tmp/wm bench/whole_machine.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BPFPROF=${BPFPROF:-$BUILD_DIR/bpfprof}
FIXTURES=${FIXTURES:-$BUILD_DIR/tests/fixtures}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
[ -x "$BPFPROF" ] || { echo "no bpfprof at $BPFPROF (BUILD_DIR, BPFPROF)" >&2; exit 1; }
[ -d /usr/include/llvm-14 ] || { echo "no LLVM headers (llvm-14-dev)" >&2; exit 1; }
args=(--bpfprof "$BPFPROF" --fixtures "$FIXTURES" --seconds "${SECONDS_TO_RECORD:-9}")
[ -n "${KEEP:-}" ] && args+=(--keep "$KEEP")
[ -n "${NO_PERF:-}" ] && args+=(--no-perf)
exec node bench/whole_machine.mjs "${args[@]}"
