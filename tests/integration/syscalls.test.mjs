// syscalls: main -> do_syscalls, a loop of read /dev/zero, write /dev/null and getpid, made
// both through glibc's wrappers and with `syscall` inlined into do_syscalls (see
// tests/fixtures/syscalls.c). Most of its time is spent in the kernel.
//
// Checked on every sample with a Kernel frame: from the root, User frames, then Kernel
// frames down to the leaf, never a User frame below a Kernel one. Required: >= 30% of all
// samples have Kernel frames, and >= 30% of all samples have Kernel frames under User frames
// that include main > do_syscalls (the inlined path guarantees that much with any unwinder).
// Reported only: how often a kernel stack entered through a glibc wrapper (read, write,
// syscall) keeps do_syscalls as its caller; a frame-pointer unwinder loses it there, since
// glibc's wrappers keep no frame pointer.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import {
  ProfileView, checkCpuAgainstFixture, checkProfileStructure, checkWithProfilerCli,
  formatFrames, pct, recordFixture, recorderUnavailableReason, requireRecorder, saveMetrics,
  splitUserKernel,
} from './lib/harness.mjs';

const DURATION_MS = 1500;

function hasCaller(user, caller, callee) {
  for (let i = 1; i < user.length; i++)
    if (user[i].name === callee && user[i - 1].name === caller) return true;
  return false;
}

describe('syscalls', () => {
  let rec;
  let view;
  let thread;
  const metrics = { fixture: 'syscalls', durationMs: DURATION_MS };

  after(() => {
    if (rec) saveMetrics('syscalls', metrics);
  });

  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordFixture('syscalls', DURATION_MS);
    view = new ProfileView(rec.profile);
    thread = view.threads.find((th) => String(th.tid) === String(rec.cputimes[0].tid));
  });

  it('writes a well-formed profile', (t) => {
    if (!requireRecorder(t)) return;
    for (const w of checkProfileStructure(view)) t.diagnostic(`note: ${w}`);
    assert.ok(thread, 'no thread with the fixture tid');
    assert.equal(thread.name, 'syscalls');
  });

  it('kernel frames sit below user frames that include do_syscalls', (t) => {
    if (!requireRecorder(t)) return;
    let total = 0;
    let withKernel = 0;
    let disordered = 0;
    let underDoSyscalls = 0;
    let viaLibc = 0;
    let viaLibcWithCaller = 0;
    const disorderedExamples = [];
    for (const s of view.samples(thread)) {
      total += s.weight;
      const split = splitUserKernel(s.frames);
      if (split.kernel === 0) continue;
      withKernel += s.weight;
      if (!split.ordered) {
        disordered += s.weight;
        if (disorderedExamples.length < 3) disorderedExamples.push(formatFrames(s.frames));
        continue;
      }
      if (hasCaller(split.user, 'main', 'do_syscalls')) underDoSyscalls += s.weight;
      const leaf = split.user[split.user.length - 1]?.name ?? '';
      if (/^(__GI_)?(__libc_)?(read|write|syscall)(@|$)/.test(leaf) || /libc_(read|write)/.test(leaf)) {
        viaLibc += s.weight;
        if (split.user.some((f) => f.name === 'do_syscalls')) viaLibcWithCaller += s.weight;
      }
    }
    Object.assign(metrics, {
      samples: total, kernelShare: withKernel / total, disordered,
      kernelUnderDoSyscallsShare: underDoSyscalls / total,
      kernelViaLibcSamples: viaLibc,
      kernelViaLibcKeepingDoSyscalls: viaLibc ? viaLibcWithCaller / viaLibc : null,
    });
    t.diagnostic(`syscalls: ${total} samples, ${pct(withKernel / total)} with Kernel frames, ` +
                 `${pct(underDoSyscalls / total)} with Kernel frames under main > do_syscalls, ${disordered} disordered`);
    t.diagnostic(`syscalls: ${viaLibc} kernel samples entered through a glibc wrapper; ` +
                 `${viaLibc ? pct(viaLibcWithCaller / viaLibc) : '-'} of them keep do_syscalls as the caller`);
    for (const [stack, n] of view.topStacks(thread, (f) => splitUserKernel(f).kernel > 0, 4))
      t.diagnostic(`syscalls: kernel stack x${n}: ${stack}`);
    for (const [stack, n] of view.topStacks(thread, (f) => splitUserKernel(f).kernel === 0, 3))
      t.diagnostic(`syscalls: user-only stack x${n}: ${stack}`);

    assert.equal(disordered, 0, `User frames below Kernel frames, e.g.:\n  ${disorderedExamples.join('\n  ')}`);
    assert.ok(withKernel / total >= 0.3, `only ${pct(withKernel / total)} of samples have Kernel frames`);
    assert.ok(underDoSyscalls / total >= 0.3,
              `only ${pct(underDoSyscalls / total)} of samples have Kernel frames under main > do_syscalls`);
  });

  it("threadCPUDelta adds up to the thread's own CPU clock (within 10%)", (t) => {
    if (!requireRecorder(t)) return;
    metrics.cpu = checkCpuAgainstFixture(t, view, rec.cputimes);
  });

  it('profiler-cli loads it and attributes a large share to the Kernel category', async (t) => {
    if (!requireRecorder(t)) return;
    const { list, samplesByHandle } = await checkWithProfilerCli(t, rec.file, view);
    const entry = list.find((x) => String(x.tid) === String(thread.tid));
    assert.ok(entry);
    const s = samplesByHandle.get(entry.threadHandle);
    const kernel = s.categoryBreakdown.categories.find((c) => c.name === 'Kernel');
    metrics.cliKernelLeafShare = (kernel?.percentage ?? 0) / 100;
    t.diagnostic(`profiler-cli: Kernel category (leaf frames) ${kernel?.percentage?.toFixed(1) ?? 0}% of samples`);
    assert.ok(kernel && kernel.percentage >= 30, `Kernel category ${kernel?.percentage ?? 0}%`);
  });
});
