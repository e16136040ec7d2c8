// record -a: two unrelated busy fixtures, started after the recording began and ended
// before it ends, are both present as their own processes with their CPU time; kernel
// threads appear with kernel frames only.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';

import {
  BPFPROF, FREQUENCY_HZ, RESULTS_DIR, checkCpuAgainstFixture, checkProfileStructure, checkWithProfilerCli,
  fixturePath, hasUserChainAtLeaf, parseCputimeLines, pct, readProfile, recorderUnavailableReason,
  requireRecorder, run, saveMetrics, startBackground, untilSampling, ProfileView,
} from './lib/harness.mjs';
import { join } from 'node:path';
import { rmSync } from 'node:fs';

const RECORD_SECONDS = 3;
const FIXTURE_MS = 1200;

describe('system-wide (-a)', () => {
  let file;
  let view;
  let recording;
  const fixtures = [];

  before(async () => {
    if (recorderUnavailableReason()) return;
    file = join(RESULTS_DIR, 'system_wide.json.gz');
    rmSync(file, { force: true });
    const recorder = startBackground(BPFPROF, ['record', '-v', '-a', '-d', String(RECORD_SECONDS),
                                               '-F', String(FREQUENCY_HZ), '-o', file]);
    await untilSampling(recorder);  // the fixtures' whole lives are inside the recording
    const a = startBackground(fixturePath('busy'), [String(FIXTURE_MS)]);
    const b = startBackground(fixturePath('busy'), [String(FIXTURE_MS)]);
    // Kernel threads at work: writeback of a file synced to disk.
    const io = startBackground('sh', ['-c', `dd if=/dev/zero of=${RESULTS_DIR}/sw-io bs=1M count=32 conv=fsync 2>/dev/null; rm -f ${RESULTS_DIR}/sw-io`]);
    for (const f of [a, b]) {
      const exit = await f.done;
      assert.equal(exit.code, 0, exit.stderr);
      fixtures.push({ pid: f.pid, cputimes: parseCputimeLines(exit.stdout) });
    }
    await io.done;
    recording = await recorder.done;
    assert.equal(recording.code, 0, recording.stderr);
    view = new ProfileView(readProfile(file));
  });

  it('writes a well-formed profile and reports start-up and losses', (t) => {
    if (!requireRecorder(t)) return;
    for (const w of checkProfileStructure(view)) t.diagnostic(`note: ${w}`);
    t.diagnostic(recording.stderr.trim());
    assert.match(recording.stderr, /start-up: sampling after \d+ ms/);
    assert.match(recording.stderr, /(\d+) events lost/);
  });

  it('has both busy fixtures as separate processes with their own call trees', (t) => {
    if (!requireRecorder(t)) return;
    const metrics = {};
    for (const f of fixtures) {
      const threads = view.threads.filter((x) => String(x.pid) === String(f.pid));
      assert.equal(threads.length, 1, `pid ${f.pid}: ${threads.map((x) => x.name).join(', ')}`);
      assert.equal(threads[0].processName, 'busy');
      assert.equal(threads[0].isMainThread, true);
      const r = view.share(threads[0], (fr) => hasUserChainAtLeaf(fr, ['main', 'outer', 'inner_spin']));
      t.diagnostic(`busy pid ${f.pid}: ${r.total} samples, ${pct(r.share)} main > outer > inner_spin`);
      metrics[f.pid] = r;
      assert.ok(r.share >= 0.9, `pid ${f.pid}: ${pct(r.share)}`);
    }
    saveMetrics('system_wide', { busy: metrics, stderr: recording.stderr });
  });

  it("each busy fixture's CPU time matches its own clock within 10%", (t) => {
    if (!requireRecorder(t)) return;
    for (const f of fixtures) assert.equal(checkCpuAgainstFixture(t, view, f.cputimes).length, 1);
  });

  it('kernel threads are present, with kernel frames only', (t) => {
    if (!requireRecorder(t)) return;
    // Kernel threads have no executable: their process name is their comm, and no frame
    // of theirs is a user frame.
    const kernelThreads = view.threads.filter((x) =>
      /^(kworker|ksoftirqd|kswapd|rcu_|migration|kcompactd|jbd2|khugepaged|kdamond|writeback|irq\/|flush-)/.test(x.name));
    t.diagnostic(`kernel threads: ${kernelThreads.map((x) => x.name).join(', ')}`);
    assert.ok(kernelThreads.length >= 1, `no kernel thread among ${view.threads.map((x) => x.name).join(', ')}`);
    for (const th of kernelThreads) {
      const user = view.share(th, (fr) => fr.some((x) => x.category !== 'Kernel'));
      const any = view.share(th, (fr) => fr.length > 0);
      assert.equal(user.hit, 0, `${th.name}: ${user.hit} samples with non-kernel frames`);
      assert.equal(any.hit, any.total, `${th.name}: samples without frames`);
    }
  });

  it('profiler-cli loads it', async (t) => {
    if (!requireRecorder(t)) return;
    const { info } = await checkWithProfilerCli(t, file, view);
    assert.ok(info.processCount >= 3, `processCount ${info.processCount}`);
  });
});
