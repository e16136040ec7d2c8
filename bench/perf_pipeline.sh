#!/usr/bin/env bash
# perf's side of the pipeline comparison (bench/pipeline.sh): the same fixtures recorded with
# `perf record -F 10000` (-g, and --call-graph dwarf), then the time and peak memory of
# turning perf.data into a report (`perf report`: unwinding, symbolization; `perf script`:
# every sample with its stack, what a Firefox Profiler import needs), and bytes per sample.
# Needs root.   ROUNDS=3 SECONDS_RECORDED=6 bench/perf_pipeline.sh
set -euo pipefail
cd "$(dirname "$0")/.."
FIXTURES=${FIXTURES:-build/tests/fixtures}
ROUNDS=${ROUNDS:-3}
SECONDS_RECORDED=${SECONDS_RECORDED:-6}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
command -v perf > /dev/null || { echo "perf is not installed: nothing to compare" >&2; exit 0; }
out=$(mktemp -d /var/tmp/bpfprof-perf-pipeline.XXXXXX)
trap 'rm -rf "$out"' EXIT
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# timed CMD... -> "cpu_ms rss_mb" (user+sys CPU time and peak RSS of CMD)
timed() {
  /usr/bin/time -f '%U %S %M' -o "$out/time" "$@" > /dev/null 2>&1
  awk '{printf "%.0f %.1f\n", ($1 + $2) * 1000, $3 / 1024}' "$out/time"
}

echo "| perf.data | samples | bytes per sample | perf report: CPU ms, samples/s, peak RSS | perf script: CPU ms, samples/s, peak RSS |"
echo "| --- | ---: | ---: | --- | --- |"
for fixture in threads unwind_qsort; do
  for cg in fp dwarf; do
    args=(-g); [ "$cg" = dwarf ] && args=(--call-graph dwarf)
    perf record -q -F 10000 "${args[@]}" -o "$out/perf.data" -- "$FIXTURES/$fixture" $((SECONDS_RECORDED * 1000)) > /dev/null 2>&1
    samples=$(perf report -i "$out/perf.data" --stats 2> /dev/null | awk '$1 == "SAMPLE" && $2 == "events:" {print $3}' | head -1)
    bytes=$(stat -c %s "$out/perf.data")
    : > "$out/report"; : > "$out/script"
    for _ in $(seq "$ROUNDS"); do
      timed perf report -i "$out/perf.data" --stdio >> "$out/report"
      timed perf script -i "$out/perf.data" >> "$out/script"
    done
    rms=$(awk '{print $1}' "$out/report" | median); rrss=$(awk '{print $2}' "$out/report" | median)
    sms=$(awk '{print $1}' "$out/script" | median); srss=$(awk '{print $2}' "$out/script" | median)
    printf '| %s %s (%.1f MB) | %s | %.0f | %s ms, %.0f k/s, %s MB | %s ms, %.0f k/s, %s MB |\n' "$fixture" "$cg" \
      "$(echo "$bytes / 1048576" | bc -l)" "$samples" "$(echo "$bytes / $samples" | bc -l)" \
      "$rms" "$(echo "$samples / $rms" | bc -l)" "$rrss" "$sms" "$(echo "$samples / $sms" | bc -l)" "$srss"
  done
done
