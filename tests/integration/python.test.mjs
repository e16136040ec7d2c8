// python: an unmodified python3.11 (Debian's) running python/call_tree.py, a program with a
// known call tree on three threads, recorded with `-- CMD`, `-p` and `-a`. The Python frames
// must sit in place of the interpreter loop's native frames, in order, with lines inside
// their functions, native frames under the Python function that called into C; a process
// that is not Python is unchanged, and one that only looks like Python costs nothing.
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  INTEGRATION_DIR, REPO_DIR, RESULTS_DIR, checkWithProfilerCli, fixturePath, frameLib, funcSourceFile, itOnce,
  osPid, pct, recordWith, requireRecorder, recorderUnavailableReason, run, saveMetrics, sleep, startBackground,
  STATE_FRAMES,
} from './lib/harness.mjs';

const PYTHON = '/usr/bin/python3.11';
// The other versions with a layout entry, where the machine has them (pyenv's shared builds:
// the interpreter is in libpython3.X.so, libpython3.Xm.so for 3.6 and 3.7; 3.12 marks
// activations with shim frames, 3.13 has no _PyCFrame, 3.6 to 3.10 chain frame objects, 3.6
// has no _PyRuntime), and one without (2.7: its frames are not read, and the summary says so).
const PYENV = process.env.PYENV_ROOT ?? '/root/.pyenv';
const OTHER_PYTHONS = { '3.6': `${PYENV}/versions/3.6.15/bin/python3.6`,
  '3.7': `${PYENV}/versions/3.7.16/bin/python3.7`,
  '3.8': `${PYENV}/versions/3.8.18/bin/python3.8`,
  '3.9': `${PYENV}/versions/3.9.18/bin/python3.9`, '3.10': `${PYENV}/versions/3.10.13/bin/python3.10`,
  '3.12': `${PYENV}/versions/3.12.1/bin/python3.12`, '3.13': `${PYENV}/versions/3.13.0/bin/python3.13` };
const PYTHON27 = `${PYENV}/versions/2.7.18/bin/python2.7`;
const SCRIPT = join(INTEGRATION_DIR, 'python', 'call_tree.py');
// Seconds of CPU time each part of call_tree.py runs for (each part is timed by its thread's
// CPU clock): about 500 samples a leaf, also on a busy machine, where it only takes longer.
const SECONDS = 0.5;
// Each part of the other versions' runs: about 500 samples a leaf. Less, and the interpreter's
// start and exit (no Python frame yet) weigh on the 98% share asserted (97.9% at 0.25 s).
const OTHER_SECONDS = 0.5;
const MIN_ORDERED_SHARE = 0.95;
const MID_SWITCH = '[unknown Python frames: read mid-switch]';
const MAX_MID_SWITCH_SHARE = 0.1;

const BOOTSTRAP = ['Thread._bootstrap', 'Thread._bootstrap_inner', 'Thread.run'];
// The innermost Python function of a sample -> the Python frames (root first) it must have.
const EXPECTED = {
  grove: { recursion_leaf: [...BOOTSTRAP, 'grove_worker', 'Grove.tend', 'orchard',
    'orchard.<locals>.medlar', 'recurse', 'recurse', 'recurse', 'recurse', 'recursion_leaf'] },
  late: { recursion_leaf: [...BOOTSTRAP, 'late_worker', 'recursion_leaf'] },
  main: {
    ripen: ['<module>', 'main', 'harvest', 'ripen'],
    thrower: ['<module>', 'main', 'catcher', 'thrower', 'thrower', 'thrower', 'thrower'],
    digest: ['<module>', 'main', 'digest'],
  },
};

// Before 3.11 a code object has no qualified name: its frames are named by co_name.
function codeName(qualname) {
  return qualname.split('.').at(-1);
}
function expectedFor(version) {
  if (!['3.6', '3.7', '3.8', '3.9', '3.10'].includes(version)) return EXPECTED;
  return Object.fromEntries(Object.entries(EXPECTED).map(([role, leaves]) => [role,
    Object.fromEntries(Object.entries(leaves).map(([leaf, chain]) => [leaf, chain.map(codeName)]))]));
}

function pythonFrames(frames) {
  return frames.filter((f) => f.category === 'Python');
}
function onCpu(frames) {
  return !frames.some((f) => STATE_FRAMES.has(f.name));
}
// 3.11's threading names no native thread: the workers are told apart by their functions.
function threadRole(view, thread) {
  if (thread.isMainThread) return 'main';
  for (const s of view.samples(thread)) {
    const names = pythonFrames(s.frames).map((f) => f.name);
    if (names.includes('grove_worker')) return 'grove';
    if (names.includes('late_worker')) return 'late';
  }
  return null;
}
// The threads of the interpreters, or of those named `processName` (python3.9).
function pythonThreads(view, processName = null) {
  return view.threads.filter((th) => (processName ? th.processName === processName
    : /^python3\.\d+$/.test(th.processName)));
}

// For each thread role and leaf: on-CPU samples whose innermost Python frame is the leaf, and
// the share whose Python frames are exactly the expected chain.
function orderedShares(view, expected = EXPECTED, processName = null) {
  const out = {};
  for (const th of pythonThreads(view, processName)) {
    const role = threadRole(view, th);
    if (!role) continue;
    for (const [leaf, chain] of Object.entries(expected[role])) {
      const key = `${role}:${leaf}`;
      const r = out[key] ?? (out[key] = { total: 0, ordered: 0, midSwitch: 0, examples: new Map() });
      for (const s of view.samples(th)) {
        if (!onCpu(s.frames)) continue;
        const py = pythonFrames(s.frames).map((f) => f.name);
        if (py.at(-1) !== leaf) continue;
        // Honestly unknown callers (3.12+ read between two of the interpreter's stores):
        // bounded apart, not taken for a wrong order.
        if (py.includes(MID_SWITCH)) {
          r.midSwitch += 1;
          continue;
        }
        r.total += 1;
        if (py.join(' > ') === chain.join(' > ')) r.ordered += 1;
        else r.examples.set(py.join(' > '), (r.examples.get(py.join(' > ')) ?? 0) + 1);
      }
    }
  }
  return out;
}

// On-CPU samples of Python threads in which a native interpreter-loop frame was left in place.
function leftoverInterpreterShare(view, processName = null) {
  let total = 0;
  let left = 0;
  for (const th of pythonThreads(view, processName)) {
    for (const s of view.samples(th)) {
      if (!onCpu(s.frames) || !pythonFrames(s.frames).length) continue;
      total += 1;
      if (s.frames.some((f) => f.name === '_PyEval_EvalFrameDefault')) left += 1;
    }
  }
  return { total, left, share: total ? left / total : 0 };
}

// The summary's Python line: the share of the interpreters' stacks with Python frames, and
// the bytes of Python frames sent per stack; fails the test without it.
function pythonSummary(stderr) {
  const m = stderr.match(/Python frames in ([\d.]+)% of their (\d+) stacks \((\d+) bytes per stack\)/);
  assert.ok(m, `no python summary line:\n${stderr}`);
  return { share: Number(m[1]) / 100, stacks: Number(m[2]), bytesPerStack: Number(m[3]) };
}

function describeRanges() {
  return JSON.parse(readFileSync(join(RESULTS_DIR, 'python-ranges.json'), 'utf8'));
}

describe('python', () => {
  let rec;
  const metrics = { fixture: 'python/call_tree.py', seconds: SECONDS };

  after(() => {
    if (rec) saveMetrics('python', metrics);
  });

  before(async () => {
    if (recorderUnavailableReason() || !existsSync(PYTHON)) return;
    mkdirSync(RESULTS_DIR, { recursive: true });
    const described = await run(PYTHON, [SCRIPT, '--describe']);
    assert.equal(described.code, 0, described.stderr);
    const { writeFileSync } = await import('node:fs');
    writeFileSync(join(RESULTS_DIR, 'python-ranges.json'), described.stdout);
    rec = await recordWith('python-launch', ['--', PYTHON, SCRIPT, String(SECONDS)]);
  });

  function requirePython(t) {
    if (!requireRecorder(t)) return false;
    assert.ok(existsSync(PYTHON), `${PYTHON} is missing (Debian's python3.11)`);
    return true;
  }

  it('the layout table matches what this python3.11 shows of itself (ctypes)', async (t) => {
    if (!existsSync(PYTHON)) return t.skip(`${PYTHON} is missing`);
    const r = await run(PYTHON, [join(INTEGRATION_DIR, 'python', 'offsets.py'),
      join(REPO_DIR, 'runtimes', 'python', 'layout.h')]);
    t.diagnostic(r.stdout.trim());
    assert.equal(r.code, 0, `${r.stdout}${r.stderr}`);
  });

  // Fails the test unless each leaf has its Python frames in order in enough samples.
  function checkOrdered(t, view, label, expected = EXPECTED, processName = null) {
    const shares = orderedShares(view, expected, processName);
    const failures = [];
    metrics[label] = {};
    for (const [key, r] of Object.entries(shares)) {
      const share = r.total ? r.ordered / r.total : 0;
      metrics[label][key] = { samples: r.total, share, midSwitch: r.midSwitch };
      t.diagnostic(`${key}: ${r.total} on-CPU samples, ${pct(share)} with the expected Python frames`);
      for (const [stack, n] of [...r.examples].sort((a, b) => b[1] - a[1]).slice(0, 3))
        t.diagnostic(`${key}: other x${n}: ${stack}`);
      const midSwitch = r.midSwitch / Math.max(1, r.total + r.midSwitch);
      if (r.midSwitch) t.diagnostic(`${key}: ${r.midSwitch} samples (${pct(midSwitch)}) with callers read mid-switch`);
      if (r.total < 50) failures.push(`${key}: only ${r.total} samples`);
      else if (share < MIN_ORDERED_SHARE) failures.push(`${key}: ${pct(share)} in order`);
      if (midSwitch > MAX_MID_SWITCH_SHARE) failures.push(`${key}: ${pct(midSwitch)} read mid-switch`);
    }
    const left = leftoverInterpreterShare(view, processName);
    metrics[label].leftoverInterpreterFrames = left;
    t.diagnostic(`native _PyEval_EvalFrameDefault left in ${pct(left.share)} of ${left.total} samples`);
    if (left.share > 0.05) failures.push(`interpreter frames left native in ${pct(left.share)}`);
    assert.equal(Object.keys(shares).length, 5, `leaves found: ${Object.keys(shares).join(', ')}`);
    assert.deepEqual(failures, []);
  }

  it('names the Python functions of each thread, in order, in place of the interpreter loop', (t) => {
    if (!requirePython(t)) return;
    checkOrdered(t, rec.view, 'ordered');
  });

  // The other versions' frames and layouts are read the same way in every stack mode; the
  // merge with the native frames, which the mode changes, is checked with the default python.
  // Each runs as a shell's child, as under `make` or a script: its mappings come before its
  // fork is read (it got no Python frame at all while only its first mapping was kept).
  // Two versions are recorded at a time: an interpreter runs one thread at a time (its GIL),
  // so two use the two CPUs as one did alone (make test's time).
  const versions = Object.entries(OTHER_PYTHONS).filter(([, python]) => existsSync(python));
  const versionRuns = new Map();
  const recordVersion = (version, python) => {
    if (!versionRuns.has(version)) {
      const runIt = async () => ({
        offsets: await run(python, [join(INTEGRATION_DIR, 'python', 'offsets.py'),
          join(REPO_DIR, 'runtimes', 'python', 'layout.h')]),
        r: await recordWith(`python-launch-${version}`,
                            ['--', '/bin/sh', '-c', `'${python}' '${SCRIPT}' ${OTHER_SECONDS} & wait`]),
      });
      const started = runIt();
      started.catch(() => {});  // its own test reports a failure
      versionRuns.set(version, started);
    }
    return versionRuns.get(version);
  };
  for (const [version, python] of Object.entries(OTHER_PYTHONS)) {
    itOnce(`python ${version} (its own layout entry), a shell's child: the same call tree, and its layout checked`, async (t) => {
      if (!existsSync(python)) return t.skip(`no ${python}`);
      if (!requireRecorder(t)) return;
      const at = versions.findIndex(([v]) => v === version);
      const partner = at % 2 === 0 ? versions[at + 1] : undefined;
      const mine = recordVersion(version, python);
      if (partner) recordVersion(...partner);
      const { offsets, r } = await mine;
      t.diagnostic(offsets.stdout.trim());
      assert.equal(offsets.code, 0, `${offsets.stdout}${offsets.stderr}`);
      assert.doesNotMatch(r.result.stderr, /not a CPython interpreter/, 'its launcher executable is not reported');
      checkOrdered(t, r.view, `ordered${version}`, expectedFor(version), basename(python));
      checkLines(t, r.view, expectedFor(version) !== EXPECTED, `lines${version}`);
      const summary = pythonSummary(r.result.stderr);
      metrics[`summary${version}`] = summary;
      // The summary counts every stack taken with a user stack, wakers' too (99.8-99.9% for
      // 3.6-3.13); an interrupt's wakeup in an interpreter thread has no user stack and no
      // Python frames read (each had made a stack without them: 94-97% under load).
      const samples = pythonThreads(r.view, basename(python)).flatMap((th) => r.view.samples(th));
      const withPython = samples.filter((s) => pythonFrames(s.frames).length > 0).length;
      metrics[`sampleShare${version}`] = withPython / (samples.length || 1);
      t.diagnostic(`python ${version}: Python frames in ${pct(withPython / (samples.length || 1))} of ${samples.length} samples; ` +
                   `the summary: in ${pct(summary.share)} of ${summary.stacks} stacks, ${summary.bytesPerStack} bytes per stack`);
      assert.ok(withPython / samples.length >= 0.98, `Python frames in only ${pct(withPython / samples.length)} of the samples`);
      assert.ok(summary.share >= 0.98, `the summary: Python frames in only ${pct(summary.share)} of the stacks`);
    });
  }

  it('python 2.7 (no layout entry): native frames as before, and one line in the summary', async (t) => {
    if (!existsSync(PYTHON27)) return t.skip(`no ${PYTHON27}`);
    if (!requireRecorder(t)) return;
    const spin = 'import time\nend = time.time() + 0.3\nwhile time.time() < end: pass';
    const r = await recordWith('python-launch-2.7', ['--', PYTHON27, '-c', spin]);
    assert.match(r.result.stderr, /python 2\.7: no layout for this version, frames not read/);
    const threads = pythonThreads(r.view, 'python2.7');
    assert.ok(threads.length > 0, 'no python2.7 thread');
    for (const th of threads)
      for (const s of r.view.samples(th)) assert.equal(pythonFrames(s.frames).length, 0);
    const s = r.view.share(threads[0], (f) => f.some((x) => x.name === 'PyEval_EvalFrameEx'));
    assert.ok(s.share > 0.5, `native interpreter frames in ${pct(s.share)}`);
  });

  it('a module imported by the program runs its top-level code under the importing function', (t) => {
    if (!requirePython(t)) return;
    const main = pythonThreads(rec.view).find((th) => th.isMainThread);
    let total = 0;
    let ok = 0;
    for (const s of rec.view.samples(main)) {
      const py = pythonFrames(s.frames);
      if (!onCpu(s.frames) || py.at(-1)?.name !== 'ripen_on_import') continue;
      total += 1;
      const module = py.at(-2);
      if (py[0].name === '<module>' && py[1].name === 'main' && module?.name === '<module>' &&
          funcSourceFile(rec.view, module.func)?.endsWith('orchard_import.py')) ok += 1;
    }
    metrics.importShare = { samples: total, share: total ? ok / total : 0 };
    t.diagnostic(`import: ${total} samples, ${pct(ok / (total || 1))} main > ... > <module> (orchard_import.py) > ripen_on_import`);
    assert.ok(total >= 50, `only ${total} samples in ripen_on_import`);
    assert.ok(ok / total >= MIN_ORDERED_SHARE, `${pct(ok / total)} under the import`);
  });

  it('puts the lines of Python frames inside their functions, and the files as sources', (t) => {
    if (!requirePython(t)) return;
    checkLines(t, rec.view, false, 'lines');
  });

  // Each Python frame of the program's functions is on a line of its function; its function's
  // line is the function's first. `byCodeName`: the frames are named by co_name (before 3.11).
  function checkLines(t, view, byCodeName, label) {
    const described = describeRanges();
    const ranges = byCodeName
      ? Object.fromEntries(Object.entries(described).map(([name, range]) => [codeName(name), range]))
      : described;
    const medlar = byCodeName ? 'medlar' : 'orchard.<locals>.medlar';
    const ft = view.frameTable;
    let checked = 0;
    const wrong = [];
    const noLine = [];
    for (let f = 0; f < ft.length; f++) {
      if (view.categories[ft.category[f]] !== 'Python') continue;
      const func = ft.func[f];
      const name = view.funcName(func);
      const file = funcSourceFile(view, func);
      assert.equal(view.funcTable.isJS[func], true, `${name}: isJS`);
      if (!file?.endsWith('call_tree.py') && !file?.endsWith('orchard_import.py')) continue;
      if (!ranges[name]) continue;
      checked += 1;
      const [first, last] = ranges[name];
      if (view.funcTable.lineNumber[func] !== first && name !== medlar)
        wrong.push(`${name}: funcTable.lineNumber ${view.funcTable.lineNumber[func]}, want ${first}`);
      // Instructions with no location in the code's table (3.11+: the cleanup of an except
      // block) have no line: null is then the honest answer, but a line must be the right one.
      if (ft.line[f] === null) {
        noLine.push(name);
        continue;
      }
      if (!(ft.line[f] >= first && ft.line[f] <= last)) wrong.push(`${name}: line ${ft.line[f]} not in ${first}-${last}`);
    }
    t.diagnostic(`${label}: ${checked} Python frames of the program checked; without a line: ${noLine.join(', ') || 'none'}`);
    metrics[label] = { checked, wrong: wrong.length, noLine: noLine.length };
    assert.ok(noLine.length <= 2 && noLine.every((n) => n === 'catcher'),
              `frames without a line: ${noLine.join(', ')} (only catcher's except cleanup has none)`);
    assert.ok(checked >= 12, `only ${checked} frames of the program's functions`);
    assert.deepEqual(wrong, []);
  }

  // Of the main thread's samples in hashlib's C (libcrypto, _hashlib), those under digest, its
  // innermost Python frame: the nesting. The share of digest's samples in C is the workload's
  // (79.5-90.4% in fresh clones: a 2 KB hash against the loop's own bytecode), printed.
  it('native frames of a C extension sit under the Python function that called it', (t) => {
    if (!requirePython(t)) return;
    const main = pythonThreads(rec.view).find((th) => th.isMainThread);
    const inHashing = (f) => /libcrypto|_hashlib/.test(frameLib(rec.view, f.frame)?.name ?? '');
    let native = 0;
    let under = 0;
    let digest = 0;
    const elsewhere = new Map();
    for (const s of rec.view.samples(main)) {
      if (!onCpu(s.frames)) continue;
      const python = s.frames.filter((f) => f.category === 'Python');
      const first = s.frames.findIndex(inHashing);
      if (python.at(-1)?.name === 'digest') digest += 1;
      if (first < 0) continue;
      native += 1;
      const caller = s.frames.slice(0, first).filter((f) => f.category === 'Python').at(-1)?.name;
      if (caller === 'digest') under += 1;
      else elsewhere.set(String(caller), (elsewhere.get(String(caller)) ?? 0) + 1);
    }
    metrics.nativeUnderDigest = { samples: native, share: native ? under / native : 0,
                                  digestShareInC: digest ? under / digest : 0 };
    t.diagnostic(`${native} samples in libcrypto/_hashlib, ${pct(under / (native || 1))} under digest ` +
                 `(elsewhere: ${[...elsewhere].map(([k, n]) => `${k} x${n}`).join(', ') || 'none'}); ` +
                 `${pct(under / (digest || 1))} of digest's ${digest} samples in that C`);
    assert.ok(native >= 50, `only ${native} samples in hashlib's C code`);
    assert.ok(under / native >= 0.98, `${pct(under / native)} of hashlib's C samples under digest`);
  });

  it('keeps stacks complete and says how Python frames went', (t) => {
    if (!requirePython(t)) return;
    const stderr = rec.result.stderr;
    const summary = pythonSummary(stderr);
    metrics.summaryShare = summary.share;
    // 99.6-99.8%, beside three spinning loops too.
    assert.ok(summary.share >= 0.98, `Python frames in only ${pct(summary.share)} of the stacks`);
    const complete = stderr.match(/user stacks complete: ([\d.]+)%/);
    assert.ok(complete && Number(complete[1]) >= 95, `completeness: ${complete?.[1]}`);
    const extra = (rec.profile.meta.extra ?? []).flatMap((group) => group.entries ?? []);
    assert.ok(extra.some((e) => e.label === 'Python stacks with Python frames'), 'meta.extra has the Python figure');
  });

  it('loads in profiler-cli, which lists the Python functions among the hottest', async (t) => {
    if (!requirePython(t)) return;
    const { list, samplesByHandle } = await checkWithProfilerCli(t, rec.file, rec.view);
    const groveThread = pythonThreads(rec.view).find((th) => threadRole(rec.view, th) === 'grove');
    const grove = list.find((e) => String(e.tid) === String(groveThread?.tid));
    assert.ok(grove, 'profiler-cli lists the grove thread');
    const names = samplesByHandle.get(grove.threadHandle).topFunctionsByTotal.map((f) => f.name);
    for (const name of ['grove_worker', 'Grove.tend', 'orchard.<locals>.medlar', 'recursion_leaf'])
      assert.ok(names.includes(name), `${name} not among grove's functions: ${names.slice(0, 20).join(', ')}`);
  });

  // Attaching finds the interpreters and their threads the same way in every stack mode.
  itOnce('-p: attaches to a running interpreter (threads started before and after)', async (t) => {
    if (!requirePython(t)) return;
    // The grove thread starts before the recording attaches, the late one when the main
    // thread's parts (3.5 s of CPU time) and grove's (3 s) are done: 6.5 s after at the
    // earliest, later on a busy machine, which a start-up of 2-3 s still sees.
    const bg = startBackground(PYTHON, [SCRIPT, '1']);
    try {
      await sleep(800);
      const r = await recordWith('python-attach', ['-p', String(bg.pid), '-d', '15']);
      const shares = orderedShares(r.view);
      metrics.attach = Object.fromEntries(Object.entries(shares).map(([k, v]) => [k, { samples: v.total, share: v.total ? v.ordered / v.total : 0 }]));
      for (const [key, v] of Object.entries(metrics.attach)) t.diagnostic(`-p ${key}: ${v.samples} samples, ${pct(v.share)} in order`);
      for (const key of ['grove:recursion_leaf', 'late:recursion_leaf', 'main:digest']) {
        assert.ok(metrics.attach[key]?.samples >= 50, `-p ${key}: ${metrics.attach[key]?.samples} samples`);
        assert.ok(metrics.attach[key].share >= MIN_ORDERED_SHARE, `-p ${key}: ${pct(metrics.attach[key].share)}`);
      }
    } finally {
      bg.child.kill('SIGKILL');
      await bg.done;
    }
  });

  it('-a: a Python program caught system-wide, a C program beside it unchanged', async (t) => {
    if (!requirePython(t)) return;
    const py = startBackground(PYTHON, [SCRIPT, '2']);
    const busy = startBackground(fixturePath('busy'), ['3000']);
    try {
      await sleep(500);
      const r = await recordWith('python-system', ['-a', '-d', '1.5']);
      // An interpreter already running is found in the /proc snapshot, after sampling began:
      // the share counts from its first sample with Python frames on.
      const threads = r.view.threads.filter((th) => osPid(th) === String(py.pid));
      const found = Math.min(...threads.flatMap((th) => r.view.samples(th)
        .filter((s) => pythonFrames(s.frames).length).map((s) => s.time)));
      let total = 0;
      let named = 0;
      let before = 0;
      for (const th of threads) {
        for (const s of r.view.samples(th)) {
          if (!onCpu(s.frames)) continue;
          if (s.time < found) before += 1;
          else total += 1;
          if (s.time >= found && pythonFrames(s.frames).length) named += 1;
        }
      }
      metrics.systemWide = { samples: total, share: total ? named / total : 0, foundAtMs: found, samplesBefore: before };
      t.diagnostic(`-a: interpreter found ${found.toFixed(0)} ms into the recording (${before} samples before); ` +
                   `then ${total} on-CPU samples, ${pct(named / (total || 1))} with Python frames`);
      assert.ok(total >= 100 && named / total >= 0.9, `-a: ${pct(named / (total || 1))} of ${total}`);
      const busyThreads = r.view.threads.filter((th) => osPid(th) === String(busy.pid));
      assert.ok(busyThreads.length, 'the C program is in the profile');
      for (const th of busyThreads)
        for (const s of r.view.samples(th))
          assert.equal(pythonFrames(s.frames).length, 0, 'a C program has no Python frames');
    } finally {
      py.child.kill('SIGKILL');
      busy.child.kill('SIGKILL');
      await Promise.all([py.done, busy.done]);
    }
  });

  it('a program named python3.11 that is not Python is recorded as any other, and said so', async (t) => {
    if (!requirePython(t)) return;
    const dir = join(RESULTS_DIR, 'fake-python');
    mkdirSync(dir, { recursive: true });
    const fake = join(dir, 'python3.11');
    copyFileSync(fixturePath('busy'), fake);
    const r = await recordWith('python-fake', ['--', fake, '500']);
    assert.match(r.result.stderr, /python 3\.11: not a CPython interpreter/);
    const th = r.view.threads.find((x) => x.processName === 'python3.11');
    assert.ok(th, 'the fake interpreter is in the profile');
    const s = r.view.share(th, (frames) => frames.some((f) => f.name === 'inner_spin'));
    t.diagnostic(`fake python3.11: ${pct(s.share)} of samples in inner_spin`);
    assert.ok(s.share > 0.8, `its own functions: ${pct(s.share)}`);
  });

  itOnce('workers forked by multiprocessing run their parent\'s Python: its frames in their stacks', async (t) => {
    if (!requirePython(t)) return;
    const r = await recordWith('python-fork-pool', ['--', PYTHON, join(INTEGRATION_DIR, 'python', 'fork_pool.py'), '1']);
    // The workers: the processes other than the first python3.11 (the parent).
    const byPid = new Map();
    for (const th of r.view.threads) {
      if (th.processName !== 'python3.11') continue;
      for (const s of r.view.samples(th)) {
        if (!onCpu(s.frames)) continue;
        const e = byPid.get(th.pid) ?? { samples: 0, chain: 0 };
        e.samples += s.weight;
        const names = pythonFrames(s.frames).map((f) => f.name);
        const at = names.indexOf('pool_work');
        if (at >= 0 && names[at + 1] === 'work_spin') e.chain += s.weight;
        byPid.set(th.pid, e);
      }
    }
    const workers = [...byPid].filter(([, e]) => e.samples >= 300);
    t.diagnostic(`python3.11 processes: ${[...byPid].map(([pid, e]) => `${pid} ${Math.round(e.samples)} samples, ` +
                 `${pct(e.chain / e.samples)} pool_work > work_spin`).join('; ')}`);
    assert.equal(workers.length, 2, 'two workers with a second of CPU each');
    for (const [pid, e] of workers)
      assert.ok(e.chain >= 0.9 * e.samples, `worker ${pid}: pool_work > work_spin in ${pct(e.chain / e.samples)}`);
  });

  it('interpreters starting up and shutting down do not break the recording', async (t) => {
    if (!requirePython(t)) return;
    const loop = `for i in 1 2 3 4 5 6 7 8 9 10; do ${PYTHON} -c 'import json, hashlib; json.dumps(list(range(9999)))'; done`;
    const r = await recordWith('python-short-lived', ['--', '/bin/sh', '-c', loop]);
    const interpreters = r.view.threads.filter((th) => th.processName === 'python3.11');
    t.diagnostic(`${interpreters.length} interpreter threads; ${r.result.stderr.match(/bpfprof: python:.*/)?.[0] ?? 'no python line'}`);
    assert.ok(interpreters.length >= 5, 'the short-lived interpreters are in the profile');
  });
});
