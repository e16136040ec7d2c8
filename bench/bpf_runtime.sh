#!/usr/bin/env bash
# BPF run time per sample (kernel.bpf_stats_enabled): the sampling program (on_sample) and
# the off-CPU program (on_switch), each through its dispatcher (bpf/profiler.bpf.c), while
# bpfprof records tests/fixtures/fixed_work at 1 kHz,
# with --call-graph dwarf (stacks walked in the kernel) and dwarf-copy (every stack copied).
# The programs' counters are read twice during the run (1 s and 3 s in) and the difference
# divided by the runs in between; the sampling program also runs (and returns at once) for
# other processes' samples, which lowers its average a little on a busy machine. Needs root.
# SHAPE=deep runs fixed_work's deep shape (a qsort callback under a 24-deep recursion);
# MODES picks the --call-graph modes (default: dwarf dwarf-copy; fp for the floor).
# The workload must outlive the second read (3 s): WORK=200000 runs ~5.5 s here.
# RECORD_ARGS adds record options (e.g. --no-off-cpu). The last column is the program's
# CPU time per second of the run (all CPUs).
#   WORK=200000 SHAPE=deep MODES="fp dwarf dwarf-copy" bench/bpf_runtime.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BPFPROF=${BPFPROF:-build/bpfprof}
WORK_BIN=${WORK_BIN:-build/tests/fixtures/fixed_work}
WORK=${WORK:-200000}
SHAPE=${SHAPE:-flat}
[ "$SHAPE" = deep ] && WORK_ARGS=("$WORK" deep) || WORK_ARGS=("$WORK")
read -r -a MODES <<< "${MODES:-dwarf dwarf-copy}"
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
out=$(mktemp -d)
before=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled=$before; rm -rf "$out"' EXIT
sysctl -qw kernel.bpf_stats_enabled=1

# "run_time_ns run_cnt" of the loaded program named $1 (bpfprof's own: the newest), or of
# dispatch_$1 where it has one: the walkers run tail-called by their dispatcher, whose counters
# take their time (a build before the dispatchers has none).
counters() {
  local name="$1"
  local dispatcher="dispatch_${1#on_}"
  bpftool prog show name "$dispatcher" >/dev/null 2>&1 && name="$dispatcher"
  bpftool prog show name "$name" --json 2>/dev/null | python3 -c '
import json, sys
text = sys.stdin.read().strip()
progs = json.loads(text) if text else []
progs = progs if isinstance(progs, list) else [progs]
if not progs:
    print(0, 0)
else:
    p = max(progs, key=lambda p: p["id"])
    print(p.get("run_time_ns", 0), p.get("run_cnt", 0))'
}

echo "| mode | program | runs | ns per run | us per second |"
echo "| --- | --- | ---: | ---: | ---: |"
for mode in "${MODES[@]}"; do
  # shellcheck disable=SC2086 # RECORD_ARGS: more record options, word-split on purpose
  "$BPFPROF" record --call-graph "$mode" -F 1000 ${RECORD_ARGS:-} -o "$out/p.json.gz" -- "$WORK_BIN" "${WORK_ARGS[@]}" \
    >/dev/null 2>"$out/stderr" &
  recorder=$!
  sleep 1
  read -r s0 c0 < <(counters on_sample)
  read -r w0 v0 < <(counters on_switch)
  read -r k0 n0 < <(counters on_waking)
  sleep 2
  read -r s1 c1 < <(counters on_sample)
  read -r w1 v1 < <(counters on_switch)
  read -r k1 n1 < <(counters on_waking)
  wait "$recorder"
  ((c1 > c0)) || { echo "$mode: the workload ended before the second read (raise WORK)" >&2; exit 1; }
  row() { # program, runtime before, count before, runtime after, count after
    (($5 > $3)) && printf '| %s | %s | %d | %.0f | %.0f |\n' "$mode" "$1" $(($5 - $3)) \
      "$(echo "($4 - $2) / ($5 - $3)" | bc -l)" "$(echo "($4 - $2) / 2000" | bc -l)"
    return 0
  }
  row on_sample "$s0" "$c0" "$s1" "$c1"
  row on_switch "$w0" "$v0" "$w1" "$v1"
  row on_waking "$k0" "$n0" "$k1" "$n1"
  grep -E "bytes per sample|unwound in the kernel" "$out/stderr" | sed 's/^/    /' >&2
done
