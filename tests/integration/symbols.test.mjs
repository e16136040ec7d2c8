// Symbols users trust: inline frames with source lines (DWARF), demangled C++ (and Rust)
// names, stripped binaries whose debug files are found by build-id or .gnu_debuglink under
// --symbol-dir, JIT code in anonymous memory named by a perf map, and a binary deleted while
// it runs.
//
// What the profile must hold (the recorder's contract):
//   - an inlined function is an extra frame with frameTable.inlineDepth 1, 2, ... sharing
//     frameTable.address with the depth-0 frame of the function it is inlined into, so a
//     stack reads main > hot_loop > helper (helper at depth 1);
//   - frameTable.line[frame] is that frame's source line (or null); funcTable.source[func]
//     indexes shared.sources, whose filename is the source path as DWARF gives it;
//   - function names are demangled, without parameter lists (ns::Class<int>::method);
//   - bpfprof record --symbol-dir DIR searches DIR/.build-id/xx/rest.debug and
//     DIR/<debuglink name> for debug files;
//   - code in anonymous memory has the lib `[anon]`, and its function is named by
//     /tmp/perf-PID.map when there is one, else `0x<address>`;
//   - a binary deleted while it runs is still symbolized.
// Every profile is also loaded by profiler-cli. In the dwarf-copy rerun only JIT code runs
// again: the names, lines and debug files of the others come from the symbolizer, the same in
// every stack mode (their unwinding in each mode: dwarf_unwind, kernel_unwind), and the
// deleted binary's recording does not follow BPFPROF_CALL_GRAPH.
import assert from 'node:assert/strict';
import {
  copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, unlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  BPFPROF, FIXTURES, FREQUENCY_HZ, REPO_DIR, RESULTS_DIR, ProfileView, checkProfileStructure,
  checkWithProfilerCli, cliNameIs, fixturePath, frameDetails,
  hasUserChainAtLeaf, hottestSelf, lastIndexOfName, pct, readProfile, recordFixture, recordWith,
  recorderUnavailableReason, requireRecorder, run, saveMetrics, selfShare, sleep, startBackground,
  topDetailedStacks, describeOnce,
} from './lib/harness.mjs';

const DURATION_MS = 1500;
const SYMDIR = join(FIXTURES, 'symdir');

// The thread of a recordFixture result whose tid is the fixture's main thread.
function fixtureMainThread(view, rec) {
  const tid = rec.cputimes[0].tid;
  const thread = view.threads.find((th) => String(th.tid) === String(tid));
  assert.ok(thread, `no thread with tid ${tid}; threads: ` +
            view.threads.map((th) => `${th.pid}/${th.tid} ${th.name}`).join(', '));
  return thread;
}

// The thread of the process named `name` with the most samples.
function busiestThreadOf(view, name) {
  const threads = view.threads.filter((th) => th.processName === name)
    .sort((a, b) => b.samples.length - a.samples.length);
  assert.ok(threads.length, `no process named ${name}; threads: ` +
            view.threads.map((th) => `${th.pid}/${th.tid} ${th.processName}/${th.name}`).join(', '));
  return threads[0];
}

// Asserts that at least `min` of the thread's samples satisfy pred; on failure lists the most
// common stacks that do not (with inline depths and lines). Returns the share.
function assertShare(t, view, thread, what, pred, min) {
  const r = view.share(thread, pred);
  t.diagnostic(`${thread.processName}: ${r.total} samples, ${r.hit} (${pct(r.share)}) ${what}`);
  const others = topDetailedStacks(view, thread, (f) => !pred(f));
  for (const [stack, n] of others) t.diagnostic(`  other stack x${n}: ${stack}`);
  assert.ok(r.total >= DURATION_MS * 0.3, `only ${r.total} samples in ${DURATION_MS} ms at ${FREQUENCY_HZ} Hz`);
  assert.ok(r.share >= min, `only ${pct(r.share)} of samples ${what} (want >= ${pct(min)}); most common others:\n` +
            others.map(([s, n]) => `  x${n} ${s}`).join('\n'));
  return r.share;
}

// Common checks of one recorded profile: structure, and profiler-cli loads it.
function checkLoads(getRec, extra = async () => {}) {
  it('writes a well-formed profile', (t) => {
    if (!requireRecorder(t)) return;
    for (const w of checkProfileStructure(getRec().view)) t.diagnostic(`note: ${w}`);
  });
  it('profiler-cli loads it', async (t) => {
    if (!requireRecorder(t)) return;
    const { file, view } = getRec();
    const cli = await checkWithProfilerCli(t, file, view);
    await extra(t, cli);
  });
}

// The lines of the marker comments `/* <name>-begin */` and `/* <name>-end */` in a fixture
// source (1-based).
function markedLines(sourceFile, name) {
  const lines = readFileSync(sourceFile, 'utf8').split('\n');
  const begin = lines.findIndex((l) => l.includes(`/* ${name}-begin */`)) + 1;
  const end = lines.findIndex((l) => l.includes(`/* ${name}-end */`)) + 1;
  assert.ok(begin > 0 && end > begin, `markers ${name}-begin/-end not found in ${sourceFile}`);
  return { begin, end };
}

// ---------------------------------------------------------------------------------------

describeOnce('inline frames with source lines (inline_hot, -O2)', () => {
  const source = join(REPO_DIR, 'tests', 'fixtures', 'inline_hot.c');
  const body = markedLines(source, 'helper-body');
  const CHAIN = ['main', 'hot_loop', 'helper'];
  let rec;
  const metrics = { fixture: 'inline_hot', helperBody: body };
  after(() => { if (rec) saveMetrics('symbols_inline', metrics); });
  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordFixture('inline_hot', DURATION_MS, { label: 'symbols_inline_hot' });
    rec.view = new ProfileView(rec.profile);
  });

  // Each condition separately, so that a failure says which part of the contract is missing.
  const conditions = {
    chain: (view, f) => hasUserChainAtLeaf(f, CHAIN),
    helperInlineDepth1: (view, f, h) => h.inlineDepth === 1,
    hotLoopInlineDepth0: (view, f, h, o) => o.inlineDepth === 0,
    sameAddress: (view, f, h, o) => h.address !== null && h.address === o.address,
    helperSourceFile: (view, f, h) => typeof h.file === 'string' && h.file.endsWith('inline_hot.c'),
    helperLineInBody: (view, f, h) => Number.isInteger(h.line) && h.line >= body.begin && h.line <= body.end,
  };
  function check(view, frames) {
    const failed = [];
    if (!conditions.chain(view, frames)) return ['chain'];
    const i = lastIndexOfName(frames, 'helper');
    const helper = frameDetails(view, frames[i]);
    const hotLoop = frameDetails(view, frames[i - 1]);
    for (const [name, cond] of Object.entries(conditions))
      if (name !== 'chain' && !cond(view, frames, helper, hotLoop)) failed.push(name);
    return failed;
  }

  it(`>= 80% of samples are main > hot_loop > helper, helper inlined (depth 1, same address) at a line of its body in inline_hot.c`, (t) => {
    if (!requireRecorder(t)) return;
    const { view } = rec;
    const thread = fixtureMainThread(view, rec);
    t.diagnostic(`helper's body: inline_hot.c lines ${body.begin}-${body.end}`);
    const failures = new Map();
    for (const s of view.samples(thread))
      for (const name of check(view, s.frames)) failures.set(name, (failures.get(name) ?? 0) + s.weight);
    for (const [name, n] of failures) t.diagnostic(`samples failing ${name}: ${n}`);
    metrics.failures = Object.fromEntries(failures);
    // The lines helper's samples land on, for the record.
    const lines = new Map();
    for (const s of view.samples(thread)) {
      const i = lastIndexOfName(s.frames, 'helper');
      if (i < 0) continue;
      const h = frameDetails(view, s.frames[i]);
      const key = `${h.file ?? '(no file)'}:${h.line}`;
      lines.set(key, (lines.get(key) ?? 0) + s.weight);
    }
    for (const [key, n] of [...lines].sort((a, b) => b[1] - a[1]).slice(0, 8)) t.diagnostic(`helper at ${key}: x${n}`);
    metrics.share = assertShare(t, view, thread,
      'are main > hot_loop > helper[inline depth 1, same address] in the helper body',
      (f) => check(view, f).length === 0, 0.8);
  });

  it("hot_loop's own frame (depth 0) carries a line of hot_loop's source", (t) => {
    if (!requireRecorder(t)) return;
    const { view } = rec;
    const thread = fixtureMainThread(view, rec);
    const seen = new Map();
    for (const s of view.samples(thread)) {
      const i = lastIndexOfName(s.frames, 'hot_loop');
      if (i < 0) continue;
      const d = frameDetails(view, s.frames[i]);
      const key = `${d.file ?? '(no file)'}:${d.line}`;
      seen.set(key, (seen.get(key) ?? 0) + s.weight);
    }
    t.diagnostic(`hot_loop lines: ${[...seen].map(([k, n]) => `${k} x${n}`).join(', ')}`);
    const [top] = [...seen].sort((a, b) => b[1] - a[1]);
    assert.ok(top, 'hot_loop never appears');
    assert.match(top[0], /inline_hot\.c:\d+$/, 'the most common hot_loop frame has no file or line');
  });

  checkLoads(() => rec);
});

describeOnce('demangled C++ names (cpp_templates)', () => {
  const NAME = 'ns::Class<int>::method';
  let rec;
  const metrics = { fixture: 'cpp_templates' };
  after(() => { if (rec) saveMetrics('symbols_cpp', metrics); });
  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordFixture('cpp_templates', DURATION_MS, { label: 'symbols_cpp_templates' });
    rec.view = new ProfileView(rec.profile);
  });

  it(`>= 80% of samples are main > ${NAME}, and no name is left mangled`, (t) => {
    if (!requireRecorder(t)) return;
    const { view } = rec;
    const thread = fixtureMainThread(view, rec);
    const mangled = new Set();
    for (const s of view.samples(thread))
      for (const f of s.frames) if (/^_Z|^_R[A-Z]/.test(f.name)) mangled.add(f.name);
    assert.deepEqual([...mangled], [], 'mangled names in the profile');
    metrics.share = assertShare(t, view, thread, `are main > ${NAME}`,
      (f) => hasUserChainAtLeaf(f, ['main', NAME]), 0.8);
  });

  checkLoads(() => rec, async (t, { list, samplesByHandle }) => {
    const th = list.find((x) => x.name === 'cpp_templates');
    assert.ok(th, `threads: ${list.map((x) => x.name).join(', ')}`);
    const s = samplesByHandle.get(th.threadHandle);
    t.diagnostic(`profiler-cli hottest self: ${hottestSelf(s)}, ${NAME} self ${pct(selfShare(s, NAME))}`);
    assert.ok(s.topFunctionsBySelf.some((x) => cliNameIs(x.name, NAME)), `profiler-cli does not show ${NAME}`);
  });
});

describeOnce('demangled Rust names (rust_spin, legacy and v0 mangling; only when rustc was found)', () => {
  for (const binary of ['rust_spin', 'rust_spin_v0']) {
    it(`${binary}: >= 80% of samples are rust_spin::outer > rust_spin::inner_spin`, async (t) => {
      if (!existsSync(fixturePath(binary))) {
        t.skip(`no ${fixturePath(binary)} (rustc not found at build time)`);
        return;
      }
      if (!requireRecorder(t)) return;
      const { view, file } = await recordWith(`symbols_${binary}`, ['--', fixturePath(binary), String(DURATION_MS)]);
      const thread = busiestThreadOf(view, binary);
      assertShare(t, view, thread, 'are rust_spin::outer > rust_spin::inner_spin',
        (f) => hasUserChainAtLeaf(f, ['rust_spin::outer', 'rust_spin::inner_spin']), 0.8);
      await checkWithProfilerCli(t, file, view);
    });
  }
});

// ---------------------------------------------------------------------------------------

describeOnce('a stripped binary named only by its MiniDebugInfo (.gnu_debugdata)', () => {
  const FIXTURE = 'stripped_minidebuginfo';
  const CHAIN = ['main', 'minidebug_outer', 'minidebug_spin'];
  let rec;
  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordWith(`symbols_${FIXTURE}`, ['--', fixturePath(FIXTURE), String(DURATION_MS)]);
  });

  it('the fixture binary has .gnu_debugdata and no .symtab or DWARF', async () => {
    const r = await run('readelf', ['-SW', fixturePath(FIXTURE)]);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /\.symtab|\.debug_info/, r.stdout);
    assert.match(r.stdout, /\.gnu_debugdata/);
  });

  it(`>= 80% of samples are ${CHAIN.join(' > ')}`, (t) => {
    if (!requireRecorder(t)) return;
    const thread = busiestThreadOf(rec.view, FIXTURE);
    saveMetrics(`symbols_${FIXTURE}`, {
      share: assertShare(t, rec.view, thread, `are ${CHAIN.join(' > ')}`, (f) => hasUserChainAtLeaf(f, CHAIN), 0.8),
    });
  });

  checkLoads(() => rec);
});

for (const [fixture, prefix, how] of [
  ['stripped_buildid', 'buildid', 'by build-id (symdir/.build-id/xx/rest.debug)'],
  ['stripped_debuglink', 'debuglink', 'by .gnu_debuglink (symdir/stripped_debuglink.debug)'],
]) {
  describeOnce(`a stripped binary whose debug file is found ${how} with --symbol-dir`, () => {
    const CHAIN = ['main', `${prefix}_outer`, `${prefix}_spin`];
    let rec;
    const metrics = { fixture };
    after(() => { if (rec) saveMetrics(`symbols_${fixture}`, metrics); });
    before(async () => {
      if (recorderUnavailableReason()) return;
      rec = await recordWith(`symbols_${fixture}`,
        ['--symbol-dir', SYMDIR, '--', fixturePath(fixture), String(DURATION_MS)]);
    });

    it('the fixture binary is stripped: no .symtab, no DWARF', async () => {
      const r = await run('readelf', ['-SW', fixturePath(fixture)]);
      assert.equal(r.code, 0, r.stderr);
      assert.doesNotMatch(r.stdout, /\.symtab|\.debug_info|\.debug_line/, r.stdout);
      assert.match(r.stdout, /\.dynsym/);
    });

    it(`>= 80% of samples are ${CHAIN.join(' > ')} with ${prefix}_spin's source line`, (t) => {
      if (!requireRecorder(t)) return;
      const { view } = rec;
      const thread = busiestThreadOf(view, fixture);
      metrics.share = assertShare(t, view, thread, `are ${CHAIN.join(' > ')} with a line in ${fixture}.c`, (f) => {
        if (!hasUserChainAtLeaf(f, CHAIN)) return false;
        const leaf = frameDetails(view, f[lastIndexOfName(f, CHAIN[2])]);
        return Number.isInteger(leaf.line) && leaf.line > 0 && (leaf.file ?? '').endsWith(`${fixture}.c`);
      }, 0.8);
    });

    checkLoads(() => rec);
  });
}

// ---------------------------------------------------------------------------------------

// `jit_code start=0x... size=0x...` printed by the jit fixture.
function jitCode(stdout) {
  const m = stdout.match(/^jit_code start=0x([0-9a-f]+) size=0x([0-9a-f]+)$/m);
  assert.ok(m, `the jit fixture printed no jit_code line:\n${stdout}`);
  const start = BigInt(`0x${m[1]}`);
  return { start, end: start + BigInt(`0x${m[2]}`) };
}

// How a frame is tied to its library, for messages: frameTable.lib's name (or its raw
// value), frameTable.address, and the name of the function's resource.
function libDescription(view, f) {
  const d = frameDetails(view, f);
  const resource = view.funcTable.resource?.[f.func];
  const rt = view.profile.shared.resourceTable;
  const resourceName = resource === null || resource === undefined || resource < 0 ? null : view.strings[rt?.name?.[resource]];
  return `frameTable.lib ${d.lib ? `'${d.lib.name}'` : view.frameTable.lib?.[f.frame]}, address ${d.address}, resource '${resourceName}'`;
}

describe('JIT code in anonymous memory (jit, x86-64)', () => {
  const available = () => existsSync(fixturePath('jit'));
  let rec;
  let bare;
  const metrics = { fixture: 'jit' };
  after(() => { if (rec) saveMetrics('symbols_jit', metrics); });
  before(async () => {
    if (recorderUnavailableReason() || !available()) return;
    rec = await recordFixture('jit', DURATION_MS, { label: 'symbols_jit' });
    rec.view = new ProfileView(rec.profile);
    bare = await recordFixture('jit', DURATION_MS, { label: 'symbols_jit_no_perf_map', args: ['--no-perf-map'] });
    bare.view = new ProfileView(bare.profile);
  });

  it('with /tmp/perf-PID.map: >= 50% of samples are in jit_spin_function, lib [anon]', (t) => {
    if (!available()) { t.skip('no jit fixture (not x86-64)'); return; }
    if (!requireRecorder(t)) return;
    const { view } = rec;
    const thread = fixtureMainThread(view, rec);
    const libs = new Map();
    metrics.share = assertShare(t, view, thread, 'are in jit_spin_function', (f) => {
      const i = lastIndexOfName(f, 'jit_spin_function');
      if (i < 0 || f[i].category !== 'User') return false;
      const key = libDescription(view, f[i]);
      libs.set(key, (libs.get(key) ?? 0) + 1);
      return true;
    }, 0.5);
    t.diagnostic(`jit_spin_function frames: ${[...libs].map(([k, n]) => `${k} x${n}`).join('; ')}`);
    const inAnon = view.share(thread, (f) => {
      const i = lastIndexOfName(f, 'jit_spin_function');
      return i >= 0 && frameDetails(view, f[i]).lib?.name === '[anon]';
    });
    assert.ok(inAnon.share >= 0.5, `jit_spin_function frames must have frameTable.lib -> profile.libs '[anon]'; ` +
              `they have: ${[...libs.keys()].join('; ')}`);
    const chain = view.share(thread, (f) => hasUserChainAtLeaf(f, ['main', 'run_jit', 'jit_spin_function']));
    t.diagnostic(`main > run_jit > jit_spin_function: ${pct(chain.share)}`);
  });

  it('without a perf map: >= 50% of samples are in [anon] code named 0x<address> inside the JIT function', (t) => {
    if (!available()) { t.skip('no jit fixture (not x86-64)'); return; }
    if (!requireRecorder(t)) return;
    const { view } = bare;
    const code = jitCode(bare.result.stdout);
    const thread = fixtureMainThread(view, bare);
    const range = `[0x${code.start.toString(16)}, 0x${code.end.toString(16)})`;
    // The User leaf of a sample when it is named 0x<address> inside the JIT code.
    const jitLeaf = (f) => {
      const leaf = [...f].reverse().find((x) => x.category === 'User');
      if (!leaf || !/^0x[0-9a-f]+$/i.test(leaf.name)) return null;
      const address = BigInt(leaf.name);
      return address >= code.start && address < code.end ? leaf : null;
    };
    const libs = new Map();
    assertShare(t, view, thread, `have a User leaf named 0x<address> in ${range}`, (f) => {
      const leaf = jitLeaf(f);
      if (!leaf) return false;
      const key = libDescription(view, leaf);
      libs.set(key, (libs.get(key) ?? 0) + 1);
      return true;
    }, 0.5);
    t.diagnostic(`0x<address> frames: ${[...libs].map(([k, n]) => `${k} x${n}`).join('; ')}`);
    const inAnon = view.share(thread, (f) => {
      const leaf = jitLeaf(f);
      return leaf !== null && frameDetails(view, leaf).lib?.name === '[anon]';
    });
    assert.ok(inAnon.share >= 0.5, `the 0x<address> frames must have frameTable.lib -> profile.libs '[anon]'; ` +
              `they have: ${[...libs.keys()].join('; ')}`);
    assert.ok(!view.threads.some((th) => view.samples(th).some((s) => s.frames.some((x) => x.name === 'jit_spin_function'))),
              'jit_spin_function named without a perf map');
  });

  checkLoads(() => rec);
  it('profiler-cli loads the profile recorded without a perf map', async (t) => {
    if (!available()) { t.skip('no jit fixture (not x86-64)'); return; }
    if (!requireRecorder(t)) return;
    await checkWithProfilerCli(t, bare.file, bare.view);
  });
});

// ---------------------------------------------------------------------------------------

// The pid of a process running the executable `path`, or null.
function findProcessOf(path) {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/exe`) === path) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return null;
}

describeOnce('a binary deleted while it runs', () => {
  let rec;
  let dir;
  const metrics = { fixture: 'busy (copy, deleted)' };
  after(() => {
    if (rec) saveMetrics('symbols_deleted', metrics);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  before(async () => {
    if (recorderUnavailableReason()) return;
    dir = mkdtempSync(join(RESULTS_DIR, 'deleted-'));
    const copy = join(dir, 'busy-deleted');
    copyFileSync(fixturePath('busy'), copy);
    const file = join(RESULTS_DIR, 'symbols_deleted.json.gz');
    rmSync(file, { force: true });
    const recorder = startBackground(BPFPROF, ['record', '-F', String(FREQUENCY_HZ), '-o', file, '--', copy, '1500']);
    // Wait until the copy runs (the recorder starts it once its BPF programs are loaded).
    let pid = null;
    for (let waited = 0; pid === null && waited < 20_000; waited += 20) {
      pid = findProcessOf(copy);
      if (pid === null) await sleep(20);
    }
    assert.ok(pid !== null, `${copy} never started`);
    await sleep(300);
    unlinkSync(copy);
    metrics.deletedWhileRunning = existsSync(`/proc/${pid}`);
    const done = await recorder.done;
    assert.equal(done.code, 0, `recording failed: ${done.stderr}`);
    rec = { file, view: new ProfileView(readProfile(file)) };
  });

  it('the binary was deleted while it ran, and >= 80% of samples are main > outer > inner_spin', (t) => {
    if (!requireRecorder(t)) return;
    assert.ok(metrics.deletedWhileRunning, 'the process had ended before its binary was deleted');
    const thread = busiestThreadOf(rec.view, 'busy-deleted');
    metrics.share = assertShare(t, rec.view, thread, 'are main > outer > inner_spin',
      (f) => hasUserChainAtLeaf(f, ['main', 'outer', 'inner_spin']), 0.8);
  });

  checkLoads(() => rec);
});
