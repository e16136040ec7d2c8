#!/usr/bin/env bash
# Userspace pipeline: throughput of decode -> unwind -> model ->
# symbolize -> write, replaying saved event streams with `bpfprof replay`; output size with
# and without collapsing consecutive identical samples; peak RSS against the sample count.
#  1. Real recordings: tests/fixtures/threads (2 spinning threads) and unwind_qsort (deep
#     libc stacks, no frame pointers) at -F 10000 with --save-events, fp and dwarf; each log
#     replayed ROUNDS times (median), collapsed and not.
#  2. Synthetic logs (bench/make_event_log: 4 threads, 20+4-frame stacks drawn from 1,000
#     distinct ones at random, so nothing collapses: the worst case) of 100k, 1M and 10M
#     samples.
# Needs root (for the recordings).   ROUNDS=3 SECONDS_RECORDED=6 bench/pipeline.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BPFPROF=${BPFPROF:-build/bpfprof}
FIXTURES=${FIXTURES:-build/tests/fixtures}
MAKE_LOG=${MAKE_LOG:-build/bench/make_event_log}
ROUNDS=${ROUNDS:-3}
SECONDS_RECORDED=${SECONDS_RECORDED:-6}
SIZES=${SIZES:-"100000 1000000 10000000"}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
out=$(mktemp -d /var/tmp/bpfprof-pipeline.XXXXXX)
trap 'rm -rf "$out"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
field() { sed -n "s/.*$1.*/\1/p"; }  # field REGEX-with-one-group

# replay LOG [flags] -> "events ms_cpu decode_ms model_ms write_ms rows rss_mb bytes" (median over ROUNDS)
replay() {
  local log=$1; shift
  : > "$out/r"
  for _ in $(seq "$ROUNDS"); do
    local line
    line=$("$BPFPROF" replay "$log" -o "$out/r.json.gz" "$@" 2>&1 | grep 'replayed')
    local bytes; bytes=$(stat -c %s "$out/r.json.gz")
    echo "$line" | sed -E "s/.*replayed ([0-9]+) events.* in ([0-9]+) ms CPU.*decode\+unwind ([0-9]+) ms, model ([0-9]+) ms, symbolize\+write ([0-9]+) ms.* ([0-9]+) samples written, peak RSS ([0-9.]+) MB.*/\1 \2 \3 \4 \5 \6 \7 $bytes/" >> "$out/r"
  done
  local cols=()
  for c in 1 2 3 4 5 6 7 8; do cols+=("$(awk -v c=$c '{print $c}' "$out/r" | median)"); done
  echo "${cols[*]}"
}

row() {  # name log flags...
  local name=$1 log=$2; shift 2
  read -r ev ms dec mod wr rows rss bytes <<< "$(replay "$log" "$@")"
  local live=$(( dec + mod ))
  printf '| %s | %s | %s | %.0f k/s | %.0f k/s | %s / %s / %s | %s | %.1f | %.1f MB |\n' \
    "$name" "$ev" "$ms" "$(echo "$ev / $ms" | bc -l)" "$(echo "$ev / ($live + 0.001)" | bc -l)" \
    "$dec" "$mod" "$wr" "$rows" "$(echo "$bytes / $ev" | bc -l)" "$rss"
}

echo "## Replay of recorded event streams (median of $ROUNDS replays)"
echo
echo "| log | events | CPU ms | events/s end to end | events/s live path (decode+unwind+model) | ms decode+unwind / model / symbolize+write | sample rows written | gz bytes per event | peak RSS |"
echo "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"
for fixture in threads unwind_qsort; do
  for cg in fp dwarf; do
    log=$out/$fixture-$cg.events
    "$BPFPROF" record -F 10000 --call-graph "$cg" --save-events "$log" -o "$out/live.json.gz" -- \
      "$FIXTURES/$fixture" $((SECONDS_RECORDED * 1000)) > /dev/null 2> "$out/record.err" ||
      { cat "$out/record.err" >&2; exit 1; }
    mb=$(sed -n 's/.*saved \([0-9.]*\) MB.*/\1/p' "$out/record.err")
    row "$fixture $cg ($mb MB), collapsed" "$log"
    row "$fixture $cg, --no-collapse" "$log" --no-collapse
    rm -f "$log"
  done
done

echo
echo "## Synthetic event streams: throughput and memory against the sample count"
echo
echo "| log | events | CPU ms | events/s end to end | events/s live path (decode+unwind+model) | ms decode+unwind / model / symbolize+write | sample rows written | gz bytes per event | peak RSS |"
echo "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"
for n in $SIZES; do
  "$MAKE_LOG" "$n" 1000 "$out/synthetic.events" 2> /dev/null
  ROUNDS=$([ "$n" -ge 10000000 ] && echo 1 || echo "$ROUNDS") row "synthetic $n samples" "$out/synthetic.events"
  rm -f "$out/synthetic.events"
done
