#!/usr/bin/env bash
# Stack quality on real programs: the workloads of
# tests/integration/real_programs.test.mjs (sqlite3, seq|sort|uniq|wc, cc1 on a generated
# 3,000-function file, xz -9, git log -p + git gc on a generated 5,800-commit repository,
# python3, plt_loop, big_frame) recorded with `bpfprof record -F 1000` and with
# `perf record -e cpu-clock -F 1000 --call-graph dwarf`, every on-CPU user stack of both
# classified by tests/integration/lib/stack_quality.mjs: it reaches a thread root, is marked
# cut ([truncated]; perf: an [unknown] outermost frame), or is cut silently. A stack that
# ends at its file's ELF entry point counts as reaching a root whatever it is named there
# (stripped executables); "by name" is what the tests check. Prints a markdown table.
# Needs root and perf (scripts/install-deps.sh --bench).   ONLY=sqlite3,cc1 bench/real_programs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BPFPROF=${BPFPROF:-$BUILD_DIR/bpfprof}
FIXTURES=${FIXTURES:-$BUILD_DIR/tests/fixtures}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
command -v perf > /dev/null || { echo "perf is not installed (scripts/install-deps.sh --bench)" >&2; exit 1; }
[ -x "$BPFPROF" ] || { echo "no bpfprof at $BPFPROF (BUILD_DIR, BPFPROF)" >&2; exit 1; }
args=(--bpfprof "$BPFPROF" --fixtures "$FIXTURES")
[ -n "${ONLY:-}" ] && args+=(--only "$ONLY")
exec node bench/real_programs.mjs "${args[@]}"
