// What the off-CPU tests (offcpu.test.mjs, offcpu_contention.test.mjs) share: the fixtures'
// durations, their output lines, predicates over off-CPU stacks, and the checks every
// recording with off-CPU samples passes.
import assert from 'node:assert/strict';

import { it } from 'node:test';

import { formatFrames, lastIndexOfName, parseCputimeLines, pct, requireRecorder } from './harness.mjs';

export const SLEEPY_MS = 2000;
export const PIPE_WAIT_MS = 1000;   // pipe_block's main writes to the pipe after that long
export const PINNED_MS = 1500;

// The leaf pseudo-frames of off-CPU samples and the category each must have.
export const PSEUDO = { '[sleeping]': 'Idle', '[I/O wait]': 'Idle', '[waiting for CPU]': 'Waiting for CPU' };

// /proc's utime and stime are whole clock ticks (USER_HZ, 100 on Linux), each rounded down
// by the kernel, so the stat line may be up to two ticks below the real CPU time.
const STAT_TICK_NS = 10e6;

// ---------------------------------------------------------------------------------------
// Fixture output and stack predicates

// `stat tid=<tid> name=<comm> utime_stime_ns=<ns> life_ns=<ns>` lines (fixture_common.h).
function parseStatLines(stdout) {
  const lines = [];
  for (const m of stdout.matchAll(/^stat tid=(\d+) name=(.*) utime_stime_ns=(\d+) life_ns=(\d+)$/gm))
    lines.push({ tid: Number(m[1]), name: m[2], statNs: Number(m[3]), lifeNs: Number(m[4]) });
  return lines;
}

// One entry per fixture thread: { tid, name, cpuNs (its CPU clock), statNs, lifeNs }.
export function fixtureThreads(stdout) {
  const stats = parseStatLines(stdout);
  const threads = parseCputimeLines(stdout).map((c) => {
    const s = stats.find((x) => x.tid === c.tid);
    assert.ok(s, `the fixture printed no stat line for tid ${c.tid} (${c.name}):\n${stdout}`);
    return { tid: c.tid, name: c.name, cpuNs: c.ns, statNs: s.statNs, lifeNs: s.lifeNs };
  });
  assert.ok(threads.length > 0, `no cputime lines:\n${stdout}`);
  return threads;
}

export function leafIs(frames, pseudo) {
  const leaf = frames[frames.length - 1];
  return !!leaf && leaf.name === pseudo && leaf.category === PSEUDO[pseudo];
}

export function isPseudo(frame) {
  return Object.hasOwn(PSEUDO, frame.name);
}

// An off-CPU stack blocked in `fn`: fn is a User frame, below it only Kernel frames (at least
// one), then the pseudo-frame `pseudo` (with its category) as the leaf.
export function blockedIn(frames, fn, pseudo) {
  if (!leafIs(frames, pseudo)) return false;
  const i = lastIndexOfName(frames, fn);
  if (i < 0 || frames[i].category !== 'User') return false;
  // Functions inlined into fn (inline depth > 0, e.g. fixture_syscall3) may come first.
  let k = i + 1;
  while (k < frames.length - 1 && frames[k].category === 'User' && frames[k].inlineDepth > 0) k++;
  const kernel = frames.slice(k, -1);
  return kernel.length > 0 && kernel.every((f) => f.category === 'Kernel');
}

export function contains(frames, fn) {
  return frames.some((f) => f.name === fn);
}

export function kernelHas(frames, re) {
  return frames.some((f) => f.category === 'Kernel' && re.test(f.name));
}

export function threadByTid(view, tid, what) {
  const found = view.threads.filter((th) => String(th.tid) === String(tid));
  assert.equal(found.length, 1, `want one thread with tid ${tid} (${what}); threads: ` +
               view.threads.map((x) => `${x.pid}/${x.tid} ${x.name}`).join(', '));
  return found[0];
}

function totalWeight(view, thread) {
  return view.share(thread, () => true).total;
}

export function ms(ns) {
  return (ns / 1e6).toFixed(1);
}

// ---------------------------------------------------------------------------------------
// Checks shared by every recording with off-CPU samples

// weight is an array, weightType 'samples', every weight finite and >= 0, some > 1.
export function checkWeights(view) {
  const problems = [];
  for (const th of view.threads) {
    const s = th.samples;
    if (s.weightType !== undefined && s.weightType !== 'samples')
      problems.push(`${th.tid} ${th.name}: weightType ${s.weightType}`);
    if (s.weight === null || s.weight === undefined) continue;
    if (!s.weight.every((w) => Number.isFinite(w) && w >= 0))
      problems.push(`${th.tid} ${th.name}: a weight is negative or not a number`);
  }
  assert.deepEqual(problems, []);
}

// For every fixture thread living >= 1 s: sum(threadCPUDelta) within 2% + one interval of
// utime+stime (plus the stat line's two-tick rounding, upwards only) and within 2% of its
// CPU clock (threads with >= 50 ms of CPU; below that the stat check's 1 ms bounds it).
// With { idleMayBeAbsent: true } (--no-off-cpu, where a thread gets samples only while it
// runs), a thread missing from the profile counts as 0 ms: the same bounds then say whether
// it ran too long to go unsampled.
export function checkCpuAccounting(t, view, threads, out, { idleMayBeAbsent = false } = {}) {
  const intervalNs = view.profile.meta.interval * 1e6;
  const failures = [];
  out.cpu = [];
  for (const f of threads) {
    if (f.lifeNs < 1e9) continue;
    const present = view.threads.some((x) => String(x.tid) === String(f.tid));
    const th = present || !idleMayBeAbsent ? threadByTid(view, f.tid, f.name) : null;
    const profileNs = th ? view.cpuNs(th) : 0;
    if (!th) t.diagnostic(`cpu ${f.name} (${f.tid}): no sample, so not in the profile`);
    const diffStat = profileNs - f.statNs;
    const tolStat = 0.02 * f.statNs + intervalNs;
    const ratioClock = f.cpuNs ? profileNs / f.cpuNs : NaN;
    out.cpu.push({ tid: f.tid, name: f.name, profileMs: profileNs / 1e6, statMs: f.statNs / 1e6,
                   cputimeMs: f.cpuNs / 1e6, ratioToCputime: ratioClock });
    t.diagnostic(`cpu ${f.name} (${f.tid}): profile ${ms(profileNs)} ms, stat ${ms(f.statNs)} ms, ` +
                 `cputime ${ms(f.cpuNs)} ms (profile/cputime ${pct(ratioClock)}), life ${ms(f.lifeNs)} ms`);
    if (diffStat < -tolStat || diffStat > tolStat + 2 * STAT_TICK_NS)
      failures.push(`${f.name} (${f.tid}): profile ${ms(profileNs)} ms vs utime+stime ${ms(f.statNs)} ms ` +
                    `(allowed -${ms(tolStat)} .. +${ms(tolStat + 2 * STAT_TICK_NS)} ms)`);
    if (f.cpuNs >= 50e6 && Math.abs(ratioClock - 1) > 0.02)
      failures.push(`${f.name} (${f.tid}): profile ${ms(profileNs)} ms vs CPU clock ${ms(f.cpuNs)} ms ` +
                    `(${pct(ratioClock)}, allowed 98%-102%)`);
  }
  assert.ok(out.cpu.length > 0, 'no fixture thread lived >= 1 s');
  assert.deepEqual(failures, [], `CPU accounting:\n  ${failures.join('\n  ')}`);
}

// On + off: each fixture thread's total weight x meta.interval within 5% of its lifetime.
export function checkCoverage(t, view, threads, out) {
  const interval = view.profile.meta.interval;
  const failures = [];
  out.coverage = [];
  for (const f of threads) {
    const th = threadByTid(view, f.tid, f.name);
    const weightMs = totalWeight(view, th) * interval;
    const ratio = weightMs / (f.lifeNs / 1e6);
    out.coverage.push({ tid: f.tid, name: f.name, weightMs, lifeMs: f.lifeNs / 1e6, ratio });
    t.diagnostic(`coverage ${f.name} (${f.tid}): weight x interval ${weightMs.toFixed(1)} ms, ` +
                 `life ${ms(f.lifeNs)} ms (${pct(ratio)}), ${th.samples.length} samples`);
    if (Math.abs(ratio - 1) > 0.05)
      failures.push(`${f.name} (${f.tid}): weight x interval ${weightMs.toFixed(1)} ms vs life ` +
                    `${ms(f.lifeNs)} ms (${pct(ratio)}, allowed 95%-105%)`);
  }
  assert.deepEqual(failures, [], `on+off coverage:\n  ${failures.join('\n  ')}`);
}

// Stack chart: an off-CPU sample stands at the moment the thread left the CPU and weighs the
// blocked time, so the thread's next sample cannot come sooner than weight x interval later.
// Checked on waits of >= 5 intervals (shorter ones may be aggregates of several short waits).
export function checkStackChart(t, view, threads, out) {
  const interval = view.profile.meta.interval;
  const failures = [];
  let checked = 0;
  for (const f of threads) {
    const th = threadByTid(view, f.tid, f.name);
    const samples = view.samples(th);
    for (let i = 0; i < samples.length; i++) {
      const s = samples[i];
      const leaf = s.frames[s.frames.length - 1];
      if (!leaf || !isPseudo(leaf) || s.weight < 5) continue;
      checked++;
      const nextTime = i + 1 < samples.length ? samples[i + 1].time : th.unregisterTime;
      if (nextTime === null || nextTime === undefined) continue;
      const gap = nextTime - s.time;
      if (gap < s.weight * interval - 1) {
        const next = samples[i + 1];
        failures.push(`${f.name} (${f.tid}) sample ${i} at ${s.time.toFixed(3)} ms weighs ` +
                      `${(s.weight * interval).toFixed(1)} ms but the next ` +
                      (next ? `sample (weight ${next.weight.toFixed(3)}) comes ${gap.toFixed(3)} ms later: ` +
                              `${formatFrames(s.frames)}  ==>  ${formatFrames(next.frames)}`
                            : `event (unregisterTime) is ${gap.toFixed(3)} ms later`));
      }
    }
  }
  out.stackChart = { longWaits: checked, overlapped: failures.length };
  t.diagnostic(`stack chart: ${checked} off-CPU samples of >= 5 intervals, ${failures.length} overlapped by the next sample`);
  assert.deepEqual(failures, [], 'off-CPU samples overlapped by the next sample');
}

// The weight a thread's off-CPU samples carry, per pseudo-frame (for the diagnostics).
// The checks every off-CPU fixture's recording gets, as tests of the describe that calls it:
// CPU accounting, coverage of each thread's life, the stack chart. `get` gives the recording's
// view, the fixture's threads and the metrics object once the describe's before() has run.
export function itChecksThreadTimes(get) {
  it('CPU accounting: threadCPUDelta vs utime+stime and the CPU clock', (t) => {
    if (!requireRecorder(t)) return;
    const { view, fixture, m } = get();
    checkCpuAccounting(t, view, fixture, m);
  });

  it('on + off weight covers each thread\'s lifetime (within 5%)', (t) => {
    if (!requireRecorder(t)) return;
    const { view, fixture, m } = get();
    checkCoverage(t, view, fixture, m);
  });

  it('stack chart: no long off-CPU sample is overlapped by the next sample', (t) => {
    if (!requireRecorder(t)) return;
    const { view, fixture, m } = get();
    checkStackChart(t, view, fixture, m);
  });
}

export function offCpuBreakdown(view, thread) {
  const out = {};
  for (const s of view.samples(thread)) {
    const leaf = s.frames[s.frames.length - 1];
    if (leaf && isPseudo(leaf)) out[leaf.name] = (out[leaf.name] ?? 0) + s.weight;
  }
  return out;
}
