// Complete user stacks without frame pointers: fixtures built -O2 -fomit-frame-pointer
// (tests/fixtures/unwind_*.c), recorded with the default --call-graph dwarf.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';

import {
  ProfileView, checkWithProfilerCli, pct, recordFixture, recorderUnavailableReason, requireRecorder, saveMetrics,
} from './lib/harness.mjs';

const DURATION_MS = 1500;
const metrics = {};

// The process's busiest thread (the fixtures are single-threaded).
function mainThread(view) {
  return [...view.threads].sort((a, b) => b.samples.length - a.samples.length)[0];
}

function names(frames) {
  return frames.map((f) => f.name);
}

// Share (by weight) of the samples with `leaf` in the stack whose stacks satisfy pred.
function shareAmong(view, thread, leaf, pred) {
  let total = 0;
  let hit = 0;
  for (const s of view.samples(thread)) {
    if (!s.frames.some((f) => f.name === leaf)) continue;
    total += s.weight;
    if (pred(s.frames)) hit += s.weight;
  }
  return { total, hit, share: total ? hit / total : 0 };
}

// The profile's own completeness figure (meta.extra) and bpfprof's line on stderr.
function completeness(rec) {
  const section = (rec.profile.meta.extra ?? []).find((x) => x.label === 'bpfprof');
  const entry = section?.entries.find((e) => e.label === 'User stacks complete');
  const line = /user stacks complete: ([\d.]+)%/.exec(rec.result.stderr);
  return { meta: entry?.value, stderr: line ? Number(line[1]) / 100 : undefined };
}

function record(fixture) {
  return async () => {
    if (recorderUnavailableReason()) return null;
    const rec = await recordFixture(fixture, DURATION_MS, { label: `unwind_${fixture}` });
    rec.view = new ProfileView(rec.profile);
    return rec;
  };
}

function checksCompletenessAndLoads(getRec, name) {
  it('stores the completeness figure in meta.extra, as printed', (t) => {
    if (!requireRecorder(t)) return;
    const c = completeness(getRec());
    t.diagnostic(`${name}: user stacks complete ${pct(c.meta ?? 0)} (stderr ${pct(c.stderr ?? 0)})`);
    metrics[name] = { ...(metrics[name] ?? {}), complete: c.meta };
    assert.equal(typeof c.meta, 'number');
    assert.ok(Math.abs(c.meta - c.stderr) < 0.001);
    // ... and they are the share of on-CPU samples whose stack does not begin with [truncated].
    const view = getRec().view;
    let total = 0;
    let complete = 0;
    for (const th of view.threads) {
      for (const s of view.samples(th)) {
        const user = s.frames.filter((f) => f.category === 'User' || f.name === '[truncated]');
        if (!user.length || /^\[(sleeping|I\/O wait|waiting for CPU)\]$/.test(s.frames.at(-1)?.name)) continue;
        total += s.weight;
        if (s.frames[0].name !== '[truncated]') complete += s.weight;
      }
    }
    t.diagnostic(`${name}: the profile's own share ${pct(complete / total)} of ${total}`);
    assert.ok(Math.abs(c.meta - complete / total) < 0.02, `stored ${pct(c.meta)}, profile ${pct(complete / total)}`);
  });
  it('profiler-cli loads it', async (t) => {
    if (!requireRecorder(t)) return;
    await checkWithProfilerCli(t, getRec().file, getRec().view);
  });
}

describe('a callback called from inside libc (unwind_qsort)', () => {
  let rec;
  before(async () => { rec = await record('unwind_qsort')(); });
  it('>= 99% of compare_cb samples read main > sort_all > qsort ... > compare_cb from _start', (t) => {
    if (!requireRecorder(t)) return;
    const r = shareAmong(rec.view, mainThread(rec.view), 'compare_cb', (f) => {
      const n = names(f);
      const main = n.indexOf('main');
      return n[0] === '_start' && main > 0 && n[main + 1] === 'sort_all' && /qsort/.test(n[main + 2] ?? '') &&
        n.lastIndexOf('compare_cb') > main + 2;
    });
    t.diagnostic(`unwind_qsort: ${r.total} compare_cb samples, ${pct(r.share)} complete`);
    metrics.qsort = { ...(metrics.qsort ?? {}), compareCbShare: r.share };
    assert.ok(r.total > 100 && r.share >= 0.99, `${pct(r.share)} of ${r.total} bottom_spin samples`);
  });
  checksCompletenessAndLoads(() => rec, 'qsort');
});

describe('recursion 150 frames deep (unwind_recursion)', () => {
  let rec;
  before(async () => { rec = await record('unwind_recursion')(); });
  it('>= 99% of bottom_spin samples carry all 150 recurse frames and main', (t) => {
    if (!requireRecorder(t)) return;
    const r = shareAmong(rec.view, mainThread(rec.view), 'bottom_spin', (f) =>
      names(f).filter((x) => x === 'recurse').length === 150 && names(f).includes('main'));
    t.diagnostic(`unwind_recursion: ${r.total} bottom_spin samples, ${pct(r.share)} with 150 recurse frames`);
    metrics.recursion = { ...(metrics.recursion ?? {}), fullDepthShare: r.share };
    assert.ok(r.total > 100 && r.share >= 0.99, `${pct(r.share)} of ${r.total} bottom_spin samples`);
  });
  checksCompletenessAndLoads(() => rec, 'recursion');
});

describe('a spin inside a signal handler (unwind_signal)', () => {
  let rec;
  before(async () => { rec = await record('unwind_signal')(); });
  it('handler_spin samples continue through the signal frame into interrupted_loop and main', (t) => {
    if (!requireRecorder(t)) return;
    const r = shareAmong(rec.view, mainThread(rec.view), 'handler_spin', (f) => {
      const n = names(f);
      const h = n.indexOf('handler_spin');
      return h >= 3 && n[h - 1] === '__restore_rt' && n[h - 2] === 'interrupted_loop' && n[h - 3] === 'main';
    });
    t.diagnostic(`unwind_signal: ${r.total} handler_spin samples, ${pct(r.share)} main > interrupted_loop > __restore_rt > handler_spin`);
    metrics.signal = { share: r.share };
    assert.ok(r.total > 100 && r.share >= 0.95, pct(r.share));
  });
  checksCompletenessAndLoads(() => rec, 'signal');
});

describe('a call through the PLT into a shared library (unwind_plt)', () => {
  let rec;
  before(async () => { rec = await record('unwind_plt')(); });
  it('>= 99% of lib_spin samples read main > call_into_lib > lib_spin', (t) => {
    if (!requireRecorder(t)) return;
    const r = shareAmong(rec.view, mainThread(rec.view), 'lib_spin', (f) => {
      const n = names(f);
      const l = n.lastIndexOf('lib_spin');
      return n[0] === '_start' && n[l - 1] === 'call_into_lib' && n[l - 2] === 'main';
    });
    t.diagnostic(`unwind_plt: ${r.total} lib_spin samples, ${pct(r.share)} main > call_into_lib > lib_spin`);
    metrics.plt = { share: r.share };
    assert.ok(r.total > 100 && r.share >= 0.99, `${pct(r.share)} of ${r.total} bottom_spin samples`);
  });
  checksCompletenessAndLoads(() => rec, 'plt');
});

describe('a thread whose stack mapping ends a few KiB above sp (stack_edge)', () => {
  let rec;
  before(async () => { rec = await record('stack_edge')(); });
  it('>= 99% of edge_spin samples read clone3 > start_thread > edge_thread_main > edge_outer > edge_spin', (t) => {
    if (!requireRecorder(t)) return;
    const th = rec.view.threads.find((x) => x.name === 'edge-worker');
    assert.ok(th, 'edge-worker thread');
    const r = shareAmong(rec.view, th, 'edge_spin', (f) => {
      const n = names(f);
      return /^(__)?clone3?$/.test(n[0]) && n[1] === 'start_thread' && n[2] === 'edge_thread_main' &&
        n[3] === 'edge_outer' && n[4] === 'edge_spin';
    });
    t.diagnostic(`stack_edge: ${r.total} edge_spin samples, ${pct(r.share)} complete`);
    metrics.stackEdge = { share: r.share };
    assert.ok(r.total > 100 && r.share >= 0.99, `${pct(r.share)} of ${r.total} bottom_spin samples`);
  });
  checksCompletenessAndLoads(() => rec, 'stack_edge');
});

describe("a thread's stacks end at start_thread/clone3 (threads)", () => {
  let rec;
  before(async () => { rec = await record('threads')(); });
  it('>= 99% of the workers\' samples have clone3 or clone, then start_thread, at the root', (t) => {
    if (!requireRecorder(t)) return;
    for (const name of ['worker-alpha', 'worker-beta']) {
      const th = rec.view.threads.find((x) => x.name === name);
      assert.ok(th, name);
      const r = rec.view.share(th, (f) => /^(__)?clone3?$/.test(f[0]?.name ?? '') && f[1]?.name === 'start_thread');
      t.diagnostic(`${name}: ${pct(r.share)} rooted at clone3 > start_thread`);
      metrics[name] = { rootedShare: r.share };
      assert.ok(r.share >= 0.99, `${name}: ${pct(r.share)}`);
    }
    saveMetrics('unwind', metrics);
  });
});
