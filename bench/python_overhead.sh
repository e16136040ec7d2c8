#!/usr/bin/env bash
# Overhead of reading Python frames on a CPU-bound Python program (bench/python_work.py, a
# fixed amount of work, Debian's python3.11), as the program's own wall time: alone, under
# bpfprof at 1 kHz with --no-python-frames, and with Python frames (the default). Modes
# interleaved for ROUNDS rounds; medians; slowdowns against alone and against
# --no-python-frames. Also the ring-buffer bytes per Python stack and the time spent naming
# code objects, from the last recording's summary. Needs root.
#   ROUNDS=5 SCALE=30 bench/python_overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BPFPROF=${BPFPROF:-build/bpfprof}
PYTHON=${PYTHON:-/usr/bin/python3.11}
ROUNDS=${ROUNDS:-5}
SCALE=${SCALE:-30}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

modes=(alone no-python-frames python-frames)
run_one() {
  case $1 in
    alone) "$PYTHON" bench/python_work.py "$SCALE" ;;
    no-python-frames) "$BPFPROF" record --no-python-frames -F 1000 -o "$out/p.json.gz" -- \
      "$PYTHON" bench/python_work.py "$SCALE" 2>/dev/null ;;
    python-frames) "$BPFPROF" record -F 1000 -o "$out/p.json.gz" -- \
      "$PYTHON" bench/python_work.py "$SCALE" 2>"$out/summary" ;;
  esac | sed -n 's/^wall_ms=//p'
}

for round in $(seq "$ROUNDS"); do
  for mode in "${modes[@]}"; do
    ms=$(run_one "$mode")
    echo "$mode $ms" >> "$out/results"
    echo "round $round: $mode $ms ms" >&2
  done
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
base=$(awk '$1 == "alone" {print $2}' "$out/results" | median)
off=$(awk '$1 == "no-python-frames" {print $2}' "$out/results" | median)
echo "| mode | workload wall time (median of $ROUNDS) | vs alone | vs --no-python-frames |"
echo "| --- | ---: | ---: | ---: |"
for mode in "${modes[@]}"; do
  m=$(awk -v m="$mode" '$1 == m {print $2}' "$out/results" | median)
  printf '| %s | %.1f ms | %.3fx | %.3fx |\n' "$mode" "$m" "$(echo "$m / $base" | bc -l)" \
    "$(echo "$m / $off" | bc -l)"
done
grep -E 'bpfprof: python' "$out/summary" || true
