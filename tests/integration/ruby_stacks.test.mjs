// ruby_stacks: an unmodified ruby3.1 (Debian's) running fixtures/ruby/work.rb, a program with
// a known call tree (methods, blocks, a class method, a rescued exception, Digest::SHA256),
// recorded with `-- CMD`, and attached to with `-p` while it runs work in three threads (one
// started after the attach). Its Ruby methods must sit in place of the VM loop's native
// rb_vm_exec frames, in order, in the Ruby category; the layout table is checked against the
// interpreter itself first (Fiddle).
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  BPFPROF, FREQUENCY_HZ, INTEGRATION_DIR, ProfileView, REPO_DIR, RESULTS_DIR, callGraphArgs, pct,
  readProfile, recordWith, recorderUnavailableReason, requireRecorder, run, saveMetrics,
  startBackground, STATE_FRAMES, untilSampling,
} from './lib/harness.mjs';

const RUBY = '/usr/bin/ruby3.1';
const SCRIPT = join(REPO_DIR, 'tests', 'fixtures', 'ruby', 'work.rb');
const WAITS = join(REPO_DIR, 'tests', 'fixtures', 'ruby', 'waits.rb');
const SECONDS = 3.0;
const ATTACH_SECONDS = 6.0;
const MIN_ORDERED_SHARE = 0.95;
const MIN_NAMED_SHARE = 0.90;
const MAX_RING_BYTES = 2048;
const MIN_SAMPLES = 50;

// The Ruby frames under `work` in each thread: the main program, and the blocks the
// threads of `work.rb SECONDS threads` start with.
const ROOTS = [['<main>'], ['block in <main>'], ['block (2 levels) in late_thread']];
// The innermost Ruby frame of a sample -> whether its Ruby frames from `work` on (root
// first) nest as the program calls them. C methods (Integer#times, Digest's) are frames too,
// named as Ruby's backtraces name them.
const EXPECTED = {
  'block in ripen': (names) => same(names, ['work', 'harvest', 'times', 'block in harvest', 'ripen', 'times', 'block in ripen']),
  // The exception is raised from thrower(0): one to four thrower frames under catcher.
  thrower: (names) => same(names.slice(0, 4), ['work', 'times', 'block in work', 'catcher']) &&
    names.length >= 5 && names.length <= 8 && names.slice(4).every((n) => n === 'thrower'),
  // Digest::SHA256.digest (Digest::Class.digest) > Digest::Instance#digest > #update.
  update: (names) => same(names, ['work', 'digest', 'digest', 'digest', 'update']),
};

// Each Ruby function of the program, and each C method it calls, -> the functions it is
// called from.
const CALLERS = {
  '<main>': [undefined], 'block in <main>': [undefined], 'block (2 levels) in late_thread': [undefined],
  work: ['<main>', 'block in <main>', 'block (2 levels) in late_thread'], harvest: ['work'],
  times: ['work', 'harvest', 'ripen'], 'block in harvest': ['times'], ripen: ['block in harvest'],
  'block in ripen': ['times'], 'block in work': ['times'], catcher: ['block in work'],
  thrower: ['catcher', 'thrower'], 'rescue in catcher': ['catcher'], digest: ['work', 'digest'],
  'zero?': ['thrower'], // Integer#zero? is Ruby code in 3.1 (<internal:numeric>)
  raise: ['thrower'], exception: ['raise'], initialize: ['exception', 'new'], new: ['digest'],
  update: ['digest'], finish: ['digest'], reset: ['digest'], '===': ['rescue in catcher'],
  clock_gettime: ['work'], '*': ['work'], '<': ['work'],
};

function same(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
function rubyFrames(frames) {
  return frames.filter((f) => f.category === 'Ruby').map((f) => f.name);
}
function rubyThreads(view) {
  return view.threads.filter((x) => /^ruby/.test(x.processName));
}
function onCpu(s) {
  return !s.frames.some((f) => STATE_FRAMES.has(f.name));
}
function tally(map, key) {
  map.set(key, (map.get(key) ?? 0) + 1);
}
function showOthers(t, prefix, others) {
  for (const [stack, n] of [...others].sort((a, b) => b[1] - a[1]).slice(0, 3))
    t.diagnostic(`${prefix}other x${n}: ${stack}`);
}

// Whether a sample's Ruby frames (root first) run the expected leaf from a thread's root.
function nestsAsExpected(names) {
  const from = names.indexOf('work');
  return from >= 0 && ROOTS.some((root) => same(names.slice(0, from), root)) &&
    EXPECTED[names.at(-1)](names.slice(from));
}

// For each leaf: on-CPU samples whose innermost Ruby frame it is, and how many nest as expected.
function orderedShares(view) {
  const out = Object.fromEntries(Object.keys(EXPECTED).map((k) => [k, { total: 0, ordered: 0, other: new Map() }]));
  for (const th of rubyThreads(view)) {
    for (const s of view.samples(th).filter(onCpu)) {
      const names = rubyFrames(s.frames);
      const r = out[names.at(-1)];
      if (!r) continue;
      r.total += 1;
      if (nestsAsExpected(names)) r.ordered += 1;
      else tally(r.other, names.join(' > '));
    }
  }
  return out;
}

// The expected methods in the expected nesting, >= 95% of the on-CPU samples of each leaf.
function checkLeaves(t, view, metrics) {
  const failures = [];
  for (const [leaf, r] of Object.entries(orderedShares(view))) {
    const share = r.total ? r.ordered / r.total : 0;
    metrics[leaf] = { samples: r.total, share };
    t.diagnostic(`${leaf}: ${r.total} on-CPU samples, ${pct(share)} with the expected Ruby frames`);
    showOthers(t, `${leaf}: `, r.other);
    if (r.total < MIN_SAMPLES) failures.push(`${leaf}: only ${r.total} samples`);
    else if (share < MIN_ORDERED_SHARE) failures.push(`${leaf}: ${pct(share)} in order`);
  }
  assert.deepEqual(failures, []);
}

// Every Ruby frame under its caller, in >= 95% of the samples that run work.
function checkCallers(t, view, metrics) {
  let total = 0;
  const other = new Map();
  for (const th of rubyThreads(view)) {
    for (const s of view.samples(th)) {
      const names = rubyFrames(s.frames);
      if (!names.includes('work')) continue; // not the start (rubygems, require)
      total += 1;
      if (!names.every((n, i) => CALLERS[n]?.includes(names[i - 1]))) tally(other, names.join(' > '));
    }
  }
  const wrong = [...other.values()].reduce((a, b) => a + b, 0);
  metrics.nesting = { total, wrong };
  t.diagnostic(`${total - wrong} of ${total} samples of work nest as the program calls`);
  showOthers(t, '', other);
  assert.ok(total >= MIN_SAMPLES && (total - wrong) / total >= MIN_ORDERED_SHARE, `${wrong} of ${total}`);
}

// The figures: on-CPU samples of the interpreter with a Ruby method named (>= 90%;
// the others run rubygems' start-up or no Ruby yet), and ring-buffer bytes per sample as the
// summary prints them (<= 2 KB).
function checkFigures(t, view, stderr, metrics) {
  let total = 0;
  let named = 0;
  let namedLeaf = 0;
  for (const th of rubyThreads(view)) {
    for (const s of view.samples(th).filter(onCpu)) {
      total += 1;
      if (rubyFrames(s.frames).some((n) => !n.startsWith('['))) named += 1;
      if (!/^(fn_0x|0x|\[)/.test(s.frames.at(-1)?.name ?? '[')) namedLeaf += 1;
    }
  }
  const line = /^bpfprof: Ring-buffer traffic: (\d+) bytes per sample/m.exec(stderr);
  const ringBytes = line ? Number(line[1]) : NaN;
  Object.assign(metrics, { onCpuSamples: total, namedShare: named / total, namedLeafShare: namedLeaf / total, ringBytes });
  t.diagnostic(`${named} of ${total} on-CPU samples (${pct(named / total)}) with a Ruby method named; ` +
               `leaf named in ${pct(namedLeaf / total)}; ${ringBytes} ring-buffer bytes per sample`);
  assert.ok(total >= MIN_SAMPLES && named / total >= MIN_NAMED_SHARE, `${named} of ${total} named`);
  assert.ok(ringBytes <= MAX_RING_BYTES, `${ringBytes} bytes per sample`);
}

describe('ruby_stacks', () => {
  let rec;
  const metrics = { fixture: 'ruby/work.rb', seconds: SECONDS };

  after(() => {
    if (rec) saveMetrics('ruby_stacks', metrics);
  });

  before(async () => {
    if (recorderUnavailableReason() || !existsSync(RUBY)) return;
    rec = await recordWith('ruby-launch', ['--', RUBY, SCRIPT, String(SECONDS)]);
  });

  it('the layout table matches what this ruby3.1 shows of itself (Fiddle)', async (t) => {
    assert.ok(existsSync(RUBY), `${RUBY} is missing (Debian's ruby3.1)`);
    const r = await run(RUBY, [join(INTEGRATION_DIR, 'ruby', 'offsets.rb'),
      join(REPO_DIR, 'runtimes', 'ruby', 'layout.h')]);
    t.diagnostic(r.stdout.trim());
    assert.equal(r.code, 0, `${r.stdout}${r.stderr}`);
  });

  it('names the Ruby methods and blocks, in order, in place of the VM loop', (t) => {
    if (!requireRecorder(t)) return;
    assert.ok(rec, `${RUBY} is missing (Debian's ruby3.1)`);
    checkLeaves(t, rec.view, metrics);
  });

  it('puts every Ruby frame under its caller, in every sample of work', (t) => {
    if (!requireRecorder(t)) return;
    checkCallers(t, rec.view, metrics);
  });

  it('names >= 90% of the samples at <= 2 KB of ring buffer a sample', (t) => {
    if (!requireRecorder(t)) return;
    checkFigures(t, rec.view, rec.result.stderr, metrics);
  });

  it('leaves no native rb_vm_exec frame in samples with Ruby frames', (t) => {
    if (!requireRecorder(t)) return;
    let total = 0;
    let left = 0;
    for (const th of rubyThreads(rec.view)) {
      for (const s of rec.view.samples(th)) {
        if (!rubyFrames(s.frames).length) continue;
        total += 1;
        if (s.frames.some((f) => f.name === 'rb_vm_exec')) left += 1;
      }
    }
    metrics.leftoverVmExec = { total, left };
    t.diagnostic(`rb_vm_exec left native in ${left} of ${total} samples with Ruby frames`);
    assert.ok(total >= MIN_SAMPLES && left / total <= 0.05, `${left} of ${total}`);
  });
});

// Resolves once a process started with startBackground has printed `text`.
function untilPrinted(target, text) {
  return new Promise((resolvePromise, reject) => {
    let seen = '';
    target.child.stdout.on('data', (d) => {
      seen += d;
      if (seen.includes(text)) resolvePromise();
    });
    target.done.then((r) => reject(new Error(`ended before printing ${text}: ${r.stderr}`)));
  });
}

// Attached to a running work.rb whose work runs in the main thread and in a thread started
// before the attach ('early picker'), and from a SIGUSR1 once bpfprof samples, in one started
// after it ('late picker of the orchard': longer than the kernel's 15 bytes).
describe('ruby_stacks with -p', () => {
  let rec;
  const metrics = { fixture: 'ruby/work.rb threads', seconds: ATTACH_SECONDS };
  after(() => {
    if (rec) saveMetrics('ruby_stacks_attach', metrics);
  });

  before(async () => {
    if (recorderUnavailableReason() || !existsSync(RUBY)) return;
    const target = startBackground(RUBY, [SCRIPT, String(ATTACH_SECONDS), 'threads']);
    await untilPrinted(target, 'ready');
    const file = join(RESULTS_DIR, 'ruby-attach.json.gz');
    rmSync(file, { force: true });
    const recorder = startBackground(BPFPROF, ['record', '-v', '-F', String(FREQUENCY_HZ), '-o', file,
      ...callGraphArgs([]), '-p', String(target.pid)]);
    await untilSampling(recorder, { target });
    target.child.kill('SIGUSR1');
    const [exit, result] = await Promise.all([target.done, recorder.done]);
    assert.equal(exit.code, 0, `work.rb failed: ${exit.stderr}`);
    assert.equal(result.code, 0, `bpfprof failed: ${result.stderr}`);
    rec = { view: new ProfileView(readProfile(file)), result };
  });

  it('names the threads started before and after the attach, as Thread#name says', (t) => {
    if (!requireRecorder(t)) return;
    assert.ok(rec, `${RUBY} is missing (Debian's ruby3.1)`);
    const names = rubyThreads(rec.view).map((th) => th.name);
    t.diagnostic(`threads: ${names.join(', ')}`);
    for (const name of ['early picker', 'late picker of the orchard']) {
      const th = rubyThreads(rec.view).find((x) => x.name === name);
      assert.ok(th, `no thread named ${name}`);
      const n = rec.view.samples(th).filter((s) => onCpu(s) && rubyFrames(s.frames).includes('work')).length;
      metrics[name] = n;
      assert.ok(n >= MIN_SAMPLES / 2, `${name}: ${n} on-CPU samples in work`);
    }
  });

  it('names the Ruby methods and blocks, in order, in every thread', (t) => {
    if (!requireRecorder(t)) return;
    checkLeaves(t, rec.view, metrics);
    checkCallers(t, rec.view, metrics);
  });

  it('names >= 90% of the samples at <= 2 KB of ring buffer a sample', (t) => {
    if (!requireRecorder(t)) return;
    checkFigures(t, rec.view, rec.result.stderr, metrics);
  });
});

// Ruby's own view against the recorder's: waits.rb prints caller_locations where it then
// sleeps; the Ruby frames of the stacks it sleeps in (off-CPU) are those, with their lines.
describe('ruby_stacks against caller_locations', () => {
  let rec;
  before(async () => {
    if (recorderUnavailableReason() || !existsSync(RUBY)) return;
    rec = await recordWith('ruby-waits', ['--', RUBY, WAITS, '1.5']);
  });

  it('has the Ruby frames caller_locations prints, in order, where the program sleeps', (t) => {
    if (!requireRecorder(t)) return;
    assert.ok(rec, `${RUBY} is missing (Debian's ruby3.1)`);
    const printed = rec.result.stdout.split('\n--\n')[0].split('\n').reverse()
      .map((l) => /^(.*):(\d+)$/.exec(l)).map((m) => ({ name: m[1], line: Number(m[2]) }));
    const said = (frames) => frames.map((f) => (f.line ? `${f.name}:${f.line}` : f.name)).join(' > ');
    t.diagnostic(`caller_locations: ${said(printed)}`);
    assert.ok(printed.length >= 5 && printed[0].name === '<main>', rec.result.stdout);
    // Ruby gives a C method the line of its caller; bpfprof gives it none.
    const expected = [...printed.map((f) => ({ ...f, line: f.name === 'each' ? null : f.line })), // Array#each
      { name: 'sleep', line: null }];
    const asleep = new Map();
    for (const th of rubyThreads(rec.view)) {
      for (const s of rec.view.samples(th).filter((x) => !onCpu(x))) {
        const ruby = s.frames.filter((f) => f.category === 'Ruby')
          .map((f) => ({ name: f.name, line: rec.view.frameTable.line[f.frame] }));
        // Where it sleeps (writing to stdout may have waited too, in flush).
        if (ruby.some((f) => f.name === 'wait_here') && ruby.at(-1).name === 'sleep') tally(asleep, said(ruby));
      }
    }
    for (const [stack, n] of asleep) t.diagnostic(`asleep x${n}: ${stack}`);
    assert.ok(asleep.size > 0, 'no off-CPU sample in wait_here > sleep');
    assert.deepEqual([...asleep.keys()], [said(expected)]);
  });
});

// A version without a layout entry (only Debian's 3.1 can be had here): the same library
// under the name of a 2.9 (the kernel names a mapping after the file a symbolic link leads to)
// gives one line in the summary and native frames only.
describe('ruby_stacks of a version without a layout', () => {
  let rec;
  let dir;
  before(async () => {
    if (recorderUnavailableReason() || !existsSync(RUBY)) return;
    dir = mkdtempSync(join(tmpdir(), 'bpfprof-ruby-'));
    copyFileSync('/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1', join(dir, 'libruby-2.9.so.2.9'));
    symlinkSync(join(dir, 'libruby-2.9.so.2.9'), join(dir, 'libruby-3.1.so.3.1'));
    rec = await recordWith('ruby-unknown-version', ['--', 'env', `LD_LIBRARY_PATH=${dir}`, RUBY, SCRIPT, '0.5']);
  });
  after(() => dir && rmSync(dir, { recursive: true, force: true }));

  it('says so in one line and keeps the native frames', (t) => {
    if (!requireRecorder(t)) return;
    assert.ok(rec, `${RUBY} is missing (Debian's ruby3.1)`);
    const lines = rec.result.stderr.split('\n').filter((l) => /ruby 2\.9/.test(l));
    t.diagnostic(lines.join('\n'));
    assert.equal(lines.length, 1);
    assert.match(lines[0], /ruby 2\.9: no layout for this version, frames not read/);
    let total = 0;
    let vmLoop = 0;
    for (const th of rubyThreads(rec.view)) {
      for (const s of rec.view.samples(th).filter(onCpu)) {
        total += 1;
        assert.deepEqual(rubyFrames(s.frames), []);
        if (s.frames.some((f) => f.name === 'rb_vm_exec')) vmLoop += 1;
      }
    }
    t.diagnostic(`rb_vm_exec in ${vmLoop} of ${total} on-CPU samples`);
    assert.ok(total >= 20 && vmLoop / total > 0.5, `rb_vm_exec in ${vmLoop} of ${total}`);
  });
});
