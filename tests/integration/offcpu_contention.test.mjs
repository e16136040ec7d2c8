// Off-CPU recording of threads that wait for a CPU others hold (offcpu.test.mjs says what an
// off-CPU sample is): their waits end in `[waiting for CPU]` (category `Waiting for CPU`),
// and a busy machine's preemptions do not blur where a thread sleeps.
//
// Fixtures (tests/fixtures): pinned_pair (pinned-a / pinned-b spin on CPU 0 together), sleepy
// (sleeper: 50 ms spin_phase / 50 ms sleep_phase in nanosleep). Each thread prints `cputime`
// (its CPU clock) and `stat` (utime+stime from /proc, its lifetime) lines.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { after, before, describe, it } from 'node:test';

import {
  FREQUENCY_HZ, ProfileView, checkProfileStructure, checkWithProfilerCli, fixturePath, pct,
  recordFixture, recordWith, recorderUnavailableReason, requireRecorder, saveMetrics,
} from './lib/harness.mjs';
import {
  PINNED_MS, SLEEPY_MS, blockedIn, checkWeights, itChecksThreadTimes,
  contains, fixtureThreads, isPseudo, leafIs, ms, offCpuBreakdown, threadByTid,
} from './lib/off_cpu.mjs';

const metrics = { frequencyHz: FREQUENCY_HZ };
after(() => {
  if (Object.keys(metrics).length > 1) saveMetrics('offcpu_contention', metrics);
});

describe('off-CPU: pinned_pair (two spinning threads on CPU 0)', () => {
  let rec;
  let view;
  let fixture;
  const m = (metrics.pinned_pair = { durationMs: PINNED_MS, threads: {} });
  const SPIN = { 'pinned-a': 'spin_a', 'pinned-b': 'spin_b' };

  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordFixture('pinned_pair', PINNED_MS, { label: 'offcpu_pinned_pair' });
    view = new ProfileView(rec.profile);
    fixture = fixtureThreads(rec.result.stdout);
  });

  it('writes a well-formed profile with a Waiting for CPU category', (t) => {
    if (!requireRecorder(t)) return;
    for (const w of checkProfileStructure(view)) t.diagnostic(`note: ${w}`);
    checkWeights(view);
    assert.ok(view.categoryIndex('Waiting for CPU') >= 0,
              `no 'Waiting for CPU' category: ${JSON.stringify(view.categories)}`);
  });

  it('each thread waits for the CPU half of the time and runs the other half', (t) => {
    if (!requireRecorder(t)) return;
    const failures = [];
    for (const [name, spin] of Object.entries(SPIN)) {
      const f = fixture.find((x) => x.name === name);
      assert.ok(f, `no ${name} line:\n${rec.result.stdout}`);
      const th = threadByTid(view, f.tid, name);
      const waiting = view.share(th, (fr) => leafIs(fr, '[waiting for CPU]'));
      const waitingInSpin = view.share(th, (fr) => leafIs(fr, '[waiting for CPU]') && contains(fr, spin));
      const running = view.share(th, (fr) => contains(fr, spin) && !isPseudo(fr[fr.length - 1]));
      const cpu = view.cpuNs(th);
      const cpuOfLife = cpu / f.lifeNs;
      m.threads[name] = { samples: th.samples.length, totalWeight: waiting.total, waitingShare: waiting.share,
                          waitingInSpinShare: waitingInSpin.hit / (waiting.hit || 1), runningInSpinShare: running.share,
                          cpuMs: cpu / 1e6, lifeMs: f.lifeNs / 1e6, cpuOfLife, fixtureCpuOfLife: f.cpuNs / f.lifeNs,
                          offCpu: offCpuBreakdown(view, th) };
      t.diagnostic(`${name}: ${th.samples.length} samples, total weight ${waiting.total.toFixed(1)}; ` +
                   `[waiting for CPU] ${pct(waiting.share)} (of it under ${spin}: ${pct(m.threads[name].waitingInSpinShare)}), ` +
                   `on CPU in ${spin} ${pct(running.share)}; CPU ${ms(cpu)} ms of life ${ms(f.lifeNs)} ms = ${pct(cpuOfLife)}`);
      for (const [stack, w] of view.topStacks(th, (fr) => isPseudo(fr[fr.length - 1] ?? {}), 3))
        t.diagnostic(`${name} off-CPU stack weight ${w.toFixed(1)}: ${stack}`);
      if (Math.abs(waiting.share - 0.5) > 0.10)
        failures.push(`${name}: [waiting for CPU] ${pct(waiting.share)} of the weight, want 40%-60%`);
      if (Math.abs(cpuOfLife - 0.5) > 0.10)
        failures.push(`${name}: CPU ${pct(cpuOfLife)} of its life, want 40%-60%`);
    }
    assert.deepEqual(failures, []);
  });

  itChecksThreadTimes(() => ({ view, fixture, m }));

  it('profiler-cli loads it', async (t) => {
    if (!requireRecorder(t)) return;
    await checkWithProfilerCli(t, rec.file, view);
  });
});

// A busy machine: a spinner (not profiled) for every CPU but one, so the sleeper is preempted
// often but waits little (a CPU soon frees up: more spinners make each wait outlast the
// interval, and hide the bug below), and a preemption that spans the end of a spin phase is
// followed at once by the phase's nanosleep. Its stop then comes less than an interval after the preemption's, at
// another place: the sleep must get its own stack (a reuse rule by time alone would give the
// sleep's weight to spin_phase), and with --no-off-cpu its own [sleeping] mark.
describe('off-CPU: sleepy on a busy machine', () => {
  const m = (metrics.sleepy_busy = { durationMs: SLEEPY_MS });
  let offCpu;
  let noOffCpu;

  before(async () => {
    if (recorderUnavailableReason()) return;
    const spinners = Array.from({ length: Math.max(1, availableParallelism() - 1) },
                                () => spawn('sh', ['-c', 'while :; do :; done']));
    try {
      offCpu = await recordFixture('sleepy', SLEEPY_MS, { label: 'offcpu_sleepy_busy' });
      noOffCpu = await recordWith('offcpu_sleepy_busy_no_off_cpu',
                                  ['--no-off-cpu', '--', fixturePath('sleepy'), String(SLEEPY_MS)]);
    } finally {
      for (const s of spinners) s.kill('SIGKILL');
    }
  });

  it('the sleep is in sleep_phase, and a preemption in user code takes no kernel stack', (t) => {
    if (!requireRecorder(t)) return;
    const view = new ProfileView(offCpu.profile);
    const f = fixtureThreads(offCpu.result.stdout).find((x) => x.name === 'sleeper');
    assert.ok(f, `no sleeper line:\n${offCpu.result.stdout}`);
    const th = threadByTid(view, f.tid, 'sleeper');
    const sleeping = view.share(th, (fr) => leafIs(fr, '[sleeping]'));
    const inSleepPhase = view.share(th, (fr) => blockedIn(fr, 'sleep_phase', '[sleeping]'));
    const preempted = view.share(th, (fr) => leafIs(fr, '[waiting for CPU]') && contains(fr, 'spin_phase'));
    // In user code: spin_phase itself, or the clock it reads in its loop (the vDSO); no kernel frame.
    const preemptedInUser = view.share(th, (fr) => leafIs(fr, '[waiting for CPU]') && contains(fr, 'spin_phase') &&
                                                   fr.length >= 2 && fr[fr.length - 2].category !== 'Kernel');
    Object.assign(m, { sleepingWeight: sleeping.hit, inSleepPhaseWeight: inSleepPhase.hit,
                       preemptedInSpinWeight: preempted.hit, preemptedInUserWeight: preemptedInUser.hit });
    t.diagnostic(`sleeper: [sleeping] weight ${sleeping.hit.toFixed(1)}, of it in sleep_phase > kernel ` +
                 `${inSleepPhase.hit.toFixed(1)}; waiting for CPU in spin_phase ${preempted.hit.toFixed(1)}, ` +
                 `of it in user code ${preemptedInUser.hit.toFixed(1)}`);
    for (const [stack, w] of view.topStacks(th, (fr) => isPseudo(fr[fr.length - 1] ?? {}), 4))
      t.diagnostic(`sleeper off-CPU stack weight ${w.toFixed(1)}: ${stack}`);
    assert.ok(sleeping.hit > 0.3 * SLEEPY_MS / view.profile.meta.interval, 'the sleeper hardly slept');
    assert.ok(inSleepPhase.hit >= 0.95 * sleeping.hit,
              `only ${pct(inSleepPhase.hit / sleeping.hit)} of the [sleeping] weight is in sleep_phase > kernel`);
    assert.ok(preempted.hit > 0, 'the sleeper was never preempted in spin_phase: the machine was not busy');
    assert.ok(preemptedInUser.hit >= 0.9 * preempted.hit,
              `only ${pct(preemptedInUser.hit / preempted.hit)} of spin_phase's waits for the CPU lack kernel frames`);
  });

  it('--no-off-cpu: each sleep gets its [sleeping] mark', (t) => {
    if (!requireRecorder(t)) return;
    const { view } = noOffCpu;
    const f = fixtureThreads(noOffCpu.result.stdout).find((x) => x.name === 'sleeper');
    assert.ok(f, `no sleeper line:\n${noOffCpu.result.stdout}`);
    const samples = view.samples(threadByTid(view, f.tid, 'sleeper'));
    const phases = Number(noOffCpu.result.stdout.match(/^phases=(\d+)$/m)?.[1]);
    const marks = samples.filter((s) => s.weight === 0 && s.frames.length === 1 && leafIs(s.frames, '[sleeping]'));
    Object.assign(m, { phases, sleepingMarks: marks.length });
    t.diagnostic(`sleeper (--no-off-cpu): ${phases} spin phases, ${marks.length} [sleeping] marks`);
    assert.ok(marks.length >= 0.9 * phases, `${marks.length} [sleeping] marks for ${phases} sleeps`);
  });
});
