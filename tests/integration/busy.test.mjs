// busy: main -> outer -> inner_spin, one thread spinning in user mode.
//
// Stack rule: a sample counts when its stack, read root first through the prefix chain, has
// main, then outer, then inner_spin as consecutive User frames, with nothing below
// inner_spin but Kernel frames (an interrupt or page fault taken while spinning). Anything
// may sit above main (_start, __libc_start_main, __libc_start_call_main, or nothing when the
// frame-pointer walk stops at glibc's frames). At least 90% of the main thread's samples
// must count.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import {
  ProfileView, checkCpuAgainstFixture, checkProfileStructure, checkWithProfilerCli,
  hasUserChainAtLeaf, hottestSelf, kernelUnderLeaf, pct, recordFixture, recorderUnavailableReason,
  requireRecorder, saveMetrics, selfShare, totalShare, waitingForCpuShare,
} from './lib/harness.mjs';

const DURATION_MS = 1500;
const CHAIN = ['main', 'outer', 'inner_spin'];

describe('busy', () => {
  let rec;
  let view;
  const metrics = { fixture: 'busy', durationMs: DURATION_MS };

  after(() => {
    if (rec) saveMetrics('busy', metrics);
  });

  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordFixture('busy', DURATION_MS);
    view = new ProfileView(rec.profile);
  });

  it('writes a well-formed profile', (t) => {
    if (!requireRecorder(t)) return;
    for (const w of checkProfileStructure(view)) t.diagnostic(`note: ${w}`);
  });

  it('>= 90% of the main thread samples are main > outer > inner_spin', (t) => {
    if (!requireRecorder(t)) return;
    const pid = rec.cputimes[0].tid;
    const main = view.threads.find((th) => String(th.tid) === String(pid));
    assert.ok(main, `no thread with tid ${pid}; threads: ${view.threads.map((th) => `${th.pid}/${th.tid} ${th.name}`).join(', ')}`);
    assert.equal(main.name, 'busy');
    assert.equal(main.processName, 'busy');
    assert.equal(main.isMainThread, true);
    assert.equal(String(main.pid), String(pid));

    const r = view.share(main, (f) => hasUserChainAtLeaf(f, CHAIN));
    const zero = (main.samples.threadCPUDelta ?? []).slice(1).filter((d) => d === 0).length;
    Object.assign(metrics, {
      samples: r.total, expectedStackShare: r.share,
      zeroCpuDeltaShare: zero / Math.max(1, main.samples.length - 1),
    });
    t.diagnostic(`busy: ${r.total} samples, ${r.hit} (${pct(r.share)}) with main > outer > inner_spin`);
    t.diagnostic(`busy: ${pct(metrics.zeroCpuDeltaShare)} of samples after the first have threadCPUDelta 0`);
    const others = view.topStacks(main, (f) => !hasUserChainAtLeaf(f, CHAIN));
    for (const [stack, n] of others) t.diagnostic(`busy: other stack x${n}: ${stack}`);
    assert.ok(r.total >= DURATION_MS * 0.5, `only ${r.total} samples in ${DURATION_MS} ms at 1000 Hz`);
    assert.ok(r.share >= 0.9, `only ${pct(r.share)} of samples have main > outer > inner_spin; most common others:\n` +
              others.map(([s, n]) => `  x${n} ${s}`).join('\n'));
    const kernel = kernelUnderLeaf(view, main, 'inner_spin');
    metrics.kernelUnderLeafShare = kernel.share;
    t.diagnostic(`busy: ${pct(kernel.share)} of samples in the kernel under inner_spin`);
    assert.deepEqual(kernel.stray, [], 'kernel frames under inner_spin without an interrupt entry');
  });

  it("threadCPUDelta adds up to the thread's own CPU clock (within 10%)", (t) => {
    if (!requireRecorder(t)) return;
    metrics.cpu = checkCpuAgainstFixture(t, view, rec.cputimes);
  });

  it('profiler-cli loads it and finds inner_spin hot', async (t) => {
    if (!requireRecorder(t)) return;
    const { list, samplesByHandle } = await checkWithProfilerCli(t, rec.file, view);
    const busy = list.filter((x) => x.name === 'busy');
    assert.equal(busy.length, 1, `threads: ${list.map((x) => x.name).join(', ')}`);
    const s = samplesByHandle.get(busy[0].threadHandle);
    const running = 1 - waitingForCpuShare(s);
    // With the interrupts it took (kernelUnderLeaf): how many depends on the host.
    const share = totalShare(s, 'inner_spin') / running;
    metrics.cliInnerSpinSelf = selfShare(s, 'inner_spin');
    metrics.cliInnerSpinTotal = share;
    assert.equal(hottestSelf(s), 'inner_spin');
    assert.ok(share >= 0.9, `inner_spin total ${pct(share)} of the time it ran`);
    // Of the time it ran: time preempted (Waiting for CPU) grows with the machine's load.
    const category = (name) =>
      s.categoryBreakdown.categories.find((c) => c.name === name)?.percentage ?? 0;
    // And of that, outside the kernel (interrupts: see above).
    const outsideKernel = 100 * running - category('Kernel');
    const user = outsideKernel > 0 ? (100 * category('User')) / outsideKernel : 0;
    assert.ok(user >= 90, `User category ${user.toFixed(1)}% of the time it ran outside the kernel`);
  });
});
