// Unwinding while other processes saturate every CPU: the recorder then gets a
// fraction of a CPU, reads its rings late and must still give complete, correctly ordered
// stacks, and a completeness figure that is the profile's own. Several recordings of the
// deep recursion and of a callback inside libc, each checked on its own.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { after, before, describe, it } from 'node:test';

import {
  ProfileView, pct, recordFixture, recorderUnavailableReason, requireRecorder,
} from './lib/harness.mjs';
import { printedCompleteness, profileStackQuality, storedCompleteness } from './lib/stack_quality.mjs';

const DURATION_MS = 1000;
const RECURSION_RUNS = 3;

// Two busy loops per CPU, at the recorder's own priority.
function startSpinners() {
  return Array.from({ length: 2 * availableParallelism() }, () =>
    spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' }));
}

// The fixture's own thread: the tid its cputime line names.
function fixtureThread(rec) {
  const view = new ProfileView(rec.profile);
  const tid = String(rec.cputimes[0].tid);
  const thread = view.threads.find((t) => String(t.tid) === tid);
  assert.ok(thread, `no thread ${tid} in the profile`);
  return { view, thread };
}

function checkHonestCompleteness(t, rec, label) {
  const stored = storedCompleteness(rec.profile);
  const printed = printedCompleteness(rec.result.stderr);
  const own = profileStackQuality(rec.profile).overall;
  const late = /(\d+) events arrived after the reorder window/.exec(rec.result.stderr)?.[1] ?? '0';
  t.diagnostic(`${label}: stored ${pct(stored)}, printed ${pct(printed)}, the profile's own ` +
               `${pct(own.rootShare)} of ${Math.round(own.user)}; ${late} late events`);
  assert.ok(Math.abs(stored - printed) < 0.001, `stored ${pct(stored)}, printed ${pct(printed)}`);
  // Complete means reaching a thread root: a stack cut short silently must not count.
  assert.ok(Math.abs(stored - own.rootShare) < 0.01,
            `stored ${pct(stored)}, the profile's own ${pct(own.rootShare)}`);
}

describe('the deep fixtures while every CPU is saturated', () => {
  let spinners = [];
  const recursion = [];
  let qsort;
  before(async () => {
    if (recorderUnavailableReason()) return;
    spinners = startSpinners();
    for (let i = 0; i < RECURSION_RUNS; ++i)
      recursion.push(await recordFixture('unwind_recursion', DURATION_MS, { label: `saturated_recursion_${i}` }));
    qsort = await recordFixture('unwind_qsort', DURATION_MS, { label: 'saturated_qsort' });
  });
  after(() => spinners.forEach((s) => s.kill('SIGKILL')));

  it('every recording: >= 99% of bottom_spin samples carry main and all 150 recurse frames', (t) => {
    if (!requireRecorder(t)) return;
    recursion.forEach((rec, i) => {
      const { view, thread } = fixtureThread(rec);
      let onCpu = 0;
      let total = 0;
      let full = 0;
      for (const s of view.samples(thread)) {
        const names = s.frames.map((f) => f.name);
        if (!names.includes('bottom_spin')) continue;
        total += s.weight;
        if (s.cpuDelta > 0) onCpu += 1;
        if (names.filter((n) => n === 'recurse').length === 150 && names.includes('main')) full += s.weight;
      }
      t.diagnostic(`run ${i}: ${onCpu} on-CPU samples in bottom_spin, ${pct(full / total)} of ` +
                   `${Math.round(total)} with all 150 frames (fixture CPU ${(rec.cputimes[0].ns / 1e6).toFixed(0)} ms)`);
      assert.ok(onCpu >= 20, `run ${i}: ${onCpu} on-CPU samples in bottom_spin`);
      assert.ok(full >= 0.99 * total, `run ${i}: ${pct(full / total)} with all 150 frames`);
      checkHonestCompleteness(t, rec, `run ${i}`);
    });
  });

  it('the qsort callback keeps its callers through libc', (t) => {
    if (!requireRecorder(t)) return;
    const { view, thread } = fixtureThread(qsort);
    let total = 0;
    let whole = 0;
    for (const s of view.samples(thread)) {
      const names = s.frames.map((f) => f.name);
      if (!names.includes('compare_cb')) continue;
      total += s.weight;
      if (['main', 'sort_all'].every((n) => names.includes(n)) && names.some((n) => /qsort|msort/.test(n)))
        whole += s.weight;
    }
    t.diagnostic(`unwind_qsort: ${pct(whole / total)} of ${Math.round(total)} compare_cb samples reach main`);
    assert.ok(total >= 20, `${total} compare_cb samples`);
    assert.ok(whole >= 0.99 * total, pct(whole / total));
    checkHonestCompleteness(t, qsort, 'qsort');
  });
});
