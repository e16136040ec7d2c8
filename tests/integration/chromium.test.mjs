// Headless Chromium (Debian's, stripped: no V8 metadata, no CFI for V8's code) rendering a local
// page whose JavaScript draws on a canvas and sorts with a comparator for a few seconds.
// - As a user would run it (not root: its sandbox on, renderers in their own pid and mount
//   namespaces): complete stacks, walked in the kernel through V8's JIT code and builtins, a
//   few hundred ring-buffer bytes a sample, every process under its host pid, the renderer's
//   libc frames named through its own root.
// - With --js-flags=--perf-basic-prof (which V8 can write only without the sandbox): the page's
//   JavaScript functions named from the renderer's perf map, nested as the page calls them.
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  IS_CI, STATE_FRAMES, pct, perfMapsNow, recordWith, recorderUnavailableReason, removePerfMapsSince,
  requireRecorder, saveMetrics, weightOf,
} from './lib/harness.mjs';
import { isRootName, recordingFigures } from './lib/stack_quality.mjs';

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find(existsSync);
const PAGE_MS = 1500;
const PAGE = `<!doctype html><html><body><canvas id="c" width="400" height="300"></canvas><script>
function shade(ctx, t) {
  for (let i = 0; i < 200; i++) {
    ctx.fillStyle = 'hsl(' + ((i * 7 + t) % 360) + ',50%,50%)';
    ctx.fillRect((i * 13) % 400, (i * 29) % 300, 20, 20);
  }
}
function byKey(x, y) { return x.k - y.k; }
function sortRound(n) {
  const a = [];
  for (let i = 0; i < n; i++) a.push({ k: (i * 2654435761) % 1000 });
  a.sort(byKey);
  return a[0].k;
}
const ctx = document.getElementById('c').getContext('2d');
const end = Date.now() + ${PAGE_MS};
let t = 0;
while (Date.now() < end) { shade(ctx, t++); sortRound(2000); document.title = String(t); }
</script></body></html>
`;

// A missing chromium fails under CI=true (scripts/install-deps.sh --browser installs it)
// and skips elsewhere.
function requireChromium(t) {
  if (CHROMIUM) return true;
  if (IS_CI) assert.fail('chromium missing under CI=true: scripts/install-deps.sh --browser');
  t.skip('chromium missing: apt-get install chromium');
  return false;
}

const isState = (f) => STATE_FRAMES.has(f.name);
const isHex = (name) => /^0x[0-9a-f]+$/.test(name);

// The most frequent stacks of `samples` (root first, one line each) with their counts.
function stackCounts(samples, names, limit) {
  const counts = new Map();
  for (const s of samples) {
    const key = names(s).join(' > ');
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].sort((a, b) => b[1] - a[1]).slice(0, limit).map(([k, n]) => `${n}x ${k}`).join('\n    ');
}

// The on-CPU samples of each chromium process (by pid), each with its user frames.
// The processes of a `Stack copies by process` line ("pid 812 9,684, pid 790 12 (of 5
// processes)"), each with some of its threads' names: which of chromium's processes (a
// renderer's CrRendererMain, the GPU process's VizCompositorThread) the walks fell back for.
function copiesByProcess(view, line) {
  if (!line) return 'none';
  const pids = [...line.matchAll(/pid (\d+)/g)].map((m) => Number(m[1]));
  const threads = (pid) => view.threads.filter((th) => th.pid === pid || Number(String(th.pid).split('.')[0]) === pid)
    .map((th) => th.name).slice(0, 4).join(' ');
  return `${line}; ${pids.map((pid) => `${pid}: ${threads(pid) || '(no thread)'}`).join('; ')}`;
}

function chromiumProcesses(view) {
  const byPid = new Map();
  for (const thread of view.threads) {
    if (thread.processName !== 'chromium') continue;
    for (const s of view.samples(thread)) {
      if (!s.frames.length || isState(s.frames.at(-1))) continue;
      const user = s.frames.filter((f) => f.category !== 'Kernel');
      if (!user.length) continue;
      const list = byPid.get(String(thread.pid)) ?? [];
      list.push({ ...s, user });
      byPid.set(String(thread.pid), list);
    }
  }
  return byPid;
}

// The renderer: the process that ran the page's JavaScript (its JIT code, hex without a perf
// map, or named from it), the one with most such samples.
function renderer(byPid, inJs) {
  let best = null;
  for (const [pid, samples] of byPid) {
    const js = weightOf(samples, (s) => s.user.some(inJs));
    if (!best || js > best.js) best = { pid, samples, js };
  }
  return best;
}

async function recordChromium(label, dir, { sandboxed, flags = [] }) {
  const args = ['--headless', '--disable-gpu', '--no-first-run', '--disable-crash-reporter',
    `--user-data-dir=${join(dir, 'profile')}`, ...flags, '--dump-dom', `file://${join(dir, 'page.html')}`];
  const command = sandboxed
    ? ['runuser', '-u', 'nobody', '--', 'env', `HOME=${dir}`, CHROMIUM, ...args]
    : [CHROMIUM, '--no-sandbox', ...args];
  return recordWith(label, ['--', ...command], { timeoutMs: 120_000 });
}

describe('chromium rendering a page', () => {
  let dir;
  let sandboxed;
  let perfMap;
  before(async () => {
    if (recorderUnavailableReason() || !CHROMIUM) return;
    dir = mkdtempSync(join(tmpdir(), 'bpfprof-chromium-'));
    chmodSync(dir, 0o777);  // the sandboxed run's user (nobody) writes its profile directory there
    writeFileSync(join(dir, 'page.html'), PAGE, { mode: 0o644 });
    sandboxed = await recordChromium('chromium_sandboxed', dir, { sandboxed: true });
    rmSync(join(dir, 'profile'), { recursive: true, force: true });
    const maps = perfMapsNow();
    perfMap = await recordChromium('chromium_perf_map', dir,
                                   { sandboxed: false, flags: [`--js-flags=--perf-basic-prof --no-logfile-per-isolate --logfile=${join(dir, 'v8.log')}`] });
    removePerfMapsSince(maps);
  });
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('sandboxed: complete, walked in the kernel, host pids, the renderer\'s libc named', (t) => {
    if (!requireRecorder(t) || !requireChromium(t)) return;
    const f = recordingFigures(sandboxed);
    const byPid = chromiumProcesses(sandboxed.view);
    const all = [...byPid.values()].flat();
    const rooted = weightOf(all, (s) => s.frames[0].category !== 'Kernel' && isRootName(s.frames[0].name));
    const page = renderer(byPid, (fr) => isHex(fr.name));
    const named = (s) => s.user.some((fr) => /^__(libc|memcpy|memset|GI_)/.test(fr.name));
    const metrics = {
      processes: byPid.size, samples: weightOf(all), rootShare: rooted / (weightOf(all) || 1), ...f,
      rendererPid: page?.pid, rendererSamples: page ? weightOf(page.samples) : 0,
      rendererLibcNamed: page ? weightOf(page.samples, named) : 0,
    };
    saveMetrics('chromium_sandboxed', metrics);
    t.diagnostic(`chromium, sandboxed: ${byPid.size} processes, ${Math.round(metrics.samples)} on-CPU samples, ` +
                 `reach a root ${pct(metrics.rootShare)}; summary: complete ${pct(f.printedComplete)}, walked in ` +
                 `the kernel ${pct(f.kernelShare)}, ${f.ringBytes} bytes a sample; fell back: ${f.fellBack}; ` +
                 `stack copies: ${copiesByProcess(sandboxed.view, f.copiesByProcess)}; ` +
                 `renderer ${page?.pid}: ${Math.round(metrics.rendererSamples)} samples, ` +
                 `${Math.round(metrics.rendererLibcNamed)} with a named libc frame`);
    assert.ok(metrics.samples >= 1000, `only ${metrics.samples} on-CPU samples of chromium`);
    assert.ok(f.printedComplete >= 0.95 && Math.abs(f.printedComplete - f.storedComplete) <= 0.0005,
              `complete: printed ${pct(f.printedComplete)}, stored ${pct(f.storedComplete)}`);
    assert.ok(metrics.rootShare >= 0.95, `${pct(metrics.rootShare)} of chromium's stacks reach a root`);
    assert.ok(f.kernelShare >= 0.9 && f.kernelShare === f.kernelShareMeta, `walked in the kernel: ${pct(f.kernelShare)}`);
    assert.ok(f.ringBytes > 0 && f.ringBytes <= 2048 && f.ringBytes === f.ringBytesMeta, `${f.ringBytes} bytes a sample`);
    // Host pids: a renderer sees itself as a small pid in its namespace.
    assert.ok(byPid.size >= 3 && [...byPid.keys()].every((pid) => Number(pid.split('.')[0]) > 100),
              `chromium pids: ${[...byPid.keys()].join(', ')}`);
    assert.ok(page && page.js >= 100, `no renderer running JIT code (${page?.js ?? 0} samples)`);
    assert.ok(metrics.rendererLibcNamed >= 10, `${metrics.rendererLibcNamed} renderer samples with a named libc frame`);
  });

  it('with a perf map (no sandbox): the page\'s functions named and nested', (t) => {
    if (!requireRecorder(t) || !requireChromium(t)) return;
    const f = recordingFigures(perfMap);
    const ofPage = (fr) => fr.name.includes('page.html');
    const page = renderer(chromiumProcesses(perfMap.view), ofPage);
    assert.ok(page, 'no chromium process');
    const names = (s) => s.user.map((fr) => fr.name);
    // `JS:<tier marks>name file:line:col`: * optimized, + Maglev, ^ baseline, ~ interpreted; `o`
    // before them for code entered by on-stack replacement (a busy machine tiers up mid-loop).
    const at = (s, fn) => names(s).findIndex((n) => new RegExp(`^JS:o?[^A-Za-z_$]*${fn} `).test(n));
    // byKey's caller in the page: sortRound, or the top level (page.html:1) where V8's optimizing
    // compiler inlined sortRound into the loop's on-stack-replaced code.
    const pageCaller = (s) => names(s).slice(0, at(s, 'byKey')).findLast((n) => n.includes('page.html'));
    const inSort = page.samples.filter((s) => at(s, 'byKey') >= 0);
    const sortNested = inSort.filter((s) => at(s, 'sortRound') >= 0 ? at(s, 'sortRound') < at(s, 'byKey')
      : /page\.html:1:/.test(pageCaller(s) ?? ''));
    const inShade = page.samples.filter((s) => at(s, 'shade') >= 0);
    const jsFrames = page.samples.flatMap((s) => s.user).filter((fr) => ofPage(fr) || isHex(fr.name));
    const hex = jsFrames.filter((fr) => isHex(fr.name));
    const metrics = {
      rendererSamples: weightOf(page.samples), pageShare: page.js / (weightOf(page.samples) || 1),
      byKeySamples: weightOf(inSort), byKeyUnderSortRound: weightOf(sortNested) / (weightOf(inSort) || 1),
      shadeSamples: weightOf(inShade), hexJsFrames: hex.length / (jsFrames.length || 1), ...f,
    };
    saveMetrics('chromium_perf_map', metrics);
    t.diagnostic(`chromium with a perf map: renderer ${page.pid}, ${Math.round(metrics.rendererSamples)} samples, ` +
                 `${pct(metrics.pageShare)} in page.html's functions; byKey ${Math.round(metrics.byKeySamples)}, ` +
                 `${pct(metrics.byKeyUnderSortRound)} under sortRound (or the top level it was inlined into); shade ${Math.round(metrics.shadeSamples)}; ` +
                 `JS frames unnamed ${pct(metrics.hexJsFrames)}; walked in the kernel ${pct(f.kernelShare)}; ` +
                 `fell back: ${f.fellBack}; stack copies: ${copiesByProcess(perfMap.view, f.copiesByProcess)}`);
    assert.ok(metrics.pageShare >= 0.3, `page.html's functions in ${pct(metrics.pageShare)} of the renderer's samples`);
    const unnested = inSort.filter((s) => !sortNested.includes(s));
    assert.ok(metrics.byKeySamples >= 10 && metrics.byKeyUnderSortRound >= 0.9,
              `byKey ${metrics.byKeySamples} samples, ${pct(metrics.byKeyUnderSortRound)} under sortRound; ` +
              `not under it (top 5):\n    ${stackCounts(unnested, names, 5)}`);
    assert.ok(metrics.shadeSamples >= 10, `shade in ${metrics.shadeSamples} samples`);
    assert.ok(metrics.hexJsFrames <= 0.02, `${pct(metrics.hexJsFrames)} of JS frames unnamed`);
    assert.ok(f.kernelShare >= 0.9, `walked in the kernel: ${pct(f.kernelShare)}`);
  });
});
