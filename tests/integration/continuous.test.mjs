// Continuous use: --switch-output writes a complete profile every period while recording
// (each loading on its own, together holding every sample once), --switch-output-files keeps
// the newest N, and --flight-recorder keeps only the last DURATION, written on SIGUSR2 and at
// the end. Runs once: none of this depends on the unwinding mode.
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import {
  BPFPROF, FREQUENCY_HZ, ProfileView, RESULTS_DIR, checkWithProfilerCli, fixturePath, withCliSession,
  parseCputimeLines, readProfile, requireRecorder, run, sleep, startBackground, untilSampling,
} from './lib/harness.mjs';

// Loads a whole-system profile in profiler-cli and compares its thread list with the file
// (checkWithProfilerCli's per-thread queries take minutes for hundreds of threads).
async function checkLoads(file, profile) {
  await withCliSession(file, async (session) => {
    const list = await session.threadList();
    assert.equal(list.length, profile.threads.length, `${file}: profiler-cli lists ${list.length} threads`);
    for (const entry of list)
      assert.equal(String(entry.tid), String(profile.threads[entry.threadIndex].tid));
  });
}

function freshDir(name) {
  const dir = join(RESULTS_DIR, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

// Sample weight (in intervals) and threadCPUDelta (ns) of the threads with tid in `tids`.
function threadTotals(profile, tids) {
  let weight = 0;
  let cpuNs = 0;
  for (const th of profile.threads) {
    if (!tids.has(Number(th.tid))) continue;
    const s = th.samples;
    for (let i = 0; i < s.length; i++) {
      weight += s.weight ? s.weight[i] : 1;
      cpuNs += s.threadCPUDelta?.[i] ?? 0;
    }
  }
  return { weight, cpuNs };
}

const PERIOD_FILE = /^sw\.\d{8}T\d{6}Z(-\d+)?\.json\.gz$/;

describe('--switch-output', () => {
  it('a command: complete files every second that together hold all of its samples', async (t) => {
    if (!requireRecorder(t)) return;
    const dir = freshDir('switch-output');
    const result = await run(BPFPROF, ['record', '-F', String(FREQUENCY_HZ), '--no-off-cpu',
                                       '--switch-output', '1s', '-o', join(dir, 'sw.json.gz'),
                                       '--', fixturePath('busy'), '3500']);
    assert.equal(result.code, 0, result.stderr);
    const files = readdirSync(dir).filter((f) => PERIOD_FILE.test(f)).sort();
    assert.ok(files.length >= 3, `files: ${readdirSync(dir).join(' ')}\n${result.stderr}`);
    assert.deepEqual(readdirSync(dir).filter((f) => !PERIOD_FILE.test(f)), [],
                     'nothing but the period files (no temporary files, no -o file)');

    const cputimes = parseCputimeLines(result.stdout);
    const tids = new Set(cputimes.map((c) => c.tid));
    const fixtureNs = cputimes.reduce((s, c) => s + c.ns, 0);
    let weight = 0;
    let cpuNs = 0;
    let previousEnd = 0;
    for (const f of files) {
      const profile = readProfile(join(dir, f));
      const totals = threadTotals(profile, tids);
      weight += totals.weight;
      cpuNs += totals.cpuNs;
      // The periods follow each other: each starts where the one before ended.
      const start = profile.meta.startTime;
      const end = start + profile.meta.profilingEndTime;
      if (previousEnd) assert.ok(Math.abs(start - previousEnd) < 1, `${f} starts at ${start}, the one before ended at ${previousEnd}`);
      previousEnd = end;
      await checkWithProfilerCli(t, join(dir, f), new ProfileView(profile));
    }
    t.diagnostic(`${files.length} files: ${weight} samples, ${(cpuNs / 1e6).toFixed(0)} ms CPU; ` +
                 `the fixture's clock ${(fixtureNs / 1e6).toFixed(0)} ms`);
    const expectedSamples = fixtureNs / (1e9 / FREQUENCY_HZ);
    assert.ok(Math.abs(weight / expectedSamples - 1) < 0.05, `${weight} samples for ${expectedSamples.toFixed(0)} expected`);
    assert.ok(Math.abs(cpuNs / fixtureNs - 1) < 0.05, `CPU ${cpuNs} ns against the fixture's ${fixtureNs} ns`);
  });

  it('-a -d 4 --switch-output 1s: at least 3 files, each loading, all of a workload\'s samples', async (t) => {
    if (!requireRecorder(t)) return;
    const dir = freshDir('switch-output-a');
    // Frame-pointer stacks: no stack copies, whose 8-16 KB events fill the ring buffer within
    // a second of a period's writing when a busy machine starts many new programs.
    const recording = startBackground(BPFPROF, ['record', '-a', '-F', String(FREQUENCY_HZ), '-d', '4',
                                                '--call-graph', 'fp', '--switch-output', '1s',
                                                '-o', join(dir, 'sw.json.gz')]);
    await untilSampling(recording);
    // busy runs inside the recording: its own clock is the reference for its samples.
    const busy = await run(fixturePath('busy'), ['2000']);
    const result = await recording.done;
    assert.equal(result.code, 0, result.stderr);
    const files = readdirSync(dir).filter((f) => PERIOD_FILE.test(f)).sort();
    assert.ok(files.length >= 3, `${readdirSync(dir).join(' ')}\n${result.stderr}`);
    t.diagnostic(result.stderr.split('\n').filter((l) => /events lost|samples \(/.test(l)).join('\n'));
    const cputimes = parseCputimeLines(busy.stdout);
    const tids = new Set(cputimes.map((c) => c.tid));
    const busyNs = cputimes.reduce((s, c) => s + c.ns, 0);
    let weight = 0;
    for (const f of files) {
      const profile = readProfile(join(dir, f));
      assert.ok(profile.threads.length > 0, `${f} has threads`);
      weight += threadTotals(profile, tids).weight;
      await checkLoads(join(dir, f), profile);
    }
    const expected = busyNs / (1e9 / FREQUENCY_HZ);
    t.diagnostic(`${files.length} files; busy: ${weight} samples, ${expected.toFixed(0)} by its clock`);
    assert.ok(Math.abs(weight / expected - 1) < 0.05, `busy: ${weight} samples for ${expected.toFixed(0)} expected`);
  });

  // Each file holds its own period's woken waits: those of the periods before are not
  // written again (they were, with negative times, before the model dropped them).
  it('a command with wakers: each file\'s "Woken by" markers are its own', async (t) => {
    if (!requireRecorder(t)) return;
    const dir = freshDir('switch-output-wakers');
    const result = await run(BPFPROF, ['record', '-F', String(FREQUENCY_HZ), '--switch-output', '1s',
                                       '-o', join(dir, 'sw.json.gz'), '--', fixturePath('wakers'), '4000']);
    assert.equal(result.code, 0, result.stderr);
    const files = readdirSync(dir).filter((f) => PERIOD_FILE.test(f)).sort();
    assert.ok(files.length >= 3, `files: ${readdirSync(dir).join(' ')}\n${result.stderr}`);
    const consumerWaits = Number(/waits name=acc-consumer tid=\d+ count=(\d+)/.exec(result.stdout)?.[1]);
    let consumerMarkers = 0;
    for (const f of files) {
      const profile = readProfile(join(dir, f));
      const duration = profile.meta.profilingEndTime;
      for (const th of profile.threads) {
        const m = th.markers;
        for (let i = 0; i < m.length; i++) {
          if (m.data[i]?.type !== 'bpfprof-woken') continue;
          // A wait is written with the period in which the thread ran again; its waking (the
          // marker's end) can be a moment before that period began (seen: 14 µs), never a
          // period before (the count below catches waits written twice).
          assert.ok(m.endTime[i] >= -50 && m.endTime[i] <= duration + 1,
                    `${f}: ${th.name}'s marker ending at ${m.endTime[i]} ms is outside 0-${duration} ms`);
          if (th.name === 'acc-consumer') consumerMarkers++;
        }
      }
    }
    t.diagnostic(`${files.length} files: ${consumerMarkers} markers on acc-consumer; it counted ${consumerWaits} waits`);
    // Each wait once: not repeated in later files (and not lost between them).
    assert.ok(consumerMarkers <= consumerWaits * 1.02 && consumerMarkers >= consumerWaits * 0.9,
              `${consumerMarkers} markers for ${consumerWaits} waits`);
  });

  it('--switch-output-files 2: the newest two files stay', async (t) => {
    if (!requireRecorder(t)) return;
    const dir = freshDir('switch-output-files');
    const result = await run(BPFPROF, ['record', '-a', '-d', '3.5', '--switch-output', '1s',
                                       '--switch-output-files', '2', '-o', join(dir, 'sw.json.gz')]);
    assert.equal(result.code, 0, result.stderr);
    const written = [...result.stderr.matchAll(/wrote (\S+\.json\.gz)/g)].map((m) => m[1].split('/').pop());
    const files = readdirSync(dir).sort();
    assert.ok(written.length >= 3, result.stderr);
    assert.deepEqual(files, written.slice(-2).sort(), `kept ${files.join(' ')} of ${written.join(' ')}`);
  });
});

describe('--flight-recorder', () => {
  it('SIGUSR2 writes only the last DURATION, and so does the end', async (t) => {
    if (!requireRecorder(t)) return;
    const dir = freshDir('flight-recorder');
    const out = join(dir, 'fr.json.gz');
    const bg = startBackground(BPFPROF, ['record', '-F', String(FREQUENCY_HZ), '--no-off-cpu',
                                         '--flight-recorder', '2s', '-o', out, '--',
                                         fixturePath('busy'), '4500']);
    await sleep(3000);
    process.kill(bg.pid, 'SIGUSR2');
    const signalled = Date.now();
    const result = await bg.done;
    assert.equal(result.code, 0, result.stderr);
    const dumps = readdirSync(dir).filter((f) => /^fr\.\d{8}T\d{6}Z\.json\.gz$/.test(f));
    assert.equal(dumps.length, 1, `${readdirSync(dir).join(' ')}\n${result.stderr}`);
    for (const file of [join(dir, dumps[0]), out]) {
      const profile = readProfile(file);
      assert.ok(profile.meta.profilingEndTime <= 2000 + 1, `${file}: ${profile.meta.profilingEndTime} ms`);
      let first = Infinity;
      let last = -Infinity;
      let weight = 0;
      for (const th of profile.threads) {
        for (let i = 0; i < th.samples.length; i++) {
          // A row of weight w is w consecutive ticks of one stack, from its time on.
          const ticks = th.samples.weight ? th.samples.weight[i] : 1;
          first = Math.min(first, th.samples.time[i]);
          last = Math.max(last, th.samples.time[i] + (Math.max(ticks, 1) - 1) * 1000 / FREQUENCY_HZ);
          weight += ticks;
        }
      }
      t.diagnostic(`${file}: samples from ${first} to ${last} ms, weight ${weight}`);
      // busy ran the whole time: its samples fill the 2 s and nothing before them is kept. A
      // collapsed row's last tick is estimated an interval apart from the one before it, and the
      // timer's ticks come a little early or late: one interval of slack at the end (2000.234 ms
      // was seen).
      const tick = 1000 / FREQUENCY_HZ;
      assert.ok(first >= 0 && first < 300 && last <= 2000 + tick && last > 1700,
                `${file}: samples from ${first} to ${last} ms`);
      assert.ok(weight <= 2000 * 1.02, `${file}: ${weight} samples in 2 s of one thread`);
      if (file !== out) {
        // The dump holds the 2 s before the signal, less what was still in the reorder window.
        const end = profile.meta.startTime + profile.meta.profilingEndTime;
        assert.ok(signalled - end >= 0 && signalled - end < 1500, `dump ends ${signalled - end} ms before the signal`);
      }
      await checkWithProfilerCli(t, file, new ProfileView(profile));
    }
  });
});
