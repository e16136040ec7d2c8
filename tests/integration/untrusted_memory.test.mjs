// untrusted_memory: a process that bpfprof takes for CPython 3.11 but whose interpreter state
// its user filled with garbage (fixtures/fake_python.cpp, built as fake_python/python3.11):
// frame chains that are cycles, code pointers into nothing or into garbage, code objects
// with wild names and tables or huge sizes, thread and interpreter lists that are cycles.
// Recorded with `-- CMD` and with `-p`, each recording must end at -d with a profile, in
// bounded memory, with at most the BPF side's Python frames per sample, each named from a
// well-formed object or "[unknown ...]", never from the garbage, and reading code objects
// within its budgets.
import assert from 'node:assert/strict';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

import {
  BPFPROF, FREQUENCY_HZ, ProfileView, RESULTS_DIR, STATE_FRAMES, fixturePath, pct, readProfile,
  requireRecorder, run, saveMetrics, startBackground,
} from './lib/harness.mjs';

const FAKE_PYTHON = fixturePath(join('fake_python', 'python3.11'));
const DURATION_S = 2;
// The fixture outlives -d a little with `-- CMD` (bpfprof leaves it running), then ends.
const LAUNCH_FIXTURE_MS = 2500;
// Set-up, 2 s of recording and writing the profile take 2.3-2.9 s here; a hang would not end.
const TIMEOUT_MS = (DURATION_S + 20) * 1000;
// A bound on bpfprof's peak resident memory: room for one process's recording and for
// `huge`, whose code objects take the whole per-process read budget (256 MiB,
// runtimes/python/code.h); without that budget, `huge` would keep 4 MiB of lines for each of
// its 2048 readable code objects.
const MAX_RSS_KB = 512 * 1024;
// BPFPROF_MAX_PYTHON_FRAMES (bpf/events.h), and the "[unknown Python frames: ...]" frame
// that stands for the frames of a stack the BPF side did not read to its end.
const MAX_PYTHON_FRAMES = 96;
const UNKNOWN_CODE = '[unknown Python code]';
const OVER_BUDGET = '[unknown Python code: read budget used up]';
const DEEPER = `[unknown Python frames: more than ${MAX_PYTHON_FRAMES} deep]`;
const UNREADABLE = '[unknown Python frames: unreadable frame]';
const EVAL = '_PyEval_EvalFrameDefault';

// What the Python frames of each mode may be called, and what on-CPU samples must show:
// `outermost`, the outermost Python frame (how the stack ends), or `native`, the fixture's
// spinning _PyEval_EvalFrameDefault left native. `maxCodeObjectsRead`: a failed address is
// read again at most every 250 ms while frames name it alike (runtimes/python/code.h: 32 such
// addresses in garbage, 48 in wild), the budget ends huge's reading; at every sample each
// would be thousands.
const READS_PER_FAILED_ADDRESS = 4 * DURATION_S + 1;
const MODES = {
  self_cycle: { names: ['cycle_self', DEEPER], outermost: DEEPER, maxCodeObjectsRead: 4 },
  cycle: { names: ['cycle_a', 'cycle_b', DEEPER], outermost: DEEPER, maxCodeObjectsRead: 4 },
  garbage: { names: [UNKNOWN_CODE, UNREADABLE], outermost: UNREADABLE,
    maxCodeObjectsRead: 32 * READS_PER_FAILED_ADDRESS },
  wild: { names: [UNKNOWN_CODE, 'wild_table'], outermost: UNKNOWN_CODE,
    maxCodeObjectsRead: 16 + 48 * READS_PER_FAILED_ADDRESS },
  huge: { names: [UNKNOWN_CODE, OVER_BUDGET, /^huge_\d+$/], maxCodeObjectsRead: 300,
    overBudget: true },
  thread_cycle: { names: [], native: true, maxCodeObjectsRead: 0 },
};
const MIN_SHARE = 0.9;

function metaExtra(profile, label) {
  const entry = (profile.meta.extra ?? []).flatMap((group) => group.entries ?? [group])
    .find((e) => e.label === label);
  return entry?.value;
}

function nameAllowed(name, allowed) {
  return allowed.some((a) => (a instanceof RegExp ? a.test(name) : a === name));
}

// Runs `bpfprof record -F 1000 -d 2 -o FILE ARGS` under /usr/bin/time: its result, its peak
// RSS and the profile.
async function recordUnderTime(label, args) {
  const file = join(RESULTS_DIR, `untrusted-memory-${label}.json.gz`);
  rmSync(file, { force: true });
  const result = await run('/usr/bin/time', ['-f', 'maxrss_kb=%M', BPFPROF, 'record',
    '-F', String(FREQUENCY_HZ), '-d', String(DURATION_S), '-o', file, ...args],
  { timeoutMs: TIMEOUT_MS });
  const rssKb = Number(result.stderr.match(/maxrss_kb=(\d+)/)?.[1]);
  return { file, result, rssKb };
}

// Starts the fixture in `mode` for -p and waits for its "ready" line.
async function startFake(mode) {
  const target = startBackground(FAKE_PYTHON, ['60000', mode]);
  let out = '';
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${mode}: no ready line`)), 10_000);
    target.child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    target.done.then((r) => reject(new Error(`${mode} ended: ${r.stderr}`)));
  });
  return target;
}

// Every check of one recording of `mode`; returns its numbers.
function checkRecording(t, label, mode, { file, result, rssKb }) {
  const want = MODES[mode];
  const numbers = { exit: result.code, ms: result.ms, rssMb: Math.round(rssKb / 1024) };
  t.diagnostic(`${label}: exit ${result.code} in ${result.ms} ms, bpfprof peak RSS ` +
               `${numbers.rssMb} MB`);
  assert.equal(result.code, 0, result.stderr);
  assert.ok(result.ms < TIMEOUT_MS, `took ${result.ms} ms`);
  assert.ok(rssKb > 0 && rssKb < MAX_RSS_KB, `peak RSS ${rssKb} KB, bound ${MAX_RSS_KB} KB`);
  assert.ok(existsSync(file), result.stderr);
  for (const line of result.stderr.split('\n').filter((l) => /python/.test(l)))
    t.diagnostic(`${label}: ${line}`);

  const profile = readProfile(file);
  // Taken for an interpreter (else nothing here would be tested): the figure is there.
  assert.notEqual(metaExtra(profile, 'Python code objects read'), undefined,
    `not taken for an interpreter:\n${result.stderr}`);
  const view = new ProfileView(profile);
  const threads = view.threads.filter((th) => th.processName === 'python3.11');
  assert.equal(threads.length, 1, `python3.11 threads: ${threads.length}`);
  let onCpu = 0;
  let ending = 0;
  let maxPython = 0;
  const names = new Map();
  const wrong = new Map();
  for (const s of view.samples(threads[0])) {
    const python = s.frames.filter((f) => f.category === 'Python');
    maxPython = Math.max(maxPython, python.length);
    for (const f of python) {
      names.set(f.name, (names.get(f.name) ?? 0) + s.weight);
      if (!nameAllowed(f.name, want.names)) wrong.set(f.name, (wrong.get(f.name) ?? 0) + 1);
    }
    // Nothing of the garbage in any frame, Python or native.
    for (const f of s.frames)
      if (/GARBAGE/.test(f.name)) wrong.set(f.name, (wrong.get(f.name) ?? 0) + 1);
    if (s.frames.some((f) => STATE_FRAMES.has(f.name))) continue;
    onCpu += s.weight;
    const eval_ = s.frames.some((f) => f.name === EVAL);
    if (want.native ? eval_ && !python.length
      : python.length && !eval_ && (!want.outermost || python[0].name === want.outermost))
      ending += s.weight;
  }
  const share = onCpu ? ending / onCpu : 0;
  Object.assign(numbers, { onCpuSamples: onCpu, endingShare: share, maxPythonFrames: maxPython,
    names: Object.fromEntries([...names].sort((a, b) => b[1] - a[1]).slice(0, 6)) });
  t.diagnostic(`${label}: ${onCpu} on-CPU samples, ${pct(share)} end as expected; at most ` +
               `${maxPython} Python frames; ${[...names.keys()].slice(0, 6).join(', ')}`);
  for (const [stack, n] of view.topStacks(threads[0], () => true, 2))
    t.diagnostic(`${label}: x${n}: ${stack.slice(-240)}`);
  assert.deepEqual([...wrong.keys()].map((n) => n.slice(0, 80)), [], 'names not allowed');
  assert.ok(maxPython <= MAX_PYTHON_FRAMES + 1, `${maxPython} Python frames in one sample`);
  // Enough for the share below: the fixture shares the CPUs with another test and with the
  // reader's own work (huge's 256 MiB), and in a fresh clone waited 788 ms for one.
  assert.ok(onCpu >= 300, `only ${onCpu} on-CPU samples`);
  assert.ok(share >= MIN_SHARE, `${pct(share)} of on-CPU samples end as expected; ` +
    `top stacks: ${view.topStacks(threads[0], () => true, 3).map(([k]) => k.slice(-200)).join(' | ')}`);

  const read = Number(metaExtra(profile, 'Python code objects read') ?? 0);
  numbers.codeObjectsRead = read;
  assert.ok(read <= want.maxCodeObjectsRead, `${read} code objects read`);
  const overBudget = metaExtra(profile, 'Python processes over the code-object budget');
  if (want.overBudget) {
    assert.equal(Number(overBudget), 1);
    assert.match(result.stderr, /python: code-object budget used up in 1 process/);
  } else {
    assert.equal(overBudget, undefined);
  }
  return numbers;
}

describe('untrusted memory: a fake python3.11 full of garbage', () => {
  const metrics = {};
  after(() => {
    if (Object.keys(metrics).length) saveMetrics('untrusted_memory', metrics);
  });

  for (const mode of Object.keys(MODES)) {
    it(`${mode}, -- CMD: ends at -d, bounded, no name from the garbage`, async (t) => {
      if (!requireRecorder(t)) return;
      assert.ok(existsSync(FAKE_PYTHON), `${FAKE_PYTHON} is missing`);
      const label = `${mode}-launch`;
      const recording = await recordUnderTime(label,
        ['--', FAKE_PYTHON, String(LAUNCH_FIXTURE_MS), mode]);
      metrics[label] = checkRecording(t, label, mode, recording);
    });

    it(`${mode}, -p: ends at -d, bounded, no name from the garbage`, async (t) => {
      if (!requireRecorder(t)) return;
      assert.ok(existsSync(FAKE_PYTHON), `${FAKE_PYTHON} is missing`);
      const label = `${mode}-attach`;
      const target = await startFake(mode);
      try {
        const recording = await recordUnderTime(label, ['-p', String(target.pid)]);
        metrics[label] = checkRecording(t, label, mode, recording);
      } finally {
        target.child.kill('SIGKILL');
        await target.done;
      }
    });
  }
});
