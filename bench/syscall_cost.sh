#!/usr/bin/env bash
# What recording adds to every system call: build/bench/syscall_loop times N getppid calls
# itself, alone and under each recorder (1 kHz). The sampling interrupts cost the same per
# second of CPU in every mode; a profiler that enables a system-call tracepoint (any of them)
# sends every system call of every task through the kernel's slow entry and exit paths.
# Modes interleaved for ROUNDS rounds; medians of ns per call, and paired differences per
# round. Needs root.
#   ROUNDS=10 bench/syscall_cost.sh
#   MODES="bpfprof-dwarf base-dwarf perf-fp" BPFPROF_BASE=/tmp/old/bpfprof bench/syscall_cost.sh
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
trap 'rm -rf "$out"' EXIT
read -r -a modes <<< "${MODES:-perf-fp bpfprof-dwarf}"
[[ " ${modes[*]} " == *" alone "* ]] || modes=(alone "${modes[@]}")

# Prints the run's ns per call (run_rounds' "ms" column holds it).
run_one() { run_mode "$1" | sed -n 's/^\([0-9.]*\) ns per system call$/\1/p'; }

run_rounds
syscall_tables
for other in alone perf-fp perf-nostack base-dwarf; do
  [[ " ${modes[*]} " == *" bpfprof-dwarf "* && " ${modes[*]} " == *" $other "* ]] &&
    paired_row bpfprof-dwarf "$other" raw
done
