// Go's goroutine labels (pprof.SetGoroutineLabels, pprof.Do): go_cpu's goroutines label their
// work {fixture: go_cpu, work: hash|json|sort|clock}; each sample of a labelled goroutine has its
// set as the root frame of its stack in the Firefox profile ("[labels] fixture=go_cpu,
// work=hash"), as sample labels in pprof output (go tool pprof -tags and -tagfocus) and as the
// root frame of its folded stack. The shares of the sets agree with Go's own profiler
// (runtime/pprof, GO_CPU_PPROF) in the same run, within 5 points. For Go 1.19 (Debian's, labels
// in a map) and a current Go (go1.26 from npm, scripts/go-current.sh: a sorted slice).
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';

import {
  IS_CI, BPFPROF, ProfileView, RESULTS_DIR, STATE_FRAMES, fixturePath, pct, recordFixture,
  recorderUnavailableReason, requireRecorder, run, saveMetrics,
} from './lib/harness.mjs';

const DURATION_MS = 4000;
const WORKS = ['clock', 'hash', 'json', 'sort'];
const SET_OF = (work) => `[labels] fixture=go_cpu, work=${work}`;
const LOOP_OF = { clock: 'main.clockWork', hash: 'main.hashWork', json: 'main.jsonWork', sort: 'main.sortWork' };

// `go tool pprof -tags` output: { key: Map(value -> share) }.
function parseTags(text) {
  const tags = {};
  let current = null;
  for (const line of text.split('\n')) {
    const head = /^\s*(\S+): Total /.exec(line);
    if (head) {
      current = tags[head[1]] = new Map();
      continue;
    }
    const row = /^\s*\S+ \(\s*([\d.]+)%\): (.*)$/.exec(line);
    if (row && current) current.set(row[2], Number(row[1]) / 100);
  }
  return tags;
}

for (const [fixture, release] of [['go/go_cpu', 'Go 1.19'], ['go/go_cpu_current', 'a current Go']]) {
  const label = fixture.replace('go/', '');
  describe(`${label} (${release}): goroutine labels`, () => {
    let rec;
    let view;
    let goProfile;
    const metrics = {};
    const ready = (t) => {
      if (!requireRecorder(t)) return false;
      if (existsSync(fixturePath(fixture))) return true;
      if (IS_CI) assert.fail(`${fixturePath(fixture)} missing under CI=true`);
      t.skip(`${fixturePath(fixture)} not built (go or npm missing)`);
      return false;
    };
    before(async () => {
      if (recorderUnavailableReason() || !existsSync(fixturePath(fixture))) return;
      goProfile = join(RESULTS_DIR, `go_labels_${label}.pprof`);
      rmSync(goProfile, { force: true });
      // One P: the goroutines take turns on one thread, so that Go's own sampler (a per-thread
      // CPU timer that fires at most once a kernel tick) samples each of them alike however much
      // CPU the machine gives that thread (beside other tests, two Ps shared the CPUs unevenly
      // and runtime/pprof's json share fell 5 points below the goroutines' own).
      process.env.GO_CPU_PPROF = goProfile;
      process.env.GOMAXPROCS = '1';
      try {
        rec = await recordFixture(fixture, DURATION_MS, { label: `go_labels_${label}`, args: ['clock'] });
      } finally {
        delete process.env.GO_CPU_PPROF;
        delete process.env.GOMAXPROCS;
      }
      view = new ProfileView(rec.profile);
    });

    // The on-CPU samples of go_cpu's goroutine loops, with their label sets.
    const loopSamples = () => {
      const out = [];
      for (const thread of view.threads) {
        if (thread.processName !== label) continue;
        for (const s of view.samples(thread)) {
          if (STATE_FRAMES.has(s.frames.at(-1)?.name)) continue;
          const work = WORKS.find((w) => s.frames.some((f) => f.name === LOOP_OF[w]));
          if (work) out.push({ ...s, work });
        }
      }
      return out;
    };

    it('each goroutine\'s samples have its own label set at the root', (t) => {
      if (!ready(t)) return;
      const samples = loopSamples();
      const byWork = new Map(WORKS.map((w) => [w, { all: 0, labelled: 0 }]));
      for (const s of samples) {
        const entry = byWork.get(s.work);
        entry.all += s.weight;
        if (s.labels === SET_OF(s.work)) entry.labelled += s.weight;
      }
      for (const [work, { all, labelled }] of byWork)
        t.diagnostic(`${work}: ${all} samples in ${LOOP_OF[work]}, ${pct(labelled / (all || 1))} under ${SET_OF(work)}`);
      metrics.labelled = Object.fromEntries([...byWork].map(([w, e]) => [w, e.labelled / (e.all || 1)]));
      for (const [work, { all, labelled }] of byWork) {
        assert.ok(all >= 100, `${work}: ${all} samples`);
        assert.ok(labelled / all >= 0.98, `${work}: ${pct(labelled / all)} of ${LOOP_OF[work]}'s samples have its set`);
      }
      const summary = rec.result.stderr;
      assert.match(summary, /go labels: 1 process\(es\) labelling goroutines; a label set on (9[5-9]|100)\./, `the summary says nothing of the labels:\n${summary}`);
    });

    it('the sets\' shares agree with runtime/pprof\'s in the same run, within 5 points', async (t) => {
      if (!ready(t)) return;
      assert.ok(existsSync(goProfile), `go_cpu wrote no profile: ${rec.result.stderr}`);
      const go = await run('go', ['tool', 'pprof', '-tags', '-tagfocus=fixture=go_cpu', goProfile]);
      assert.equal(go.code, 0, go.stderr);
      const goShares = parseTags(go.stdout).work ?? new Map();
      const ours = new Map();
      let total = 0;
      for (const thread of view.threads) {
        if (thread.processName !== label) continue;
        for (const s of view.samples(thread)) {
          const work = /work=(\w+)/.exec(s.labels ?? '')?.[1];
          if (!work || STATE_FRAMES.has(s.frames.at(-1)?.name)) continue;
          ours.set(work, (ours.get(work) ?? 0) + s.weight);
          total += s.weight;
        }
      }
      metrics.shares = {};
      for (const work of WORKS) {
        const mine = (ours.get(work) ?? 0) / (total || 1);
        const theirs = goShares.get(work) ?? 0;
        metrics.shares[work] = { bpfprof: mine, runtimePprof: theirs };
        t.diagnostic(`work=${work}: bpfprof ${pct(mine)}, runtime/pprof ${pct(theirs)}, ` +
                     `${((mine - theirs) * 100).toFixed(1)} points`);
      }
      saveMetrics(`go_labels_${label}`, metrics);
      assert.equal(goShares.size, WORKS.length, `runtime/pprof's tags:\n${go.stdout}`);
      for (const work of WORKS)
        assert.ok(Math.abs(metrics.shares[work].bpfprof - metrics.shares[work].runtimePprof) <= 0.05,
                  `work=${work}: bpfprof ${pct(metrics.shares[work].bpfprof)}, runtime/pprof ${pct(metrics.shares[work].runtimePprof)}`);
    });

    it('pprof output has them as sample labels: go tool pprof -tags and -tagfocus', async (t) => {
      if (!ready(t)) return;
      const out = join(RESULTS_DIR, `go_labels_${label}.pb.gz`);
      const converted = await run(BPFPROF, ['convert', '-o', out, rec.file]);
      assert.equal(converted.code, 0, converted.stderr);
      const tags = await run('go', ['tool', 'pprof', '-tags', '-sample_index=samples', '-tagfocus=fixture=go_cpu', out]);
      assert.equal(tags.code, 0, tags.stderr);
      const work = parseTags(tags.stdout).work ?? new Map();
      t.diagnostic(`go tool pprof -tags (bpfprof's pprof): ${[...work].map(([v, s]) => `${v} ${pct(s)}`).join(', ')}`);
      assert.deepEqual([...work.keys()].sort(), WORKS);
      const focus = await run('go', ['tool', 'pprof', '-top', '-nodecount=3', '-sample_index=samples', '-tagfocus=work=hash', out]);
      assert.equal(focus.code, 0, focus.stderr);
      assert.match(focus.stdout, /sha256\.block/, `-tagfocus=work=hash:\n${focus.stdout}`);
      assert.doesNotMatch(focus.stdout, /main\.mix|encoding\/json/, `-tagfocus=work=hash:\n${focus.stdout}`);
      // No location is named after a set: they are labels only.
      const top = await run('go', ['tool', 'pprof', '-top', '-nodecount=200', out]);
      assert.doesNotMatch(top.stdout, /\[labels\]/);
    });

    it('folded output has a frame per set at the root', async (t) => {
      if (!ready(t)) return;
      const out = join(RESULTS_DIR, `go_labels_${label}.folded`);
      const converted = await run(BPFPROF, ['convert', '--format', 'collapsed', '-o', out, rec.file]);
      assert.equal(converted.code, 0, converted.stderr);
      const lines = readFileSync(out, 'utf8').split('\n').filter(Boolean);
      // process;thread;[labels] ...;the stack
      for (const work of WORKS) {
        const rooted = lines.filter((l) => l.split(';')[2] === SET_OF(work));
        assert.ok(rooted.some((l) => l.includes(LOOP_OF[work])),
                  `no folded stack of ${LOOP_OF[work]} under ${SET_OF(work)}:\n${lines.slice(0, 5).join('\n')}`);
      }
    });
  });
}

// A Go program whose labels lead to garbage (a map header of one bucket whose keys point
// nowhere, set through the runtime's own setter): no sample gets a set, each read is counted
// unreadable, and its stacks are as complete as any.
describe('go_garbage: goroutine labels that lead to garbage', () => {
  it('give no label set, are counted, and cost the stacks nothing', async (t) => {
    if (!requireRecorder(t)) return;
    if (!existsSync(fixturePath('go/go_garbage'))) {
      if (IS_CI) assert.fail(`${fixturePath('go/go_garbage')} missing under CI=true`);
      return t.skip('go not installed');
    }
    const rec = await recordFixture('go/go_garbage', 1500, { label: 'go_labels_garbage' });
    const view = new ProfileView(rec.profile);
    let total = 0;
    let labelled = 0;
    for (const thread of view.threads) {
      if (thread.processName !== 'go_garbage') continue;
      for (const s of view.samples(thread)) {
        if (s.labels) labelled += s.weight;
        if (!STATE_FRAMES.has(s.frames.at(-1)?.name)) total += s.weight;  // on-CPU
      }
    }
    const unreadable = Number(/go labels: .* (\d+) unreadable/.exec(rec.result.stderr)?.[1]);
    t.diagnostic(`${total} on-CPU samples; ${labelled} samples and waits with a label set; ${unreadable} reads unreadable`);
    // The test shares the CPUs with another (ctest -j2): 487 of 1,500 ms in a fresh clone.
    assert.ok(total >= 200, `${total} samples`);
    assert.equal(labelled, 0);
    assert.ok(unreadable >= total / 2, `the summary: ${rec.result.stderr}`);
    assert.match(rec.result.stderr, /user stacks complete: (99\.\d|100\.0)%/);
  });
});
