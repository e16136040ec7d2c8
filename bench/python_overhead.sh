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
. bench/rounds.sh
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
  esac | sed -n 's/^wall_ms=\([0-9.]*\) cpu_ms=\([0-9.]*\)/\1 \2/p'
}

run_rounds
base=$(mode_median alone)
off=$(mode_median no-python-frames)
base_cpu=$(mode_median alone 3)
off_cpu=$(mode_median no-python-frames 3)
echo "| mode | wall time (median of $ROUNDS) | vs alone | vs --no-python-frames | CPU time | vs alone | vs --no-python-frames |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for mode in "${modes[@]}"; do
  m=$(mode_median "$mode")
  c=$(mode_median "$mode" 3)
  printf '| %s | %.1f ms | %.3fx | %.3fx | %.1f ms | %.3fx | %.3fx |\n' "$mode" "$m" \
    "$(echo "$m / $base" | bc -l)" "$(echo "$m / $off" | bc -l)" "$c" \
    "$(echo "$c / $base_cpu" | bc -l)" "$(echo "$c / $off_cpu" | bc -l)"
done
grep -E 'bpfprof: python' "$out/summary" || true
