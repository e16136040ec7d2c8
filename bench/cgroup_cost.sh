#!/usr/bin/env bash
# What `record --cgroup` costs the processes outside its cgroup: build/bench/syscall_loop
# times N getppid calls itself, outside the cgroup, alone, while `record --cgroup` records
# an empty pretend container (a cgroup made here), and while `record -a` records everything.
# Modes interleaved for ROUNDS rounds; medians of ns per call, and paired differences per
# round. Needs root.
#   ROUNDS=10 bench/cgroup_cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BPFPROF=${BPFPROF:-build/bpfprof}
WORK_BIN=${WORK_BIN:-build/bench/syscall_loop}
ROUNDS=${ROUNDS:-7}
FREQ=${FREQ:-1000}
WORK_ARGS=("${CALLS:-3000000}")
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
. bench/rounds.sh
out=$(mktemp -d)
group=/sys/fs/cgroup/cpu/bpfprof-bench-$$
[ -d /sys/fs/cgroup/cpu ] || group=/sys/fs/cgroup/bpfprof-bench-$$  # a v2-only host
mkdir "$group"
trap 'rm -rf "$out"; rmdir "$group"' EXIT
modes=(alone cgroup all)

# A recorder in the background until the workload has run: its ns per call.
under() {
  "$BPFPROF" record -F "$FREQ" -o "$out/p.json.gz" "$@" 2> "$out/recorder.err" &
  local recorder=$!
  until grep -q 'from now' "$out/recorder.err"; do sleep 0.05; done
  "$WORK_BIN" "${WORK_ARGS[@]}"
  kill -INT "$recorder"
  wait "$recorder" || true
}

run_one() {
  case $1 in
    alone) "$WORK_BIN" "${WORK_ARGS[@]}" ;;
    cgroup) under --cgroup "$group" ;;
    all) under -a ;;
  esac | sed -n 's/^\([0-9.]*\) ns per system call$/\1/p'
}

run_rounds
syscall_tables
paired_row cgroup alone raw
paired_row cgroup all raw
