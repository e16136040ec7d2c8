// threads: main starts worker-alpha (worker_main -> alpha_spin) and worker-beta
// (worker_main -> beta_spin) and joins them.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import {
  ProfileView, checkCpuAgainstFixture, checkProfileStructure, checkWithProfilerCli,
  hasUserChainAtLeaf, hottestSelf, pct, recordFixture, recorderUnavailableReason,
  kernelUnderLeaf, requireRecorder, saveMetrics, selfShare, totalShare, waitingForCpuShare,
} from './lib/harness.mjs';

const DURATION_MS = 1500;
const WORKERS = { 'worker-alpha': 'alpha_spin', 'worker-beta': 'beta_spin' };

describe('threads', () => {
  let rec;
  let view;
  const metrics = { fixture: 'threads', durationMs: DURATION_MS, workers: {} };

  after(() => {
    if (rec) saveMetrics('threads', metrics);
  });

  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordFixture('threads', DURATION_MS);
    view = new ProfileView(rec.profile);
  });

  it('writes a well-formed profile', (t) => {
    if (!requireRecorder(t)) return;
    for (const w of checkProfileStructure(view)) t.diagnostic(`note: ${w}`);
  });

  it('has the main thread and both named workers in one process', (t) => {
    if (!requireRecorder(t)) return;
    const byName = (name) => rec.cputimes.find((c) => c.name === name);
    const main = view.threads.find((th) => String(th.tid) === String(byName('threads').tid));
    // The main thread only waits; with no sample it may be left out of the profile.
    const pid = String(byName('threads').tid);
    if (main) {
      assert.equal(main.isMainThread, true);
      assert.equal(main.name, 'threads');
    } else {
      t.diagnostic('threads: the main thread (no CPU to speak of) is not in the profile');
    }
    for (const [name] of Object.entries(WORKERS)) {
      const th = view.threads.filter((x) => x.name === name);
      assert.equal(th.length, 1, `want one thread named ${name}; threads: ${view.threads.map((x) => `${x.tid} ${x.name}`).join(', ')}`);
      assert.equal(String(th[0].tid), String(byName(name).tid));
      assert.equal(String(th[0].pid), pid);
      assert.equal(th[0].processName, 'threads');
      assert.equal(th[0].isMainThread, false);
    }
  });

  it('each worker spins in its own function under worker_main', (t) => {
    if (!requireRecorder(t)) return;
    const failures = [];
    for (const [name, spin] of Object.entries(WORKERS)) {
      const th = view.threads.find((x) => x.name === name);
      assert.ok(th, `no thread named ${name}`);
      const other = spin === 'alpha_spin' ? 'beta_spin' : 'alpha_spin';
      const r = view.share(th, (f) => hasUserChainAtLeaf(f, ['worker_main', spin]));
      const wrong = view.share(th, (f) => f.some((x) => x.name === other));
      metrics.workers[name] = { samples: r.total, expectedStackShare: r.share, otherSpinShare: wrong.share };
      t.diagnostic(`${name}: ${r.total} samples, ${pct(r.share)} worker_main > ${spin}, ${pct(wrong.share)} with ${other}`);
      for (const [stack, n] of view.topStacks(th, (f) => !hasUserChainAtLeaf(f, ['worker_main', spin]), 3))
        t.diagnostic(`${name}: other stack x${n}: ${stack}`);
      if (r.share < 0.9) failures.push(`${name}: only ${pct(r.share)} worker_main > ${spin}`);
      if (wrong.hit > 0) failures.push(`${name}: ${wrong.hit} samples contain ${other}`);
      const { share: entered, stray } = kernelUnderLeaf(view, th, spin);
      t.diagnostic(`${name}: ${pct(entered)} of samples in the kernel under ${spin}`);
      for (const [stack, n] of stray) failures.push(`${name}: x${n} kernel frames under ${spin} without an interrupt entry: ${stack}`);
    }
    assert.deepEqual(failures, []);
  });

  it("threadCPUDelta adds up to each thread's own CPU clock (within 10%)", (t) => {
    if (!requireRecorder(t)) return;
    metrics.cpu = checkCpuAgainstFixture(t, view, rec.cputimes);
    assert.equal(metrics.cpu.length, 2, 'both workers should be compared');
  });

  it('profiler-cli lists worker-alpha and worker-beta with alpha_spin / beta_spin hot', async (t) => {
    if (!requireRecorder(t)) return;
    const { info, list, samplesByHandle } = await checkWithProfilerCli(t, rec.file, view);
    assert.equal(info.processCount, 1);
    for (const [name, spin] of Object.entries(WORKERS)) {
      const entry = list.find((x) => x.name === name);
      assert.ok(entry, `profiler-cli thread list has no ${name}: ${list.map((x) => x.name).join(', ')}`);
      assert.equal(entry.processName, 'threads');
      const s = samplesByHandle.get(entry.threadHandle);
      assert.equal(hottestSelf(s), spin);
      // With the interrupts it took (kernelUnderLeaf).
      const running = totalShare(s, spin) / (1 - waitingForCpuShare(s));
      assert.ok(running >= 0.9, `${name}: ${spin} total ${pct(running)} of the time it ran`);
      // What profiler-cli shows is the thread's own CPU clock (the fixture prints it); how much
      // CPU the spinning thread got depends on the machine's load, not on bpfprof.
      const ownMs = rec.cputimes.find((c) => c.name === name).ns / 1e6;
      assert.ok(Math.abs(entry.cpuMs - ownMs) <= 0.1 * ownMs,
                `${name}: profiler-cli cpu ${entry.cpuMs} ms, the thread's own clock ${ownMs} ms`);
      if (ownMs < DURATION_MS * 0.5) t.diagnostic(`${name} got ${ownMs} ms of CPU: a busy machine`);
      metrics.workers[name].cliSelfShare = selfShare(s, spin);
      metrics.workers[name].cliTotalShare = running;
    }
  });
});
