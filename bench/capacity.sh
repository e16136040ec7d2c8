#!/usr/bin/env bash
# Capacity: the highest sampling frequency on all CPUs at which nothing is
# lost. A busy fixture spins on every CPU; `bpfprof record -a -d SECONDS -F F` (fp, dwarf:
# stacks walked in the kernel, and dwarf-copy: every stack copied; off-CPU off as -a's
# default) and `perf record -a -F F` (-g and --call-graph dwarf) at rising F.
# Reported: samples delivered against the nominal F x CPUs x seconds (the kernel
# may lower the rate: perf_event_max_sample_rate, cpu-clock's hrtimer), and events lost as
# each tool counts them (bpfprof: ring-buffer reservations that failed + perf side-band
# records lost; perf: LOST records). Needs root.   FREQS="1000 5000 10000" bench/capacity.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BPFPROF=${BPFPROF:-build/bpfprof}
BUSY=${BUSY:-build/tests/fixtures/busy}
SECONDS_RECORDED=${SECONDS_RECORDED:-3}
FREQS=${FREQS:-"1000 2000 5000 10000 20000 50000"}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
out=$(mktemp -d)
cpus=$(nproc)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$out"; }
trap cleanup EXIT
for _ in $(seq "$cpus"); do "$BUSY" 3600000 > /dev/null & pids+=($!); done
have_perf=1
command -v perf > /dev/null || have_perf=0

echo "| F (Hz per CPU) | tool | samples | of nominal | lost |"
echo "| ---: | --- | ---: | ---: | ---: |"
for f in $FREQS; do
  nominal=$((f * cpus * SECONDS_RECORDED))
  for cg in fp dwarf dwarf-copy; do
    "$BPFPROF" record -a -d "$SECONDS_RECORDED" -F "$f" --call-graph "$cg" -o "$out/p.json.gz" 2> "$out/err" > /dev/null ||
      { cat "$out/err" >&2; exit 1; }
    read -r samples lost < <(sed -n 's/^bpfprof: \([0-9]*\) samples .*; \([0-9]*\) events lost.*/\1 \2/p' "$out/err")
    printf '| %s | bpfprof %s | %s | %.1f%% | %s |\n' "$f" "$cg" "$samples" "$(echo "100 * $samples / $nominal" | bc -l)" "$lost"
  done
  if ((have_perf)); then
    for cg in fp dwarf; do
      args=(-g); [ "$cg" = dwarf ] && args=(--call-graph dwarf)
      perf record -q -a -F "$f" "${args[@]}" -o "$out/perf.data" -- sleep "$SECONDS_RECORDED" 2> "$out/perr" > /dev/null || true
      samples=$(perf report -i "$out/perf.data" --stats 2> /dev/null | awk '$1 == "SAMPLE" && $2 == "events:" {print $3}' | head -1)
      # Each PERF_RECORD_LOST says how many samples it stands for.
      lost=$(perf script -i "$out/perf.data" --show-lost-events -F comm 2> /dev/null |
             sed -n 's/.*PERF_RECORD_LOST lost \([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
      printf '| %s | perf %s | %s | %.1f%% | %s |\n' "$f" "$cg" "${samples:-0}" \
        "$(echo "100 * ${samples:-0} / $nominal" | bc -l)" "$lost"
    done
  fi
done
echo
echo "$cpus CPUs, ${SECONDS_RECORDED} s per run, kernel.perf_event_max_sample_rate=$(cat /proc/sys/kernel/perf_event_max_sample_rate)"
