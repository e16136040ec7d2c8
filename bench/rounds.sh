# Sourced by the wall-time benchmarks: runs `run_one MODE` (which prints the workload's wall
# time in ms, optionally followed by more numbers: its CPU time) for each of the `modes` in turn, ROUNDS times, interleaved so that a change in
# the machine's load touches every mode alike; results go to $out/results as "MODE MS", and
# with their round to $out/rounds as "ROUND MODE MS" (for paired comparisons).
# Runs the workload ($WORK_BIN "${WORK_ARGS[@]}") once in mode $1: alone, or under bpfprof
# (BPFPROF, or BPFPROF_BASE for base-dwarf: another build's default, to compare two builds in
# one run) or perf, at FREQ samples a second, writing into $out. The workload's stdout passes
# through; the recorders' stderr does not.
run_mode() {
  case $1 in
    alone) "$WORK_BIN" "${WORK_ARGS[@]}" ;;
    bpfprof-fp) "$BPFPROF" record --call-graph fp -F "$FREQ" -o "$out/p.json.gz" -- "$WORK_BIN" "${WORK_ARGS[@]}" 2>/dev/null ;;
    bpfprof-dwarf) "$BPFPROF" record --call-graph dwarf -F "$FREQ" -o "$out/p.json.gz" -- "$WORK_BIN" "${WORK_ARGS[@]}" 2>/dev/null ;;
    base-dwarf) "$BPFPROF_BASE" record --call-graph dwarf -F "$FREQ" -o "$out/p.json.gz" -- "$WORK_BIN" "${WORK_ARGS[@]}" 2>/dev/null ;;
    bpfprof-dwarf-copy) "$BPFPROF" record --call-graph dwarf-copy -F "$FREQ" -o "$out/p.json.gz" -- "$WORK_BIN" "${WORK_ARGS[@]}" 2>/dev/null ;;
    # The floor: the sampling interrupts alone (no stacks), what any sampler pays here.
    perf-nostack) perf record -q -F "$FREQ" -o "$out/perf.data" -- "$WORK_BIN" "${WORK_ARGS[@]}" 2>/dev/null ;;
    perf-fp) perf record -q -F "$FREQ" -g -o "$out/perf.data" -- "$WORK_BIN" "${WORK_ARGS[@]}" 2>/dev/null ;;
    perf-dwarf) perf record -q -F "$FREQ" --call-graph dwarf -o "$out/perf.data" -- "$WORK_BIN" "${WORK_ARGS[@]}" 2>/dev/null ;;
    *) echo "unknown mode $1" >&2; return 1 ;;
  esac
}

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
      echo "$round $mode ${ms%% *}" >> "$out/rounds"
      echo "round $round: $mode $ms ms" >&2
    done
  done
}

# The ns per system call of each mode against alone's, and the header of the paired rows that
# follow (syscall_cost.sh, cgroup_cost.sh).
syscall_tables() {
  local alone m mode
  echo "| mode | ns per system call (median of $ROUNDS) | added to each call |"
  echo "| --- | ---: | ---: |"
  alone=$(mode_median alone)
  for mode in "${modes[@]}"; do
    m=$(mode_median "$mode")
    printf '| %s | %.1f | %+.1f |\n' "$mode" "$m" "$(echo "$m - $alone" | bc -l)"
  done
  echo
  echo "| paired, per round | rounds cheaper | median difference (ns per call) | range |"
  echo "| --- | ---: | ---: | ---: |"
}

# The median of the numbers on stdin.
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# The median wall time of one mode (column 2), or of its column $2 (3: the CPU time).
mode_median() { awk -v m="$1" -v c="${2:-2}" '$1 == m {print $c}' "$out/results" | median; }

# Paired comparison of modes A and B within each round: each one's slowdown against the
# alone run of the same round (so that a round's load touches both alike). Prints one table
# row: rounds where A was faster, and the median and range of (A - B) in points. With a third
# argument `raw`, the difference is of the measures themselves (no alone run needed).
paired_row() {
  awk -v a="$1" -v b="$2" -v raw="${3:-}" '
    { ms[$1 " " $2] = $3; rounds[$1] = 1 }
    END {
      n = 0; faster = 0
      for (r in rounds) {
        base = raw == "raw" ? 1 : ms[r " alone"]; x = ms[r " " a]; y = ms[r " " b]
        if (base == "" || x == "" || y == "") continue
        d[++n] = (raw == "raw" ? 1 : 100) * (x - y) / base
        if (x < y) faster++
      }
      if (n == 0) exit
      # insertion sort: a few dozen rounds
      for (i = 2; i <= n; i++) { v = d[i]; j = i - 1; while (j > 0 && d[j] > v) { d[j + 1] = d[j]; j-- } d[j + 1] = v }
      med = (n % 2) ? d[(n + 1) / 2] : (d[n / 2] + d[n / 2 + 1]) / 2
      fmt = raw == "raw" ? "| %s vs %s | %d of %d | %+.0f | %+.0f .. %+.0f |\n" : "| %s vs %s | %d of %d | %+.2f | %+.2f .. %+.2f |\n"
      printf fmt, a, b, faster, n, med, d[1], d[n]
    }' "$out/rounds"
}
