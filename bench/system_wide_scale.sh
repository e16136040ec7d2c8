#!/usr/bin/env bash
# Scale: `bpfprof record -a` on a machine running ~200 extra processes and
# ~1,000 extra threads, with every CPU busy, at 1 kHz. Prints bpfprof's start-up line,
# samples and losses, and how many processes/threads the profile holds. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
BPFPROF=${BPFPROF:-build/bpfprof}
BUSY=${BUSY:-build/tests/fixtures/busy}
SECONDS_TO_RECORD=${SECONDS_TO_RECORD:-3}
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT

for _ in $(seq 195); do sleep 120 & done
for _ in $(seq 5); do
  python3 -c "import threading,time; [threading.Thread(target=time.sleep,args=(120,),daemon=True).start() for _ in range(200)]; time.sleep(120)" &
done
sleep 2
for cpu in $(seq "$(nproc)"); do "$BUSY" $(( (SECONDS_TO_RECORD + 2) * 1000 )) >/dev/null & done
sleep 0.3
procs=$(ls /proc | grep -c '^[0-9]')
threads=$(ls -d /proc/[0-9]*/task/[0-9]* 2>/dev/null | wc -l)
echo "machine: $procs processes, $threads threads, $(nproc) CPUs busy"
"$BPFPROF" record -v -a -d "$SECONDS_TO_RECORD" -F 1000 -o "$out/scale.json.gz" 2>&1 | grep -E 'start-up|samples \((cpu|cyc)'
python3 - "$out/scale.json.gz" "$SECONDS_TO_RECORD" <<'PY'
import gzip, json, sys, os
p = json.load(gzip.open(sys.argv[1]))
# Weights: consecutive identical samples are one row with the weight of all of them.
samples = sum(sum(t['samples']['weight']) if t['samples'].get('weight') else t['samples']['length']
              for t in p['threads'])
nominal = int(sys.argv[2]) * 1000 * os.cpu_count()
print(f"profile: {len({t['pid'] for t in p['threads']})} processes, {len(p['threads'])} threads with samples, "
      f"{samples:.0f} samples ({100*samples/nominal:.1f}% of {nominal} nominal at 1 kHz on every CPU)")
PY
