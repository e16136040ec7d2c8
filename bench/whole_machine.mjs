// bench/whole_machine.sh's worker: the whole-machine mix (clang++ compiling a file of
// LLVM and standard C++ headers in a loop, headless Chromium running a JavaScript loop in a
// local page, a JVM on tests/fixtures/java fixture.Work, node on tests/fixtures/js/work.js,
// the go_cpu fixture) recorded with `bpfprof record -a -d 9 -F 1000 -v` three times: with an
// empty table cache (cold), then twice with the cache the runs before filled (a run stores
// the tables it finished building: the third finds them all); then `perf record -a -g` over
// the same mix for its CPU and bytes. Prints the table.
// Every figure is the summary's (-v) and is checked against the profile's meta.extra and,
// for completeness, against the profile's stacks.
//
//   node bench/whole_machine.mjs --bpfprof BIN --fixtures DIR [--seconds 9] [--keep DIR]
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { readProfile } from '../tests/integration/lib/harness.mjs';
import { printedCompleteness, profileStackQuality, storedCompleteness } from '../tests/integration/lib/stack_quality.mjs';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const BPFPROF = resolve(opt('--bpfprof', 'build/bpfprof'));
const FIXTURES = resolve(opt('--fixtures', 'build/tests/fixtures'));
const SECONDS = Number(opt('--seconds', '9'));
const keep = opt('--keep', null);
const work = keep ?? mkdtempSync(join(tmpdir(), 'bpfprof-whole-machine-'));
mkdirSync(work, { recursive: true });
const WARMUP_MS = 2000;  // the mix runs before the recording starts: -a finds it running
const LLVM_INCLUDES = ['-I/usr/include/llvm-14', '-I/usr/include/llvm-c-14'];
const CLANG = existsSync('/usr/bin/clang++-14') ? '/usr/bin/clang++-14' : 'clang++';
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find(existsSync);
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

function sourceFiles() {
  const cpp = join(work, 'llvm_user.cpp');
  writeFileSync(cpp, [
    '#include <llvm/IR/IRBuilder.h>', '#include <llvm/IR/LegacyPassManager.h>',
    '#include <llvm/IR/PassManager.h>', '#include <llvm/Analysis/LoopInfo.h>',
    '#include <llvm/Transforms/Utils/Cloning.h>', '#include <llvm/ADT/DenseMap.h>',
    '#include <regex>', '#include <map>', '#include <iostream>', '#include <algorithm>',
    'int count_blocks(llvm::Function& f) { llvm::DenseMap<llvm::BasicBlock*, int> m;',
    '  for (auto& b : f) m[&b] = static_cast<int>(b.size());',
    '  std::map<std::string, int> names; for (auto& b : f) names[b.getName().str()] += m[&b];',
    '  return static_cast<int>(names.size()); }',
    'int main() { llvm::LLVMContext c; llvm::Module mod("m", c); std::regex r("a+b");',
    '  std::cout << std::regex_match("aab", r) << "\\n"; return 0; }', ''].join('\n'));
  const page = join(work, 'page.html');
  const ms = WARMUP_MS + SECONDS * 1000 + 3000;
  writeFileSync(page, `<!doctype html><html><body><canvas id="c" width="400" height="300"></canvas><script>
function shade(ctx, t) { for (let i = 0; i < 200; i++) { ctx.fillStyle = 'hsl(' + ((i * 7 + t) % 360) + ',50%,50%)';
  ctx.fillRect((i * 13) % 400, (i * 29) % 300, 20, 20); } }
function sortRound(n) { const a = []; for (let i = 0; i < n; i++) a.push({ k: (i * 2654435761) % 1000 });
  a.sort((x, y) => x.k - y.k); return a[0].k; }
const ctx = document.getElementById('c').getContext('2d'); const end = Date.now() + ${ms}; let t = 0;
while (Date.now() < end) { shade(ctx, t++); sortRound(2000); document.title = String(t); }
</script></body></html>\n`);
  return { cpp, page };
}

// The mix, each program started now and running until `ms` from now.
function startMix(ms, files) {
  const children = [];
  const start = (name, cmd, argv) => {
    const child = spawn(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', (e) => { stderr += String(e); });
    const done = new Promise((r) => child.on('close', (code) => r({ name, code, stderr })));
    children.push({ name, child, done });
  };
  const until = `$(( $(date +%s%N) / 1000000 + ${ms} ))`;
  start('clang++', 'bash', ['-c', `end=${until}; while [ $(( $(date +%s%N) / 1000000 )) -lt $end ]; do ` +
        `${CLANG} -std=c++17 -O1 ${LLVM_INCLUDES.join(' ')} -c ${files.cpp} -o /dev/null || exit 1; done`]);
  if (CHROMIUM)
    start('chromium', CHROMIUM, ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
                                 `--user-data-dir=${join(work, 'chromium-profile')}`, '--dump-dom',
                                 `file://${files.page}`]);
  start('java', '/usr/bin/java', ['-cp', join(FIXTURES, 'java', 'classes'), 'fixture.Work', String(ms)]);
  start('node', 'node', [resolve('tests/fixtures/js/work.js'), String(ms)]);
  start('go_cpu', join(FIXTURES, 'go', 'go_cpu'), [String(ms)]);
  return children;
}

async function stopMix(children) {
  for (const c of children) if (c.child.exitCode === null) c.child.kill('SIGTERM');
  return Promise.all(children.map((c) => c.done));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// utime + stime of a process, in ms; undefined once it is gone.
function cpuMs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 1000 / CLK_TCK;
  } catch {
    return undefined;
  }
}

function summaryLine(stderr, label) {
  return new RegExp(`^bpfprof: ${label}: (.*)$`, 'm').exec(stderr)?.[1];
}
function metaEntry(profile, label) {
  const section = (profile.meta?.extra ?? []).find((x) => x.label === 'bpfprof');
  return section?.entries?.find((e) => e.label === label)?.value;
}

// One `record -a` over the mix with the table cache in `cacheDir`.
async function recordMix(label, cacheDir, files) {
  const out = join(work, `${label}.json.gz`);
  rmSync(out, { force: true });
  const mix = startMix(WARMUP_MS + SECONDS * 1000 + 1500, files);
  await sleep(WARMUP_MS);
  const recorder = spawn(BPFPROF, ['record', '-v', '-a', '-d', String(SECONDS), '-F', '1000', '-o', out],
                         { env: { ...process.env, BPFPROF_CACHE_DIR: cacheDir }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  recorder.stderr.on('data', (d) => { stderr += d; });
  let lastCpu;
  const poll = setInterval(() => { lastCpu = cpuMs(recorder.pid) ?? lastCpu; }, 100);
  const code = await new Promise((r) => recorder.on('close', r));
  clearInterval(poll);
  const exits = await stopMix(mix);
  writeFileSync(join(work, `${label}.stderr`), stderr);
  if (code !== 0) throw new Error(`${label}: bpfprof exited ${code}\n${stderr}`);
  for (const e of exits) if (e.code && e.code !== 143 && e.code !== null) console.error(`${e.name} exited ${e.code}: ${e.stderr.slice(-400)}`);
  return { label, out, stderr, lastCpu, profile: readProfile(out) };
}

function figures(rec) {
  const { stderr, profile } = rec;
  const num = (text, re) => (text === undefined ? undefined : Number(re.exec(String(text))?.[1]?.replace(/,/g, '')));
  const kernel = summaryLine(stderr, 'User stacks unwound in the kernel');
  const tables = summaryLine(stderr, 'Unwind tables') ?? '';
  const t = /^(\d+) built, (\d+) from cache, (\d+) unreadable \(([\d.]+) ms(?: of CPU)?\); (\d+) of (\d+) rows in use(?: \(room for \d+ at most\))?, (\d+) tables evicted for space; ([\d.]+) MB of BPF maps/.exec(tables) ?? [];
  const own = /its own CPU time: (\d+) ms while recording \(([\d.]+)% of one CPU\)/.exec(stderr) ?? [];
  const quality = profileStackQuality(profile);
  const f = {
    kernelShare: num(kernel, /^([\d.]+)%/),
    kernelSettled: num(kernel, /; ([\d.]+)% after the first second/),
    kernelMeta: num(metaEntry(profile, 'User stacks unwound in the kernel'), /^([\d.]+)%/),
    ringBytes: num(summaryLine(stderr, 'Ring-buffer traffic'), /^(\d+) bytes per sample/),
    ringBytesMeta: num(metaEntry(profile, 'Ring-buffer traffic'), /^(\d+) bytes per sample/),
    ownCpuShare: Number(own[2]),
    ownCpuMs: Number(own[1]),
    polledCpuMs: rec.lastCpu,
    complete: 100 * printedCompleteness(stderr),
    completeMeta: 100 * storedCompleteness(profile),
    // A stack that reaches no thread root begins with [truncated] (docs/guarantees.md).
    completeStacks: quality?.overall ? 100 * (1 - quality.overall.truncatedShare) : undefined,
    built: Number(t[1]), fromCache: Number(t[2]), tableMs: Number(t[4]),
    rows: Number(t[5]), rowCapacity: Number(t[6]), evicted: Number(t[7]), mapMb: Number(t[8]),
    samples: Number(/bpfprof: (\d+) samples \(/.exec(stderr)?.[1]),
    lost: Number(/; (\d+) events lost/.exec(stderr)?.[1]),
    bounds: summaryLine(stderr, 'Unwind bounds hit') ?? 'none',
    fallbacks: summaryLine(stderr, 'Kernel walks that fell back') ?? '',
    skipped: summaryLine(stderr, 'Unwind tables skipped') ?? 'none',
  };
  const checks = [];
  if (f.kernelMeta !== f.kernelShare) checks.push(`kernel share: summary ${f.kernelShare}%, meta.extra ${f.kernelMeta}%`);
  if (f.ringBytes !== f.ringBytesMeta) checks.push(`ring bytes: summary ${f.ringBytes}, meta.extra ${f.ringBytesMeta}`);
  if (Math.abs(f.complete - f.completeMeta) > 0.05) checks.push(`complete: summary ${f.complete}%, meta.extra ${f.completeMeta}%`);
  if (f.completeStacks !== undefined && Math.abs(f.completeStacks - f.complete) > 0.1)
    checks.push(`complete: summary ${f.complete}%, the profile's stacks ${f.completeStacks.toFixed(1)}%`);
  if (f.polledCpuMs !== undefined && f.polledCpuMs + 50 < f.ownCpuMs)
    checks.push(`own CPU: summary ${f.ownCpuMs} ms while recording, /proc/PID/stat ${f.polledCpuMs} ms in all`);
  return { ...f, checks };
}

// perf record -a -g over the same mix: its CPU (the shell's children's times) and bytes.
async function perfMix(files) {
  if (spawnSync('sh', ['-c', 'command -v perf']).status !== 0) return null;
  const data = join(work, 'perf.data');
  const mix = startMix(WARMUP_MS + SECONDS * 1000 + 1500, files);
  await sleep(WARMUP_MS);
  const r = spawnSync('bash', ['-c', `perf record -a -g -e cpu-clock -F 1000 -o ${data} -- sleep ${SECONDS} 2>&1; ` +
                      'read -a s < /proc/$$/stat; echo "children ticks ${s[15]} ${s[16]}"'], { encoding: 'utf8' });
  await stopMix(mix);
  const ticks = /children ticks (\d+) (\d+)/.exec(r.stdout);
  const stats = spawnSync('perf', ['report', '-i', data, '--stats'], { encoding: 'utf8' }).stdout ?? '';
  const samples = Number(/SAMPLE events:\s+(\d+)/.exec(stats)?.[1]);
  const bytes = existsSync(data) ? statSync(data).size : 0;
  rmSync(data, { force: true });
  return { cpuShare: ticks ? 100 * (Number(ticks[1]) + Number(ticks[2])) / CLK_TCK / SECONDS : undefined,
           samples, bytesPerSample: samples ? Math.round(bytes / samples) : undefined };
}

const files = sourceFiles();
const cacheDir = join(work, 'cache');
rmSync(cacheDir, { recursive: true, force: true });
const runs = [];
for (const label of ['cold', 'second', 'third']) runs.push(figures(await recordMix(label, cacheDir, files)));
const perf = args.includes('--no-perf') ? null : await perfMix(files);
const pctText = (v) => (v === undefined || Number.isNaN(v) ? '?' : `${v.toFixed(1)}%`);
const n = (v) => (v === undefined || Number.isNaN(v) ? '?' : Math.round(v).toLocaleString('en-US'));
console.log(`mix: ${CLANG} on LLVM headers (loop), ${CHROMIUM ? 'headless chromium (JS loop)' : 'no chromium'}, java fixture.Work, node work.js, go_cpu; record -a -d ${SECONDS} -F 1000\n`);
const row = (figure, cell, perfCell = '', goal = '') =>
  console.log(`| ${figure} | ${runs.map(cell).join(' | ')} | ${perfCell} | ${goal} |`);
console.log('| figure | cold cache | second run | third run (cached) | perf record -a -g | goal |');
console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
row('user stacks walked in the kernel, after the first second', (f) => pctText(f.kernelSettled), '', '>= 95%');
row('user stacks walked in the kernel, all', (f) => pctText(f.kernelShare));
row('ring-buffer bytes per sample', (f) => n(f.ringBytes), perf ? `${n(perf.bytesPerSample)} (perf.data)` : '', '<= 2,048');
row("recorder's CPU while recording, of one CPU", (f) => pctText(f.ownCpuShare), perf ? pctText(perf.cpuShare) : '', '<= 5%');
row('user stacks complete', (f) => pctText(f.complete), '', '>= 97%');
row('events lost (of samples)', (f) => `${n(f.lost)} (of ${n(f.samples)})`, '', '0');
row('unwind rows in use (of capacity)', (f) => `${n(f.rows)} of ${n(f.rowCapacity)}`);
row('BPF map memory', (f) => `${f.mapMb} MB`, '', '<= 64 MB');
row('tables evicted for space', (f) => n(f.evicted), '', '0');
row('tables built / from cache (their CPU time)', (f) => `${f.built} / ${f.fromCache} (${n(f.tableMs)} ms)`);
console.log('');
runs.forEach((f, i) => {
  const name = ['cold', 'second', 'third'][i];
  console.log(`${name}: fell back: ${f.fallbacks}; bounds hit: ${f.bounds}; skipped: ${f.skipped}`);
  console.log(`${name}: complete in the profile's stacks ${pctText(f.completeStacks)}; recorder CPU by /proc/PID/stat ${n(f.polledCpuMs)} ms in all`);
  for (const check of f.checks) console.log(`${name}: MISMATCH ${check}`);
});
if (!keep) rmSync(work, { recursive: true, force: true });
