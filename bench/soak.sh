#!/usr/bin/env bash
# Soak: `bpfprof record -a -F 1000` for SOAK_SECONDS (default 1800) on a busy
# machine: a spinner per CPU and a churn of short processes (shell pipelines: fork, exec,
# exit, pid reuse). Every SAMPLE_EVERY seconds the recorder's RSS and open fds are read from
# /proc. Reported: RSS at start / max / end, fds at start / end, the samples and lost events
# the recorder printed, and the same figures read back from the profile it wrote (sum of
# sample weights, meta.extra "Lost events"). Needs root.   SOAK_SECONDS=60 bench/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BPFPROF=${BPFPROF:-build/bpfprof}
BUSY=${BUSY:-build/tests/fixtures/busy}
SOAK_SECONDS=${SOAK_SECONDS:-1800}
SAMPLE_EVERY=${SAMPLE_EVERY:-10}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
out=${SOAK_DIR:-$(mktemp -d)}
mkdir -p "$out"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq "$(nproc)"); do "$BUSY" $((SOAK_SECONDS * 1000 + 60000)) > /dev/null & pids+=($!); done
( while :; do seq 1 20000 | sort -r | md5sum > /dev/null; sleep 0.05; done ) & pids+=($!)

"$BPFPROF" record -a -F 1000 -d "$SOAK_SECONDS" -o "$out/soak.json.gz" 2> "$out/stderr" > /dev/null &
recorder=$!
echo "elapsed_s rss_kb fds" > "$out/series"
start=$(date +%s)
sleep 2
while kill -0 "$recorder" 2>/dev/null; do
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$recorder/status" 2>/dev/null || echo "")
  fds=$(ls "/proc/$recorder/fd" 2>/dev/null | wc -l)
  [ -n "$rss" ] && echo "$(( $(date +%s) - start )) $rss $fds" >> "$out/series"
  sleep "$SAMPLE_EVERY"
done
wait "$recorder"; rc=$?
cleanup
awk 'NR == 2 {r0 = $2; f0 = $3} NR > 1 {if ($2 > rmax) rmax = $2; r1 = $2; f1 = $3; n = $1}
     END {printf "| %d s | %.0f MB | %.0f MB | %.0f MB | %d | %d |\n", n, r0/1024, rmax/1024, r1/1024, f0, f1}' "$out/series" > "$out/row"
printed=$(sed -n 's/^bpfprof: \([0-9]*\) samples .*; \([0-9]*\) events lost.*/\1 \2/p' "$out/stderr")
in_profile=$(python3 - "$out/soak.json.gz" <<'PY'
import gzip, json, sys
p = json.load(gzip.open(sys.argv[1]))
weights = 0.0
on_cpu = 0.0
for t in p["threads"]:
    s = t["samples"]
    w = s.get("weight") or [1] * len(s["stack"])
    weights += sum(w)
    cpu = s.get("threadCPUDelta") or []
    on_cpu += sum(wi for wi, c in zip(w, cpu) if c)
extra = {e["label"]: e["value"] for sec in p["meta"].get("extra", []) for e in sec["entries"]}
print(f'{len(p["threads"])} threads, {weights:.0f} sample weight ({on_cpu:.0f} on CPU), '
      f'lost {extra.get("Lost events")}, late {extra.get("Late events", 0)}')
PY
)
echo "exit $rc; printed (samples, lost): $printed; profile: $in_profile"
echo "| duration | RSS at start | RSS max | RSS at end | fds at start | fds at end |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
cat "$out/row"
ls -l "$out/soak.json.gz"
