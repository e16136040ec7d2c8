// forkexec: the parent (main -> parent_spin) forks a child that execs busy
// (main -> outer -> inner_spin). Two processes, one timeline.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import {
  ProfileView, checkCpuAgainstFixture, checkProfileStructure, checkWithProfilerCli,
  hasUserChainAtLeaf, hottestSelf, pct, recordFixture, recorderUnavailableReason,
  requireRecorder, saveMetrics,
} from './lib/harness.mjs';

const DURATION_MS = 1500;

describe('forkexec', () => {
  let rec;
  let view;
  let parent;
  let child;
  const metrics = { fixture: 'forkexec', durationMs: DURATION_MS };

  after(() => {
    if (rec) saveMetrics('forkexec', metrics);
  });

  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordFixture('forkexec', DURATION_MS);
    view = new ProfileView(rec.profile);
    const tidOf = (name) => String(rec.cputimes.find((c) => c.name === name)?.tid);
    parent = view.threads.filter((th) => String(th.tid) === tidOf('forkexec'));
    child = view.threads.filter((th) => String(th.tid) === tidOf('busy'));
  });

  it('writes a well-formed profile', (t) => {
    if (!requireRecorder(t)) return;
    for (const w of checkProfileStructure(view)) t.diagnostic(`note: ${w}`);
  });

  it('has two processes: forkexec and the exec-ed busy, with different pids', (t) => {
    if (!requireRecorder(t)) return;
    const describeThreads = view.threads.map((th) => `${th.pid}/${th.tid} ${th.name} (${th.processName})`).join(', ');
    t.diagnostic(`forkexec: threads ${describeThreads}`);
    assert.equal(parent.length, 1, `the parent's thread: ${describeThreads}`);
    assert.ok(child.length >= 1, `the child's thread: ${describeThreads}`);
    const p = parent[0];
    const c = child[child.length - 1];
    assert.notEqual(String(p.pid), String(c.pid));
    assert.equal(p.processName, 'forkexec');
    assert.equal(p.name, 'forkexec');
    assert.equal(p.isMainThread, true);
    assert.equal(c.processName, 'busy');
    assert.equal(c.name, 'busy');
    assert.equal(c.isMainThread, true);
    // An exec starts a new process entry for the same pid: the child's moment between fork
    // and exec (if sampled) is its own entry "PID.1"; the OS pids are still just two.
    const osPid = (pid) => String(pid).split('.')[0];
    assert.equal(new Set(view.threads.map((th) => osPid(th.pid))).size, 2, `processes: ${describeThreads}`);
    assert.equal(String(c.pid), osPid(c.pid), 'the exec-ed image keeps the plain pid');
    for (const th of view.threads.filter((x) => osPid(x.pid) === String(c.pid) && x !== c)) {
      assert.equal(th.pid, `${c.pid}.1`, `the pre-exec entry: ${describeThreads}`);
      assert.equal(th.processName, 'forkexec', 'before its exec the child runs the parent image');
    }
  });

  it("the parent spins in parent_spin, the child in busy's inner_spin", (t) => {
    if (!requireRecorder(t)) return;
    const failures = [];
    const p = view.share(parent[0], (f) => hasUserChainAtLeaf(f, ['main', 'parent_spin']));
    const c = child.map((th) => view.share(th, (f) => hasUserChainAtLeaf(f, ['main', 'outer', 'inner_spin'])))
      .reduce((a, b) => ({ total: a.total + b.total, hit: a.hit + b.hit }), { total: 0, hit: 0 });
    c.share = c.total ? c.hit / c.total : 0;
    const crossed = child.map((th) => view.share(th, (f) => f.some((x) => x.name === 'parent_spin')).hit)
      .reduce((a, b) => a + b, 0);
    Object.assign(metrics, {
      parentSamples: p.total, parentExpectedStackShare: p.share,
      childSamples: c.total, childExpectedStackShare: c.share, childSamplesWithParentSpin: crossed,
    });
    t.diagnostic(`forkexec parent: ${p.total} samples, ${pct(p.share)} main > parent_spin`);
    t.diagnostic(`forkexec child (busy): ${c.total} samples, ${pct(c.share)} main > outer > inner_spin, ${crossed} with parent_spin`);
    for (const [stack, n] of view.topStacks(parent[0], (f) => !hasUserChainAtLeaf(f, ['main', 'parent_spin']), 3))
      t.diagnostic(`parent: other stack x${n}: ${stack}`);
    for (const th of child)
      for (const [stack, n] of view.topStacks(th, (f) => !hasUserChainAtLeaf(f, ['main', 'outer', 'inner_spin']), 3))
        t.diagnostic(`child: other stack x${n}: ${stack}`);
    if (p.share < 0.9) failures.push(`parent: only ${pct(p.share)} main > parent_spin`);
    if (c.share < 0.9) failures.push(`child: only ${pct(c.share)} main > outer > inner_spin`);
    if (crossed > 2) failures.push(`child: ${crossed} samples symbolized with the parent's parent_spin`);
    assert.deepEqual(failures, []);
  });

  it("threadCPUDelta adds up to each thread's own CPU clock (within 10%)", (t) => {
    if (!requireRecorder(t)) return;
    metrics.cpu = checkCpuAgainstFixture(t, view, rec.cputimes);
    assert.equal(metrics.cpu.length, 2, 'parent and child should be compared');
  });

  it('profiler-cli shows both processes with their hot functions', async (t) => {
    if (!requireRecorder(t)) return;
    const { info, list, samplesByHandle } = await checkWithProfilerCli(t, rec.file, view);
    // Two OS processes; the child's pre-exec moment, when sampled, is a third entry.
    assert.ok(info.processCount === 2 || info.processCount === 3, `processCount ${info.processCount}`);
    const names = [...new Set(info.processes.map((p) => p.name))].sort();
    assert.deepEqual(names, ['busy', 'forkexec']);
    const hot = (processName) => {
      const entries = list.filter((x) => x.processName === processName);
      assert.ok(entries.length >= 1, `no thread of process ${processName}`);
      const busiest = entries.sort((a, b) => b.cpuMs - a.cpuMs)[0];
      return hottestSelf(samplesByHandle.get(busiest.threadHandle));
    };
    assert.equal(hot('forkexec'), 'parent_spin');
    assert.equal(hot('busy'), 'inner_spin');
  });
});
