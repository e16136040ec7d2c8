// ruby_stacks: an unmodified ruby3.1 (Debian's) running fixtures/ruby/work.rb, a program with
// a known call tree (methods, blocks, a class method, a rescued exception, Digest::SHA256),
// recorded with `-- CMD`. Its Ruby methods must sit in place of the VM loop's native
// rb_vm_exec frames, in order, in the Ruby category; the layout table is checked against the
// interpreter itself first (Fiddle).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  INTEGRATION_DIR, REPO_DIR, pct, recordWith, recorderUnavailableReason, requireRecorder, run,
  saveMetrics, STATE_FRAMES,
} from './lib/harness.mjs';

const RUBY = '/usr/bin/ruby3.1';
const SCRIPT = join(REPO_DIR, 'tests', 'fixtures', 'ruby', 'work.rb');
const SECONDS = 3.0;
const MIN_ORDERED_SHARE = 0.95;
const MIN_SAMPLES = 50;

const WORK = ['<main>', 'work'];
// The innermost Ruby frame of a sample -> whether its Ruby frames (root first) nest as the
// program calls them.
const EXPECTED = {
  'block in ripen': (names) => same(names, [...WORK, 'harvest', 'block in harvest', 'ripen', 'block in ripen']),
  // The exception is raised from thrower(0): one to four thrower frames under catcher.
  thrower: (names) => same(names.slice(0, 4), [...WORK, 'block in work', 'catcher']) &&
    names.length >= 5 && names.length <= 8 && names.slice(4).every((n) => n === 'thrower'),
  digest: (names) => same(names, [...WORK, 'digest']),
};

// Each Ruby function of the program -> the functions it is called from.
const CALLERS = {
  '<main>': [undefined], work: ['<main>'], harvest: ['work'], 'block in harvest': ['harvest'],
  ripen: ['block in harvest'], 'block in ripen': ['ripen'], 'block in work': ['work'],
  catcher: ['block in work'], thrower: ['catcher', 'thrower'], 'rescue in catcher': ['catcher'],
  digest: ['work'], 'zero?': ['thrower'], // Integer#zero? is Ruby code in 3.1 (<internal:numeric>)
};

function same(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
function rubyFrames(frames) {
  return frames.filter((f) => f.category === 'Ruby').map((f) => f.name);
}

// For each leaf: on-CPU samples whose innermost Ruby frame it is, and how many nest as expected.
function orderedShares(view) {
  const out = Object.fromEntries(Object.keys(EXPECTED).map((k) => [k, { total: 0, ordered: 0, other: new Map() }]));
  for (const th of view.threads.filter((x) => /^ruby/.test(x.processName))) {
    for (const s of view.samples(th)) {
      if (s.frames.some((f) => STATE_FRAMES.has(f.name))) continue;
      const names = rubyFrames(s.frames);
      const r = out[names.at(-1)];
      if (!r) continue;
      r.total += 1;
      if (EXPECTED[names.at(-1)](names)) r.ordered += 1;
      else r.other.set(names.join(' > '), (r.other.get(names.join(' > ')) ?? 0) + 1);
    }
  }
  return out;
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
    const failures = [];
    for (const [leaf, r] of Object.entries(orderedShares(rec.view))) {
      const share = r.total ? r.ordered / r.total : 0;
      metrics[leaf] = { samples: r.total, share };
      t.diagnostic(`${leaf}: ${r.total} on-CPU samples, ${pct(share)} with the expected Ruby frames`);
      for (const [stack, n] of [...r.other].sort((a, b) => b[1] - a[1]).slice(0, 3))
        t.diagnostic(`${leaf}: other x${n}: ${stack}`);
      if (r.total < MIN_SAMPLES) failures.push(`${leaf}: only ${r.total} samples`);
      else if (share < MIN_ORDERED_SHARE) failures.push(`${leaf}: ${pct(share)} in order`);
    }
    assert.deepEqual(failures, []);
  });

  it('puts every Ruby frame under its caller, in every sample of work', (t) => {
    if (!requireRecorder(t)) return;
    let total = 0;
    const other = new Map();
    for (const th of rec.view.threads.filter((x) => /^ruby/.test(x.processName))) {
      for (const s of rec.view.samples(th)) {
        const names = rubyFrames(s.frames);
        if (!names.includes('work')) continue; // not the start (rubygems, require)
        total += 1;
        if (!names.every((n, i) => CALLERS[n]?.includes(names[i - 1])))
          other.set(names.join(' > '), (other.get(names.join(' > ')) ?? 0) + 1);
      }
    }
    const wrong = [...other.values()].reduce((a, b) => a + b, 0);
    metrics.nesting = { total, wrong };
    t.diagnostic(`${total - wrong} of ${total} samples of work nest as the program calls`);
    for (const [stack, n] of [...other].sort((a, b) => b[1] - a[1]).slice(0, 3)) t.diagnostic(`other x${n}: ${stack}`);
    assert.ok(total >= MIN_SAMPLES && (total - wrong) / total >= MIN_ORDERED_SHARE, `${wrong} of ${total}`);
  });

  it('leaves no native rb_vm_exec frame in samples with Ruby frames', (t) => {
    if (!requireRecorder(t)) return;
    let total = 0;
    let left = 0;
    for (const th of rec.view.threads.filter((x) => /^ruby/.test(x.processName))) {
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
