// Saving the raw event stream (record --save-events) and replaying it (bpfprof replay) gives
// the same profile as the live recording; collapsing consecutive identical samples keeps
// every tick's weight and CPU time. Each stack mode's events are saved and replayed here (the
// stack copies of dwarf-copy too), so the test has no integration.copy rerun.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import {
  BPFPROF, ProfileView, RESULTS_DIR, checkWithProfilerCli, fixturePath, hasUserChainAtLeaf, pct, readProfile,
  recordWith, requireRecorder, run, saveMetrics,
} from './lib/harness.mjs';


function totals(view) {
  const out = new Map();
  for (const th of view.threads) {
    const weights = th.samples.weight ?? new Array(th.samples.length).fill(1);
    const cpu = (th.samples.threadCPUDelta ?? []).reduce((a, b) => a + (b ?? 0), 0);
    out.set(`${th.pid}/${th.tid}`, { name: th.name, rows: th.samples.length,
                                     weight: weights.reduce((a, b) => a + b, 0), cpu });
  }
  return out;
}

async function replay(events, label, extra = []) {
  const file = join(RESULTS_DIR, `${label}.json.gz`);
  rmSync(file, { force: true });
  const result = await run(BPFPROF, ['replay', events, '-o', file, ...extra]);
  assert.equal(result.code, 0, `replay failed: ${result.stderr}`);
  assert.match(result.stderr, /replayed \d+ events/);
  return { file, view: new ProfileView(readProfile(file)), stderr: result.stderr };
}

for (const callGraph of ['dwarf', 'dwarf-copy', 'fp']) {
  describe(`save and replay (${callGraph})`, () => {
    it('the replayed profile is the live one; collapsing keeps weights and CPU', async (t) => {
      if (!requireRecorder(t)) return;
      const events = join(RESULTS_DIR, `replay-${callGraph}.events`);
      rmSync(events, { force: true });
      const live = await recordWith(`replay-live-${callGraph}`,
        ['--call-graph', callGraph, '--save-events', events, '--', fixturePath('threads'), '800']);
      assert.ok(existsSync(events), 'no event log written');
      assert.match(live.result.stderr, /saved [\d.]+ MB of events/);

      const again = await replay(events, `replay-again-${callGraph}`);
      const flat = await replay(events, `replay-flat-${callGraph}`, ['--no-collapse']);
      const a = totals(live.view);
      const b = totals(again.view);
      const c = totals(flat.view);
      assert.deepEqual([...b.keys()].sort(), [...a.keys()].sort(), 'the same threads');
      let rowsCollapsed = 0;
      let rowsFlat = 0;
      for (const [key, x] of a) {
        const y = b.get(key);
        const z = c.get(key);
        assert.equal(y.name, x.name);
        // The live recording and the replay decode the same events (the DWARF unwinder may
        // differ only for the few samples before a process's mappings were known).
        assert.ok(Math.abs(y.weight - x.weight) <= Math.max(2, 0.01 * x.weight), `${key} weight ${x.weight} vs ${y.weight}`);
        assert.ok(Math.abs(y.cpu - x.cpu) <= 0.01 * x.cpu + 1e6, `${key} cpu ${x.cpu} vs ${y.cpu}`);
        // Collapsing changes rows, never the weight or CPU time.
        assert.ok(Math.abs(z.weight - y.weight) < 1e-6, `${key} weight collapsed ${y.weight} vs flat ${z.weight}`);
        assert.equal(z.cpu, y.cpu, `${key} cpu collapsed vs flat`);
        rowsCollapsed += y.rows;
        rowsFlat += z.rows;
      }
      assert.ok(rowsCollapsed < rowsFlat, `collapsing saved no rows (${rowsCollapsed} vs ${rowsFlat})`);
      for (const th of again.view.threads.filter((x) => x.name.startsWith('worker-'))) {
        const leaf = th.name === 'worker-alpha' ? 'alpha_spin' : 'beta_spin';
        const r = again.view.share(th, (f) => hasUserChainAtLeaf(f, ['worker_main', leaf]));
        assert.ok(r.share >= 0.9, `${th.name}: ${pct(r.share)} worker_main > ${leaf}`);
      }
      await checkWithProfilerCli(t, again.file, again.view);
      saveMetrics(`replay-${callGraph}`, { rowsCollapsed, rowsFlat, replay: again.stderr.trim() });
      t.diagnostic(`${callGraph}: ${rowsFlat} sample rows without collapsing, ${rowsCollapsed} with`);
      rmSync(events, { force: true });
    });
  });
}

describe('replay of bad input', () => {
  it('a stream cut anywhere or with a flipped byte: one line and exit 2, never a crash', async (t) => {
    if (!requireRecorder(t)) return;
    const events = join(RESULTS_DIR, 'damaged-source.events');
    await recordWith('damaged-source', ['--save-events', events, '--', fixturePath('threads'), '200']);
    const original = readFileSync(events);
    const damaged = join(RESULTS_DIR, 'damaged.events');
    const output = join(RESULTS_DIR, 'damaged.json.gz');
    const outcomes = { refused: 0, endedEarly: 0 };
    for (let i = 1; i <= 24; ++i) {
      // Cuts and flips spread over the whole stream, the header included.
      const at = Math.floor((original.length * i) / 25);
      const cut = i % 2 === 0;
      const bytes = cut ? original.subarray(0, at) : Buffer.from(original);
      if (!cut) bytes[at] ^= 0x5a;
      writeFileSync(damaged, bytes);
      rmSync(output, { force: true });
      const result = await run(BPFPROF, ['replay', damaged, '-o', output], { timeoutMs: 60_000 });
      const what = `${cut ? 'cut' : 'flipped byte'} at ${at} of ${original.length}: exit ${result.code} ` +
                   `signal ${result.signal}\n${result.stderr}`;
      assert.equal(result.signal, null, what);
      if (result.code === 2) {
        // Refused: one line, and no profile.
        assert.match(result.stderr, /^bpfprof: [^\n]+\n$/, what);
        assert.ok(!existsSync(output), what);
        ++outcomes.refused;
      } else {
        // Only a cut between two records leaves a stream that is whole up to where it
        // ends (as a recording killed mid-way): replayed, and said so.
        assert.equal(result.code, 0, what);
        assert.ok(cut, `a flipped byte went unnoticed: ${what}`);
        assert.match(result.stderr, /ends early \(the recording was cut short\)/, what);
        ++outcomes.endedEarly;
      }
    }
    t.diagnostic(`24 damaged streams: ${outcomes.refused} refused with one line, ` +
                 `${outcomes.endedEarly} cut between records and replayed`);
    assert.ok(outcomes.refused >= 12, 'every flipped byte is refused');
  });

  it('a file that is not an event log: one line, exit 2', async () => {
    const result = await run(BPFPROF, ['replay', fixturePath('busy'), '-o', join(RESULTS_DIR, 'never.json.gz')]);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /^bpfprof: .*not a bpfprof event log.*\n$/);
    assert.ok(!existsSync(join(RESULTS_DIR, 'never.json.gz')));
  });
});
