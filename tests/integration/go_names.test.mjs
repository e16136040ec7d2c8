// Go programs named from Go's own tables (symbols/go/pclntab): the stripped go_cpu fixture
// (tests/fixtures/go: -ldflags="-s -w", no .symtab, no DWARF) and esbuild's npm binary (built
// by a current Go release, stripped). Their code has Go's function names at the leaf, inlined
// calls as inline frames with file and line, and never the ELF entry symbol _start stretched
// over Go's text.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';

import {
  INTEGRATION_DIR, ProfileView, checkWithProfilerCli, fixturePath, frameLib, funcSourceFile, pct,
  recordFixture, recordWith, recorderUnavailableReason, requireRecorder, saveMetrics, weightOf,
} from './lib/harness.mjs';

const DURATION_MS = 3000;
const FIXTURE = 'go/go_cpu_stripped';
const ESBUILD = join(INTEGRATION_DIR, 'node_modules', '@esbuild', 'linux-x64', 'bin', 'esbuild');

// A name made from an address or the ELF entry point, not one of Go's table: Go's names are
// package path, dot, function (main.mix, crypto/sha256.block), or an assembly routine's own
// (aeshashbody, memeqbody), as go tool pprof shows them.
const UNNAMED = /^(_start|fn_0x[0-9a-f]+|0x[0-9a-f]+|)$|\+0x[0-9a-f]+$/;
const isGoName = (name) => !UNNAMED.test(name);

// Each sample's user frames of library `lib` (outermost first) and its weight.
function samplesIn(view, lib) {
  const out = [];
  for (const thread of view.threads) {
    for (const s of view.samples(thread)) {
      const own = s.frames.filter((f) => frameLib(view, f.frame)?.name === lib);
      if (own.length) out.push({ own, weight: s.weight, frames: s.frames });
    }
  }
  return out;
}

// The leaf frame of the library: the last of its frames (kernel frames come after it).
const leafName = (s) => s.own.at(-1).name;

describe('a stripped Go program (go_cpu_stripped)', () => {
  let rec;
  let samples;
  const metrics = {};
  before(async () => {
    if (recorderUnavailableReason() || !existsSync(fixturePath(FIXTURE))) return;
    rec = await recordFixture(FIXTURE, DURATION_MS, { label: 'go_cpu_stripped' });
    rec.view = new ProfileView(rec.profile);
    samples = samplesIn(rec.view, 'go_cpu_stripped');
  });

  it('names its code with Go function names at the leaf, never _start', (t) => {
    if (!requireRecorder(t)) return;
    if (!rec) return t.skip('no Go fixture (go not installed)');
    const total = weightOf(samples);
    const named = weightOf(samples, (s) => isGoName(leafName(s)));
    const start = weightOf(samples, (s) => s.own.some((f) => f.name === '_start'));
    metrics.namedLeafShare = named / total;
    const leaves = new Map();
    for (const s of samples) leaves.set(leafName(s), (leaves.get(leafName(s)) ?? 0) + s.weight);
    t.diagnostic(`${total} samples in go_cpu_stripped; Go-named leaf ${pct(metrics.namedLeafShare)}; ` +
                 `top leaves: ${[...leaves].sort((a, b) => b[1] - a[1]).slice(0, 8)
                   .map(([n, w]) => `${n} ${pct(w / total)}`).join(', ')}`);
    assert.ok(total > 500, `only ${total} samples`);
    assert.ok(metrics.namedLeafShare >= 0.99, pct(metrics.namedLeafShare));
    assert.equal(start, 0, `${start} samples with _start`);
  });

  // The three goroutines' work at the leaf: SHA-256 blocks, JSON (encoding/json, reflect,
  // strconv, the allocator it calls), sorting (sort, the less function, the inlined mix).
  it('shows each goroutine\'s work at the leaf in its share', (t) => {
    if (!requireRecorder(t) || !rec) return;
    const total = weightOf(samples);
    const share = (re) => weightOf(samples, (s) => re.test(leafName(s))) / total;
    metrics.sha256 = share(/^crypto\/sha256\./);
    metrics.json = share(/^(encoding\/json|reflect|strconv|unicode\/utf8|bytes)\./);
    metrics.sort = share(/^(sort\.|main\.sortWork|main\.mix$|main\.spinInlined$)/);
    t.diagnostic(`leaf shares: sha256 ${pct(metrics.sha256)}, json ${pct(metrics.json)}, sort ${pct(metrics.sort)}`);
    assert.ok(metrics.sha256 >= 0.1, `sha256 ${pct(metrics.sha256)}`);
    assert.ok(metrics.json >= 0.05, `json ${pct(metrics.json)}`);
    assert.ok(metrics.sort >= 0.05, `sort ${pct(metrics.sort)}`);
  });

  it('shows the inlined mix as an inline frame of spinInlined, with file and line', (t) => {
    if (!requireRecorder(t) || !rec) return;
    const view = rec.view;
    const inMix = samples.filter((s) => s.own.at(-1).name === 'main.mix');
    metrics.mixSamples = weightOf(inMix);
    t.diagnostic(`${metrics.mixSamples} samples with main.mix at the leaf`);
    assert.ok(inMix.length > 0, 'no sample in main.mix');
    for (const s of inMix) {
      const [caller, mix] = s.own.slice(-2);
      assert.equal(caller.name, 'main.spinInlined');
      assert.equal(mix.inlineDepth, caller.inlineDepth + 1);
      assert.equal(view.frameTable.address[mix.frame], view.frameTable.address[caller.frame]);
      assert.match(funcSourceFile(view, mix.func) ?? '', /tests\/fixtures\/go\/main\.go$/);
      assert.ok(view.frameTable.line?.[mix.frame] > 0, 'main.mix frame without a line');
    }
  });

  it('profiler-cli loads it', async (t) => {
    if (!requireRecorder(t) || !rec) return;
    await checkWithProfilerCli(t, rec.file, rec.view);
    saveMetrics('go_names', metrics);
  });
});

// esbuild bundling a generated program: Go 1.2x's table format (0xfffffff1).
describe('esbuild, a Go binary of a current release, stripped', () => {
  let rec;
  let samples;
  const metrics = {};
  before(async () => {
    if (recorderUnavailableReason() || !existsSync(ESBUILD)) return;
    const dir = mkdtempSync(join(tmpdir(), 'bpfprof-esbuild-'));
    const modules = [];
    for (let i = 0; i < 400; i++) {
      const body = Array.from({ length: 40 }, (_, j) =>
        `export function f${i}_${j}(a, b) { const o = { k: a + ${j}, s: \`v\${b}\` }; return o.k * ${i} + o.s.length; }`);
      writeFileSync(join(dir, `m${i}.js`), body.join('\n'));
      modules.push(`import * as m${i} from './m${i}.js'; console.log(m${i}.f${i}_0(1, 2));`);
    }
    writeFileSync(join(dir, 'entry.js'), modules.join('\n'));
    // Rebuilt over and over for a few seconds, so that the profile holds thousands of samples.
    const script = `for i in $(seq 30); do ${ESBUILD} ${join(dir, 'entry.js')} --bundle --minify ` +
                   `--outfile=${join(dir, 'out.js')} --log-level=error || exit 1; done`;
    try {
      rec = await recordWith('go_names_esbuild', ['--', 'sh', '-c', script]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    samples = samplesIn(rec.view, 'esbuild');
  });

  it('names esbuild\'s code with Go function names at the leaf, never _start', (t) => {
    if (!requireRecorder(t)) return;
    if (!rec) return t.skip('no esbuild (npm install in tests/integration)');
    const total = weightOf(samples);
    const named = weightOf(samples, (s) => isGoName(leafName(s)));
    const start = weightOf(samples, (s) => s.own.some((f) => f.name === '_start'));
    const inlined = weightOf(samples, (s) => s.own.at(-1).inlineDepth > 0);
    metrics.namedLeafShare = named / total;
    metrics.inlinedLeafShare = inlined / total;
    const unnamed = new Map();
    for (const s of samples.filter((x) => !isGoName(leafName(x))))
      unnamed.set(leafName(s), (unnamed.get(leafName(s)) ?? 0) + s.weight);
    t.diagnostic(`${total} samples in esbuild; Go-named leaf ${pct(metrics.namedLeafShare)}, ` +
                 `inlined leaf ${pct(metrics.inlinedLeafShare)}; not named: ` +
                 `${[...unnamed].sort((a, b) => b[1] - a[1]).slice(0, 8).map(([n, w]) => `${n} ${w}`).join(', ')}`);
    assert.ok(total > 300, `only ${total} samples`);
    assert.ok(metrics.namedLeafShare >= 0.99, pct(metrics.namedLeafShare));
    assert.ok(metrics.inlinedLeafShare > 0.01, `inlined ${pct(metrics.inlinedLeafShare)}`);
    assert.equal(start, 0, `${start} samples with _start`);
    assert.ok(samples.some((s) => s.own.some((f) => f.name.startsWith('github.com/evanw/esbuild/'))));
    saveMetrics('go_names_esbuild', metrics);
  });
});
