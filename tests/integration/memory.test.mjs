// memory: `record --memory` gives each process a memory track (the processed format's counter of
// category Memory) from the kernel's own resident-memory counters. tests/fixtures/memory_grow
// grows to 240 MB, frees it, and holds 80 MB to the end, then prints the kernel's VmHWM and
// VmRSS: the track must peak where the kernel says, fall where the program freed, and end where
// it ended; the summary says the peak; -p gives an attached process its level from the start;
// the real front end's loader (profiler-cli) takes the profile; without --memory there is none.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import {
  BPFPROF, ProfileView, RESULTS_DIR, checkWithProfilerCli, fixturePath, readProfile, recordFixture,
  requireRecorder, run, saveMetrics, sleep, startBackground,
} from './lib/harness.mjs';

const MB = 1e6;

// The memory counter of a process (by OS pid) and its absolute values over time (the counter's
// samples are changes since the previous one).
function memorySeries(profile, pid) {
  const counter = (profile.counters ?? []).find((c) => c.category === 'Memory' && String(c.pid).split('.')[0] === String(pid));
  if (!counter) return null;
  const { time, count, length } = counter.samples;
  let level = 0;
  const points = [];
  for (let i = 0; i < length; i++) {
    level += count[i];
    points.push({ ms: time[i], bytes: level });
  }
  return { counter, points };
}

const fixturePid = (profile) => profile.threads.find((t) => t.processName === 'memory_grow')?.pid.split('.')[0];

function kernelFigures(stdout) {
  const m = /memory hwm_kb=(\d+) rss_kb=(\d+)/.exec(stdout);
  assert.ok(m, `memory_grow printed no memory line:\n${stdout}`);
  return { hwm: Number(m[1]) * 1024, rss: Number(m[2]) * 1024 };
}

describe('record --memory', () => {
  it('draws each process\'s resident memory, peaking where the kernel says', async (t) => {
    if (!requireRecorder(t)) return;
    const rec = await recordFixture('memory_grow', 1500, { recordArgs: ['--memory'] });
    const kernel = kernelFigures(rec.result.stdout);
    const series = memorySeries(rec.profile, fixturePid(rec.profile));
    assert.ok(series, 'no memory counter for memory_grow');
    assert.equal(series.counter.display?.label, 'Memory');
    const { points } = series;
    const peak = points.reduce((a, b) => (b.bytes > a.bytes ? b : a));
    const afterPeak = points.filter((p) => p.ms > peak.ms);
    const low = afterPeak.reduce((a, b) => (b.bytes < a.bytes ? b : a), peak);
    const last = points.at(-1);
    const metrics = {
      samples: points.length, peakMB: peak.bytes / MB, hwmMB: kernel.hwm / MB, lowAfterPeakMB: low.bytes / MB,
      lastMB: last.bytes / MB, rssMB: kernel.rss / MB,
    };
    t.diagnostic(`${points.length} memory samples; peak ${metrics.peakMB.toFixed(1)} MB at ${peak.ms.toFixed(0)} ms ` +
                 `(VmHWM ${metrics.hwmMB.toFixed(1)} MB), then down to ${metrics.lowAfterPeakMB.toFixed(1)} MB, ` +
                 `last ${metrics.lastMB.toFixed(1)} MB (VmRSS ${metrics.rssMB.toFixed(1)} MB)`);
    saveMetrics('memory', metrics);
    // Within a step of the kernel's counters (256 KB) and their per-CPU batching.
    assert.ok(Math.abs(peak.bytes - kernel.hwm) <= Math.max(2 * MB, 0.01 * kernel.hwm),
              `peak ${metrics.peakMB} MB against VmHWM ${metrics.hwmMB} MB`);
    assert.ok(peak.bytes - low.bytes >= 200 * MB, `fell by only ${(peak.bytes - low.bytes) / MB} MB after the peak`);
    assert.ok(Math.abs(last.bytes - kernel.rss) <= 4 * MB, `last ${metrics.lastMB} MB against VmRSS ${metrics.rssMB} MB`);
    // In time order, within the recording.
    assert.ok(points.every((p, i) => i === 0 || p.ms >= points[i - 1].ms), 'samples out of time order');
    const line = rec.result.stderr.split('\n').find((l) => l.includes('peak resident memory:'));
    assert.ok(line && /memory_grow \(\d+\) \d+\.\d MB at/.test(line), `summary: ${line}`);
    await checkWithProfilerCli(t, rec.file, new ProfileView(rec.profile));
  });

  it('gives a process attached with -p its level from the start', async (t) => {
    if (!requireRecorder(t)) return;
    const target = startBackground(fixturePath('memory_grow'), ['3000']);
    await sleep(1500);  // past its first growth and free: it holds nothing until 1.8 s
    const file = join(RESULTS_DIR, 'memory_attach.json.gz');
    const result = await run(BPFPROF, ['record', '--memory', '-p', String(target.pid), '-d', '1', '-o', file]);
    assert.equal(result.code, 0, result.stderr);
    await target.done;
    const series = memorySeries(readProfile(file), target.pid);
    assert.ok(series, 'no memory counter for the attached process');
    const first = series.points[0];
    const peak = Math.max(...series.points.map((p) => p.bytes));
    t.diagnostic(`${series.points.length} samples; first ${(first.bytes / MB).toFixed(1)} MB at ${first.ms.toFixed(0)} ms, ` +
                 `peak ${(peak / MB).toFixed(1)} MB`);
    assert.ok(first.bytes > 0 && first.ms < 100, 'the attached process\'s level is not there from the start');
    assert.ok(peak >= 70 * MB, `the 80 MB it held at the end peaks at ${peak / MB} MB`);
  });

  it('writes no memory track without --memory', async (t) => {
    if (!requireRecorder(t)) return;
    const rec = await recordFixture('memory_grow', 300, { label: 'memory_off' });
    assert.equal(rec.profile.counters, undefined);
  });
});
