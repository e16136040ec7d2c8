// Off-CPU recording (on by default for `-- CMD`): when a tracked thread leaves the CPU it gets
// one sample at that moment, stack = its user frames > the kernel's schedule path (none for a
// thread preempted in its own code: that path is only the interrupt's exit) > a leaf
// pseudo-frame `[sleeping]` / `[I/O wait]` (category Idle) or `[waiting for CPU]` (category
// `Waiting for CPU`), with samples.weight = blocked time / interval. On-CPU samples weigh 1,
// so on + off weight x meta.interval = the thread's lifetime, and threadCPUDelta still adds up
// to its CPU time. With --no-off-cpu a thread sampled while running gets, when it leaves the
// CPU, a weight-0 sample whose stack is just the pseudo-frame. Threads that wait for a CPU
// others hold: offcpu_contention.test.mjs.
//
// Fixtures (tests/fixtures): sleepy (sleeper: 50 ms spin_phase / 50 ms sleep_phase in
// nanosleep), pipe_block (reader: wait_for_data blocks in read() for ~1000 ms, then
// after_data spins 200 ms). Each thread prints `cputime` (its CPU clock) and `stat`
// (utime+stime from /proc, its lifetime) lines. The blocking calls are made from the fixture
// functions' own code, so a frame-pointer unwinder keeps those functions in the off-CPU stacks.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import {
  FREQUENCY_HZ, ProfileView, checkProfileStructure, checkWithProfilerCli, cliNameIs,
  fixturePath, formatFrames, pct, recordFixture, recordWith, recorderUnavailableReason,
  requireRecorder, saveMetrics, selfShare, withCliSession,
} from './lib/harness.mjs';
import {
  PIPE_WAIT_MS, PSEUDO, SLEEPY_MS, blockedIn, checkCpuAccounting, itChecksThreadTimes,
  checkWeights, contains, fixtureThreads, isPseudo, kernelHas, leafIs, ms, offCpuBreakdown,
  threadByTid,
} from './lib/off_cpu.mjs';

const metrics = { frequencyHz: FREQUENCY_HZ };
after(() => {
  if (Object.keys(metrics).length > 1) saveMetrics('offcpu', metrics);
});

describe('off-CPU: sleepy (50 ms spin / 50 ms nanosleep)', () => {
  let rec;
  let view;
  let fixture;
  let sleeper;
  const m = (metrics.sleepy = { durationMs: SLEEPY_MS });

  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordFixture('sleepy', SLEEPY_MS, { label: 'offcpu_sleepy' });
    view = new ProfileView(rec.profile);
    fixture = fixtureThreads(rec.result.stdout);
    const f = fixture.find((x) => x.name === 'sleeper');
    assert.ok(f, `no sleeper line:\n${rec.result.stdout}`);
    sleeper = { fixture: f, thread: threadByTid(view, f.tid, 'sleeper') };
  });

  it('writes a well-formed profile with weighted off-CPU samples', (t) => {
    if (!requireRecorder(t)) return;
    for (const w of checkProfileStructure(view)) t.diagnostic(`note: ${w}`);
    assert.ok(view.categoryIndex('Idle') >= 0, `no Idle category: ${JSON.stringify(view.categories)}`);
    checkWeights(view);
    const s = sleeper.thread.samples;
    assert.ok(Array.isArray(s.weight), 'sleeper: samples.weight is not an array');
    assert.equal(s.weightType, 'samples');
    assert.equal(sleeper.thread.name, 'sleeper');
    assert.ok(s.weight.some((w) => w > 1), 'sleeper: no sample weighs more than 1');
  });

  it("sleeper's CPU time is 50% (+-5%) of its lifetime", (t) => {
    if (!requireRecorder(t)) return;
    const f = sleeper.fixture;
    const cpu = view.cpuNs(sleeper.thread);
    const ratio = cpu / f.lifeNs;
    Object.assign(m, { cpuMs: cpu / 1e6, lifeMs: f.lifeNs / 1e6, cpuOfLife: ratio,
                       fixtureCpuOfLife: f.cpuNs / f.lifeNs });
    t.diagnostic(`sleeper: profile CPU ${ms(cpu)} ms of life ${ms(f.lifeNs)} ms = ${pct(ratio)} ` +
                 `(its own CPU clock: ${pct(f.cpuNs / f.lifeNs)})`);
    // The profile must tell the CPU time the thread really had (its own clock); 50% is what
    // the fixture gets only on a machine with a CPU to spare.
    const own = f.cpuNs / f.lifeNs;
    assert.ok(Math.abs(ratio - own) <= 0.05,
              `sleeper CPU ${pct(ratio)} of its life in the profile, ${pct(own)} by its own clock`);
    if (Math.abs(own - 0.5) > 0.05) {
      t.diagnostic(`the sleeper's own clock says ${pct(own)}: a busy machine, 50% not checked`);
      return;
    }
    assert.ok(Math.abs(ratio - 0.5) <= 0.05, `sleeper CPU ${pct(ratio)} of its life, want 45%-55%`);
  });

  it('sleep_phase > kernel > [sleeping] holds half the weight, spin_phase the other half', (t) => {
    if (!requireRecorder(t)) return;
    const th = sleeper.thread;
    const sleep = view.share(th, (f) => blockedIn(f, 'sleep_phase', '[sleeping]'));
    const sleepAny = view.share(th, (f) => contains(f, 'sleep_phase'));
    const spin = view.share(th, (f) => contains(f, 'spin_phase'));
    const scheduled = view.share(th, (f) => blockedIn(f, 'sleep_phase', '[sleeping]') &&
                                           kernelHas(f, /nanosleep/) && kernelHas(f, /schedule/));
    const weightMs = sleep.total * view.profile.meta.interval;
    const lifeRatio = weightMs / (sleeper.fixture.lifeNs / 1e6);
    Object.assign(m, { totalWeight: sleep.total, sleepShare: sleep.share, sleepAnyShare: sleepAny.share,
                       spinShare: spin.share, sleepWithScheduleShare: scheduled.hit / (sleep.hit || 1),
                       weightMsOfLife: lifeRatio, offCpu: offCpuBreakdown(view, th),
                       samples: th.samples.length });
    t.diagnostic(`sleeper: ${th.samples.length} samples, total weight ${sleep.total.toFixed(1)} ` +
                 `(${weightMs.toFixed(1)} ms = ${pct(lifeRatio)} of life); sleep_phase>kernel>[sleeping] ` +
                 `${pct(sleep.share)} (any sleep_phase ${pct(sleepAny.share)}), spin_phase ${pct(spin.share)}; ` +
                 `off-CPU weight by leaf ${JSON.stringify(m.offCpu)}`);
    for (const [stack, w] of view.topStacks(th, (f) => isPseudo(f[f.length - 1] ?? {}), 4))
      t.diagnostic(`sleeper off-CPU stack weight ${w.toFixed(1)}: ${stack}`);
    for (const [stack, w] of view.topStacks(th, (f) => !contains(f, 'sleep_phase') && !contains(f, 'spin_phase'), 3))
      t.diagnostic(`sleeper other stack weight ${w.toFixed(1)}: ${stack}`);
    const failures = [];
    if (Math.abs(sleep.share - 0.5) > 0.07)
      failures.push(`sleep_phase > kernel > [sleeping]: ${pct(sleep.share)} of the weight, want 43%-57%`);
    if (Math.abs(spin.share - 0.5) > 0.07)
      failures.push(`spin_phase: ${pct(spin.share)} of the weight, want 43%-57%`);
    if (scheduled.hit < 0.9 * sleep.hit)
      failures.push(`only ${pct(scheduled.hit / (sleep.hit || 1))} of the sleep weight has *nanosleep* and ` +
                    '*schedule* kernel frames');
    if (Math.abs(lifeRatio - 1) > 0.05)
      failures.push(`total weight x interval ${weightMs.toFixed(1)} ms vs life ${ms(sleeper.fixture.lifeNs)} ms ` +
                    `(${pct(lifeRatio)})`);
    assert.deepEqual(failures, []);
  });

  itChecksThreadTimes(() => ({ view, fixture, m }));

  it('profiler-cli loads it and, idle included, shows [sleeping] as half of sleeper\'s self time', async (t) => {
    if (!requireRecorder(t)) return;
    const { list } = await checkWithProfilerCli(t, rec.file, view);
    const entry = list.find((x) => x.name === 'sleeper');
    assert.ok(entry, `threads: ${list.map((x) => x.name).join(', ')}`);
    // Samples whose leaf is in the Idle category are left out of `thread samples` by default.
    const s = await withCliSession(rec.file, (session) =>
      session.json('thread', 'samples', '--thread', entry.threadHandle, '--include-idle'));
    const sleeping = selfShare(s, '[sleeping]');
    const spin = selfShare(s, 'spin_phase');
    m.cliSelfShares = { sleeping, spin_phase: spin };
    t.diagnostic(`profiler-cli sleeper self: [sleeping] ${pct(sleeping)}, spin_phase ${pct(spin)}; top: ` +
                 s.topFunctionsBySelf.slice(0, 4).map((x) => `${x.name} ${x.selfPercentage.toFixed(1)}%`).join(', '));
    // Of the wall time, not of the running time as selfShare gives it: a busy machine's
    // delays after each wakeup are [waiting for CPU], not sleep (nor are its preemptions).
    const sleepingOfWall = s.topFunctionsBySelf.find((x) => x.name === '[sleeping]')?.selfPercentage / 100;
    assert.ok(Math.abs(sleepingOfWall - 0.5) <= 0.07, `profiler-cli: [sleeping] ${pct(sleepingOfWall)} of the wall time`);
    assert.ok(s.topFunctionsBySelf.some((x) => cliNameIs(x.name, 'spin_phase')), 'profiler-cli: no spin_phase');
  });
});

describe('off-CPU: pipe_block (reader blocked in read() for 1000 ms)', () => {
  let rec;
  let view;
  let fixture;
  let reader;
  let wait;
  const m = (metrics.pipe_block = { waitMs: PIPE_WAIT_MS });

  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordFixture('pipe_block', PIPE_WAIT_MS, { label: 'offcpu_pipe_block' });
    view = new ProfileView(rec.profile);
    fixture = fixtureThreads(rec.result.stdout);
    const f = fixture.find((x) => x.name === 'reader');
    assert.ok(f, `no reader line:\n${rec.result.stdout}`);
    reader = { fixture: f, thread: threadByTid(view, f.tid, 'reader') };
    const w = rec.result.stdout.match(/^wait tid=(\d+) start_unix_ns=(\d+) end_unix_ns=(\d+)$/m);
    assert.ok(w, `no wait line:\n${rec.result.stdout}`);
    // In the profile's time base (ms after meta.startTime, the wall clock at time zero).
    const startTime = rec.profile.meta.startTime;
    wait = { start: Number(BigInt(w[2]) / 1000n) / 1000 - startTime,
             end: Number(BigInt(w[3]) / 1000n) / 1000 - startTime };
  });

  it('writes a well-formed profile', (t) => {
    if (!requireRecorder(t)) return;
    for (const w of checkProfileStructure(view)) t.diagnostic(`note: ${w}`);
    checkWeights(view);
    assert.ok(Array.isArray(reader.thread.samples.weight), 'reader: samples.weight is not an array');
  });

  it('wait_for_data > kernel (pipe_read, schedule) > [sleeping] weighs ~1000 ms', (t) => {
    if (!requireRecorder(t)) return;
    const th = reader.thread;
    const interval = view.profile.meta.interval;
    const blocked = view.share(th, (f) => blockedIn(f, 'wait_for_data', '[sleeping]'));
    const viaPipe = view.share(th, (f) => blockedIn(f, 'wait_for_data', '[sleeping]') &&
                                         kernelHas(f, /pipe_read/) && kernelHas(f, /schedule/));
    const blockedMs = blocked.hit * interval;
    Object.assign(m, { blockedMs, measuredWaitMs: wait.end - wait.start, viaPipeReadShare: viaPipe.hit / (blocked.hit || 1),
                       offCpu: offCpuBreakdown(view, th), samples: th.samples.length });
    t.diagnostic(`reader: wait_for_data>kernel>[sleeping] weight x interval ${blockedMs.toFixed(1)} ms ` +
                 `(the fixture measured ${(wait.end - wait.start).toFixed(1)} ms in read()); with pipe_read and ` +
                 `schedule: ${pct(viaPipe.hit / (blocked.hit || 1))}; off-CPU weight ${JSON.stringify(m.offCpu)}`);
    for (const [stack, w] of view.topStacks(th, (f) => contains(f, 'wait_for_data'), 3))
      t.diagnostic(`reader wait_for_data stack weight ${w.toFixed(1)}: ${stack}`);
    assert.ok(Math.abs(blockedMs / PIPE_WAIT_MS - 1) <= 0.10,
              `wait_for_data > kernel > [sleeping]: ${blockedMs.toFixed(1)} ms, want 900-1100 ms`);
    assert.ok(viaPipe.hit >= 0.9 * blocked.hit,
              `only ${pct(viaPipe.hit / (blocked.hit || 1))} of the wait has pipe_read and schedule kernel frames`);
  });

  it('stack chart: the wait is one sample at the moment it starts, the next ~1000 ms later', (t) => {
    if (!requireRecorder(t)) return;
    const samples = view.samples(reader.thread);
    // The file's zero and the fixture's wall clock may disagree by a little: samples up to
    // 1 ms before the wait that are not the wait itself are from before it. So is a tick of
    // the read running into the kernel before it blocks (seen: ksys_read > fdget_pos 20 us
    // after the fixture noted the start).
    const SLOP_MS = 1;
    let i = samples.findIndex((s) => s.time >= wait.start - SLOP_MS);
    while (i >= 0 && i < samples.length && samples[i].time < wait.start + SLOP_MS &&
           !blockedIn(samples[i].frames, 'wait_for_data', '[sleeping]'))
      i++;
    assert.ok(i >= 0 && i < samples.length, `reader: no sample at or after the wait start (${wait.start.toFixed(1)} ms)`);
    const first = samples[i];
    const next = samples[i + 1];
    const gap = next ? next.time - first.time : NaN;
    Object.assign(m, { waitStartMs: wait.start, firstSampleMs: first.time, firstWeight: first.weight,
                       nextSampleGapMs: gap });
    t.diagnostic(`reader: wait starts at ${wait.start.toFixed(2)} ms, ends at ${wait.end.toFixed(2)} ms; ` +
                 `first sample at ${first.time.toFixed(2)} ms weight ${first.weight.toFixed(1)}: ${formatFrames(first.frames)}`);
    t.diagnostic(`reader: next sample at ${next ? next.time.toFixed(2) : '-'} ms (gap ${gap.toFixed(1)} ms)` +
                 (next ? `: ${formatFrames(next.frames)}` : ''));
    assert.ok(blockedIn(first.frames, 'wait_for_data', '[sleeping]'),
              `the first sample after the wait start is not wait_for_data > kernel > [sleeping]: ${formatFrames(first.frames)}`);
    // Within 5 ms of when the fixture noted it, or later by the time the samples before it
    // cover: a loaded machine can leave the thread runnable ([waiting for CPU]) or running its
    // way into read() before it blocks (a CI run: noted at 1.98 ms, blocked at 7.08).
    const between = samples.filter((s) => s.time >= wait.start - SLOP_MS && s.time < first.time);
    const coveredMs = between.reduce((sum, s) => sum + s.weight, 0) * (1000 / FREQUENCY_HZ);
    m.coveredBeforeWaitMs = coveredMs;
    assert.ok(first.time - wait.start >= -5 && first.time - wait.start <= 5 + coveredMs,
              `the wait sample is at ${first.time.toFixed(2)} ms, the wait started at ${wait.start.toFixed(2)} ms ` +
              `(samples between them cover ${coveredMs.toFixed(1)} ms)`);
    assert.ok(next, 'no sample after the wait');
    assert.ok(gap >= 950, `the next sample comes ${gap.toFixed(1)} ms after the wait sample, want >= 950 ms`);
  });

  itChecksThreadTimes(() => ({ view, fixture, m }));

  it('profiler-cli loads it', async (t) => {
    if (!requireRecorder(t)) return;
    const { list } = await checkWithProfilerCli(t, rec.file, view);
    assert.ok(list.some((x) => x.name === 'reader'), `threads: ${list.map((x) => x.name).join(', ')}`);
  });
});

describe('--no-off-cpu: sleepy', () => {
  let rec;
  let fixture;
  const m = (metrics.sleepy_no_off_cpu = { durationMs: SLEEPY_MS });

  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordWith('offcpu_sleepy_no_off_cpu',
                           ['--no-off-cpu', '--', fixturePath('sleepy'), String(SLEEPY_MS)]);
    fixture = fixtureThreads(rec.result.stdout);
  });

  // Timer samples weigh 1, or n for a run of n identical consecutive ones (collapsed);
  // a thread leaving the CPU leaves a weight-0 marker. No fractional (off-CPU) weights.
  it('writes a well-formed profile whose weights are whole ticks or 0', (t) => {
    if (!requireRecorder(t)) return;
    const { view } = rec;
    for (const w of checkProfileStructure(view)) t.diagnostic(`note: ${w}`);
    const bad = [];
    for (const th of view.threads) {
      for (const s of view.samples(th)) {
        if (s.weight !== 0 && !(Number.isInteger(s.weight) && s.weight >= 1))
          bad.push(`${th.name}: weight ${s.weight}: ${formatFrames(s.frames)}`);
        else if (s.weight === 0 && !(s.frames.length === 1 && isPseudo(s.frames[0]) &&
                                     s.frames[0].category === PSEUDO[s.frames[0].name]))
          bad.push(`${th.name}: weight 0 on a stack other than one pseudo-frame: ${formatFrames(s.frames)}`);
        else if (s.weight >= 1 && s.frames.some(isPseudo))
          bad.push(`${th.name}: weight ${s.weight} on a stack with a pseudo-frame: ${formatFrames(s.frames)}`);
      }
    }
    m.badSamples = bad.length;
    assert.deepEqual(bad.slice(0, 10), [], `${bad.length} samples break the --no-off-cpu contract`);
  });

  it('sleeper gets a weight-0 [sleeping] sample right after each spin phase', (t) => {
    if (!requireRecorder(t)) return;
    const { view } = rec;
    const f = fixture.find((x) => x.name === 'sleeper');
    assert.ok(f, `no sleeper line:\n${rec.result.stdout}`);
    const th = threadByTid(view, f.tid, 'sleeper');
    const samples = view.samples(th);
    const phases = Number(rec.result.stdout.match(/^phases=(\d+)$/m)?.[1]);
    let idle = 0;
    let afterSpin = 0;
    let spinRuns = 0;
    for (let i = 0; i < samples.length; i++) {
      const s = samples[i];
      const inSpin = s.weight >= 1 && contains(s.frames, 'spin_phase');
      if (inSpin && !(i > 0 && samples[i - 1].weight >= 1 && contains(samples[i - 1].frames, 'spin_phase'))) spinRuns++;
      if (s.weight !== 0 || !(s.frames.length === 1 && leafIs(s.frames, '[sleeping]'))) continue;
      idle++;
      // The last on-CPU sample before it (past the markers of preemptions on a busy machine):
      // spin_phase, or the way into nanosleep in sleep_phase.
      let j = i - 1;
      while (j >= 0 && samples[j].weight === 0) j--;
      const prev = samples[j];
      if (prev && prev.weight >= 1 && (contains(prev.frames, 'spin_phase') || contains(prev.frames, 'sleep_phase')))
        afterSpin++;
    }
    const weighted = samples.filter((s) => !Number.isInteger(s.weight)).length;  // fractional: off-CPU
    Object.assign(m, { phases, spinRuns, idleSamples: idle, idleAfterSpin: afterSpin, weightedSamples: weighted,
                       samples: samples.length });
    t.diagnostic(`sleeper (--no-off-cpu): ${samples.length} samples, ${phases} spin phases run, ${spinRuns} runs of ` +
                 `spin_phase samples, ${idle} weight-0 [sleeping] samples, ${afterSpin} of them right after an on-CPU ` +
                 `spin_phase/sleep_phase sample, ${weighted} samples with a fractional weight`);
    assert.equal(weighted, 0);
    assert.ok(afterSpin >= 15, `only ${afterSpin} weight-0 [sleeping] samples follow a spin phase (want >= 15 of ~${phases})`);
  });

  it('CPU accounting is unchanged: threadCPUDelta vs utime+stime and the CPU clock', (t) => {
    if (!requireRecorder(t)) return;
    checkCpuAccounting(t, rec.view, fixture, m, { idleMayBeAbsent: true });
  });

  it('profiler-cli loads it', async (t) => {
    if (!requireRecorder(t)) return;
    await checkWithProfilerCli(t, rec.file, rec.view);
  });
});
