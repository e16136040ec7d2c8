#!/usr/bin/env bash
# Soak of rotating output: `bpfprof record -a -F FREQUENCY --switch-output PERIOD` for
# SECONDS_TOTAL. Every 10 s it reads bpfprof's RSS (VmRSS) and CPU time (utime+stime, its own
# and its threads') from /proc. At the end it prints the RSS after the first period and at
# the end, its highest value in each half of the run, the recorder's CPU per minute, the
# files, whether the periods are contiguous (each file starts where the one before ended:
# no samples lost between files) and the samples they hold. Needs root. From the repo root:
#   SECONDS_TOTAL=1800 PERIOD=60s FREQUENCY=1000 bench/switch_output_soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BPFPROF=${BPFPROF:-build/bpfprof}
SECONDS_TOTAL=${SECONDS_TOTAL:-1800}
PERIOD=${PERIOD:-60s}
FREQUENCY=${FREQUENCY:-1000}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
[ -x "$BPFPROF" ] || { echo "build first: cmake --build build" >&2; exit 1; }
out=${SOAK_DIR:-$(mktemp -d)}
mkdir -p "$out"
"$BPFPROF" record -a -F "$FREQUENCY" -d "$SECONDS_TOTAL" --switch-output "$PERIOD" \
  -o "$out/soak.json.gz" 2>"$out/stderr" &
pid=$!
ticks=$(getconf CLK_TCK)
echo "elapsed_s rss_kb cpu_s" >"$out/usage"
start=$(date +%s)
while kill -0 "$pid" 2>/dev/null; do
  if [ -r /proc/$pid/stat ]; then
    rss=$(awk '/^VmRSS:/{print $2}' /proc/$pid/status 2>/dev/null || echo 0)
    cpu=$(awk -v t="$ticks" '{printf "%.2f", ($14 + $15) / t}' /proc/$pid/stat 2>/dev/null || echo 0)
    echo "$(($(date +%s) - start)) $rss $cpu" >>"$out/usage"
  fi
  sleep 10
done
wait "$pid" || echo "bpfprof exited with $?" >&2
node -e '
const fs = require("fs"), zlib = require("zlib"), path = require("path");
const dir = process.argv[1];
const files = fs.readdirSync(dir).filter((f) => /^soak\..*\.json\.gz$/.test(f)).sort();
let previousEnd = null, gaps = 0, samples = 0;
for (const f of files) {
  const p = JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(dir, f))));
  const start = p.meta.startTime, end = start + p.meta.profilingEndTime;
  if (previousEnd !== null && Math.abs(start - previousEnd) > 1) gaps++;
  previousEnd = end;
  let n = 0;
  for (const t of p.threads) for (let i = 0; i < t.samples.length; i++) n += t.samples.weight ? t.samples.weight[i] : 1;
  samples += n;
}
console.log(`files: ${files.length}, gaps between periods: ${gaps}, samples: ${Math.round(samples)}`);
' "$out"
awk 'NR == 1 { next }
     { t[NR] = $1; r[NR] = $2; c[NR] = $3; n = NR }
     END {
       half = t[n] / 2
       for (i = 2; i <= n; i++) {
         if (!after && t[i] >= 70) after = r[i]
         if (t[i] < half && r[i] > max1) max1 = r[i]
         if (t[i] >= half && r[i] > max2) max2 = r[i]
       }
       printf "RSS after the first period (70 s) %d KB, at the end %d KB; highest in the first half %d KB, in the second half %d KB\n", after, r[n], max1, max2
       printf "CPU: %.1f s in %d s = %.2f s per minute (%.2f%% of one CPU)\n", c[n], t[n], 60 * c[n] / t[n], 100 * c[n] / t[n]
     }' "$out/usage"
grep -E "lost|samples" "$out/stderr" | tail -3 || true
echo "files and measurements in $out"
