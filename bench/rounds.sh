# Sourced by the wall-time benchmarks: runs `run_one MODE` (which prints the workload's wall
# time in ms, optionally followed by more numbers: its CPU time) for each of the `modes` in turn, ROUNDS times, interleaved so that a change in
# the machine's load touches every mode alike; results go to $out/results as "MODE MS".
run_rounds() {
  for round in $(seq "$ROUNDS"); do
    for mode in "${modes[@]}"; do
      # perf record (6.1 here) now and then aborts on this kernel: that run is left out.
      ms=$(run_one "$mode" || true)
      if [ -z "$ms" ]; then
        echo "round $round: $mode failed, left out" >&2
        continue
      fi
      echo "$mode $ms" >> "$out/results"
      echo "round $round: $mode $ms ms" >&2
    done
  done
}

# The median of the numbers on stdin.
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# The median wall time of one mode (column 2), or of its column $2 (3: the CPU time).
mode_median() { awk -v m="$1" -v c="${2:-2}" '$1 == m {print $c}' "$out/results" | median; }
