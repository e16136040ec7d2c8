// Names for code in a stripped binary (tests/fixtures/stripped_plt.c: -O2, no frame
// pointers, strip): PLT slots are name@plt, the entry point is _start, and the static
// functions no symbol names are fn_0xSTART, one per .eh_frame FDE, so their samples add up.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';

import {
  ProfileView, checkWithProfilerCli, fixturePath, frameLib, pct, recordFixture, recorderUnavailableReason,
  requireRecorder, run, saveMetrics,
} from './lib/harness.mjs';

const DURATION_MS = 1500;
const FIXTURE = 'stripped_plt';

// The unstripped copy's functions (nm -S): [{ name, start, end }].
async function functionsOfUnstrippedCopy() {
  const result = await run('nm', ['-S', '--defined-only', `${fixturePath(FIXTURE)}.unstripped`]);
  assert.equal(result.code, 0, result.stderr);
  const functions = [];
  for (const m of result.stdout.matchAll(/^([0-9a-f]+) ([0-9a-f]+) [tT] (\S+)$/gm)) {
    const start = parseInt(m[1], 16);
    functions.push({ name: m[3], start, end: start + parseInt(m[2], 16) });
  }
  return functions;
}

// The code ranges the stripped binary's CFI covers (readelf's FDEs): [{ start, end }].
async function fdeRanges() {
  const result = await run('readelf', ['--debug-dump=frames', fixturePath(FIXTURE)]);
  assert.equal(result.code, 0, result.stderr);
  return [...result.stdout.matchAll(/ FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)/g)]
    .map((m) => ({ start: parseInt(m[1], 16), end: parseInt(m[2], 16) }));
}

// The frames of the fixture's own file, with their address (relative = file vaddr: PIE).
function fixtureFrames(view, frames) {
  return frames.filter((f) => frameLib(view, f.frame)?.name === FIXTURE)
    .map((f) => ({ ...f, address: view.frameTable.address[f.frame], symbol: view.frameTable.nativeSymbol[f.frame] }));
}

describe('a stripped binary calling libc through the PLT (stripped_plt)', () => {
  let rec;
  let functions;
  const metrics = {};
  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordFixture(FIXTURE, DURATION_MS);
    rec.view = new ProfileView(rec.profile);
    rec.samples = rec.view.threads.flatMap((th) => rec.view.samples(th));
    functions = await functionsOfUnstrippedCopy();
  });

  // Code no FDE covers (crt's __do_global_dtors_aux, run at exit) has no function start to
  // name it by: it is `stripped_plt+0xOFFSET`, never a wrong name.
  it('names its code only _start, name@plt or fn_0x... (never an undefined .dynsym name)', async (t) => {
    if (!requireRecorder(t)) return;
    const names = new Set(rec.samples.flatMap((s) => fixtureFrames(rec.view, s.frames).map((f) => f.name)));
    t.diagnostic(`fixture frame names: ${[...names].join(', ')}`);
    const covered = await fdeRanges();
    assert.ok(covered.length > 0, 'no FDE read from the fixture');
    for (const name of names) {
      const offset = /^stripped_plt\+0x([0-9a-f]+)$/.exec(name);
      if (offset) {
        const pc = parseInt(offset[1], 16);
        assert.ok(!covered.some((r) => pc >= r.start && pc < r.end), `${name} lies in code its CFI covers`);
        continue;
      }
      assert.match(name, /^(_start|\w+@plt|fn_0x[0-9a-f]+)$/);
    }
  });

  it('shows labs as labs@plt or libc\'s labs', (t) => {
    if (!requireRecorder(t)) return;
    const labs = rec.samples.filter((s) => s.frames.some((f) => f.name === 'labs@plt' || f.name === 'labs'));
    t.diagnostic(`${labs.length} samples in labs@plt or labs`);
    assert.ok(labs.length > 0);
  });

  // Also the stacks whose leaf is a PLT slot: its CFI computes from rip, which the unwinder
  // gets with the other registers.
  it('starts >= 99% of its user stacks at _start or __libc_start_main/__libc_start_call_main', (t) => {
    if (!requireRecorder(t)) return;
    const user = rec.samples.filter((s) => fixtureFrames(rec.view, s.frames).length > 0);
    const inPlt = user.filter((s) => s.frames.at(-1).name.endsWith('@plt'));
    const good = user.filter((s) => /^(_start|__libc_start_main\w*|__libc_start_call_main)$/.test(s.frames[0].name));
    const goodInPlt = inPlt.filter((s) => good.includes(s));
    metrics.outermostStart = good.length / user.length;
    t.diagnostic(`outermost frame ok in ${pct(metrics.outermostStart)} of ${user.length} samples; ` +
                 `${goodInPlt.length} of the ${inPlt.length} with a PLT slot as leaf`);
    assert.ok(user.length > 100 && metrics.outermostStart >= 0.99, pct(metrics.outermostStart));
    assert.ok(inPlt.length > 0, 'no sample in a PLT slot');
    // A PLT slot's CFA is computed from rip: without it the unwinder stops in the slot.
    assert.ok(goodInPlt.length >= 0.9 * inPlt.length, `${goodInPlt.length} of ${inPlt.length} PLT-leaf stacks complete`);
  });

  it('groups each static function under one fn_0xSTART with the FDE as nativeSymbol', (t) => {
    if (!requireRecorder(t)) return;
    const namesByFunction = new Map();
    const symbolsByFunction = new Map();
    let hotSamples = 0;
    const hot = functions.find((f) => f.name === 'hot_mix');
    assert.ok(hot, 'hot_mix not in the unstripped copy');
    for (const s of rec.samples) {
      for (const f of fixtureFrames(rec.view, s.frames)) {
        const owner = functions.find((fn) => f.address >= fn.start && f.address < fn.end);
        if (!owner || !f.name.startsWith('fn_0x')) continue;
        assert.equal(parseInt(f.name.slice(5), 16), owner.start, `${f.name} at ${f.address.toString(16)} is in ${owner.name}`);
        (namesByFunction.get(owner.name) ?? namesByFunction.set(owner.name, new Set()).get(owner.name)).add(f.name);
        (symbolsByFunction.get(owner.name) ?? symbolsByFunction.set(owner.name, new Set()).get(owner.name)).add(f.symbol);
      }
      const leaf = fixtureFrames(rec.view, s.frames).at(-1);
      if (leaf && leaf.address >= hot.start && leaf.address < hot.end) hotSamples += s.weight;
    }
    t.diagnostic(`grouped: ${[...namesByFunction].map(([k, v]) => `${k} -> ${[...v]}`).join(', ')}; hot_mix ${hotSamples} samples`);
    metrics.hotMixSamples = hotSamples;
    assert.ok(hotSamples > 50, `only ${hotSamples} samples in hot_mix`);
    for (const name of ['hot_mix', 'spin_until']) {
      assert.equal(namesByFunction.get(name)?.size, 1, `${name}: ${[...(namesByFunction.get(name) ?? [])]}`);
      assert.equal(symbolsByFunction.get(name)?.size, 1, `${name}: one nativeSymbol`);
    }
    const hotSymbol = [...symbolsByFunction.get('hot_mix')][0];
    const nativeSymbols = rec.profile.shared.nativeSymbols;
    assert.equal(nativeSymbols.address[hotSymbol], hot.start);
    assert.equal(nativeSymbols.functionSize[hotSymbol], hot.end - hot.start);
  });

  it('profiler-cli loads it', async (t) => {
    if (!requireRecorder(t)) return;
    await checkWithProfilerCli(t, rec.file, rec.view);
    saveMetrics('stripped_names', metrics);
  });
});
