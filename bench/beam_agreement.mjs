// bpfprof and perf on the same Erlang program: tests/fixtures/erlang/work.erl run by
// Debian's OTP 25 with `+JPperf true` (frame pointers in Erlang code, and the perf map
// /tmp/perf-PID.map that names its JIT code for perf), recorded once with
// `perf record -g -F 999` (frame-pointer call graphs, named from the map by `perf script`) and
// once with `bpfprof record -F 999` (the BEAM reader: the code index, the process's stack).
// For the scheduler threads' on-CPU samples that hold Erlang code, each function's share of
// those samples, in stack (anywhere in the sample's Erlang frames) and innermost (the innermost
// Erlang function: its own time and the C it calls), for the top functions of either; then
// each worker process's share as work.erl traced its scheduling, as bpfprof's process labels
// give it, and as each profiler's samples of the worker's function give it. Markdown tables
// and the largest differences.
//
// Where they differ, perf is not the truth: its frame-pointer walk starts at the sample's
// registers, and in C code (light BIFs, eq, the NIF, GC: Debian builds beam.smp without frame
// pointers) it follows whatever the C code left in rbp: most such samples come with no Erlang
// frame at all (a third of perf's scheduler samples or fewer have one, here), some with a
// wrong chain. Its shares are of the samples it could walk: mostly those taken in JIT code.
//
// Needs root, perf (scripts/install-deps.sh --bench), erlang-base.
//   node bench/beam_agreement.mjs [--bpfprof build/bpfprof] [--ms 3000] [--top 12]
//                                 [--erl-args '+S 1' (the default; '' for the machine's)] [--keep DIR]
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { ProfileView, readProfile } from '../tests/integration/lib/profile_view.mjs';
import { PERF_SCRIPT_ARGS, parsePerfScript } from '../tests/integration/lib/stack_quality.mjs';
import {
  ERL, ERLC, beamSamples, erlangNames, isErlangFunction, isScheduler, processLabel, processName, tally,
} from '../tests/integration/lib/beam.mjs';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const BPFPROF = resolve(opt('--bpfprof', join(REPO, 'build', 'bpfprof')));
const MS = Number(opt('--ms', '3000'));
const TOP = Number(opt('--top', '12'));
// One scheduler by default: work.erl's trace measures the time each process is scheduled in,
// which compares with CPU time only when the processes share one scheduler thread (with two,
// a process alone on one is scheduled in all the time, CPU or not).
const ERL_ARGS = ['+JPperf', 'true', ...opt('--erl-args', '+S 1').split(/\s+/).filter(Boolean)];
const keep = opt('--keep', null);
const FREQUENCY = '999';
const PERF = '/usr/bin/perf';
const WORKERS = { chain: 'work:outer/1', zipper: 'work:digest/1', comparer: 'work:compare/1' };

function fail(message) {
  process.stderr.write(`beam_agreement: ${message}\n`);
  process.exit(1);
}
if (process.getuid() !== 0) fail('needs root');
for (const [what, path] of [['perf', PERF], ['erl', ERL], ['erlc', ERLC], ['bpfprof', BPFPROF]])
  if (!existsSync(path)) fail(`no ${what} at ${path}`);

const work = keep ?? mkdtempSync(join(tmpdir(), 'bpfprof-beam-bench-'));
mkdirSync(work, { recursive: true });

function runCommand(cmd, argv) {
  const r = spawnSync(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', maxBuffer: 1 << 30 });
  if (r.error) throw r.error;
  // Thrown, not exited: the perf maps made meanwhile are removed on the way out.
  if (r.status !== 0) throw new Error(`${cmd} ${argv.join(' ')}: exit ${r.status}\n${r.stderr.split('\n').slice(-5).join('\n')}`);
  return r;
}

const perfMaps = () => new Set(readdirSync('/tmp').filter((f) => /^perf-\d+\.map$/.test(f)));
const pct = (x) => `${(100 * x).toFixed(1)}%`;
const points = (x) => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(1)}`;

// work.erl's `process running name=NAME ns=NS` lines (its `trace` option).
function traced(stdout) {
  return new Map([...stdout.matchAll(/^process running name=(\S+) ns=(\d+)$/gm)].map((m) => [m[1], Number(m[2])]));
}

// A name from the perf map as the BEAM reader writes it, or null for what is no Erlang
// function (the JIT's shared fragments `$global::...`, module headers, erts_beamasm's frames).
function perfErlangName(sym) {
  const name = sym.replace(/^\$/, '').replace(/-CodeInfoPrologue$/, '');
  if (name.startsWith('global::') || name.includes('::codeHeader') || name.startsWith('erts_beamasm:')) return null;
  return name;
}

// The sample sets both profilers give: per scheduler sample, its Erlang function names (root
// first), and the worker it ran for (by bpfprof's label; perf: none).
function perfSamples(scriptText) {
  const out = [];
  for (const s of parsePerfScript(scriptText)) {
    if (!/^\d+_scheduler$/.test(s.comm)) continue;
    const names = s.frames.filter((f) => /\/perf-\d+\.map$/.test(f.dso)).map((f) => perfErlangName(f.sym))
      .filter(Boolean).reverse();
    // The leaf in an Erlang function's JIT code: where perf's frame-pointer walk is whole.
    const leaf = s.frames[0];
    const inJit = Boolean(leaf && /\/perf-\d+\.map$/.test(leaf.dso) && perfErlangName(leaf.sym));
    out.push({ names, worker: null, inJit });
  }
  return out;
}
function bpfprofSamples(profile) {
  return beamSamples(new ProfileView(profile), isScheduler)
    .map((s) => ({ names: erlangNames(s), worker: processName(processLabel(s.frames)), weight: s.weight,
                   inJit: isErlangFunction(s.frames.at(-1)) }));
}

function shares(samples) {
  const inStack = new Map();
  const innermost = new Map();
  let erlang = 0;
  let total = 0;
  for (const s of samples) {
    const w = s.weight ?? 1;
    total += w;
    if (!s.names.length) continue;
    erlang += w;
    for (const n of new Set(s.names)) tally(inStack, n, w);
    tally(innermost, s.names.at(-1), w);
  }
  const of = (m) => (n) => (m.get(n) ?? 0) / (erlang || 1);
  return { total, erlang, inStack: of(inStack), innermost: of(innermost), names: new Set(inStack.keys()) };
}

// Each worker's share among the three: by `pick(sample)` -> worker name or null.
function workerShares(samples, pick) {
  const counts = new Map(Object.keys(WORKERS).map((w) => [w, 0]));
  for (const s of samples) {
    const w = pick(s);
    if (counts.has(w)) counts.set(w, counts.get(w) + (s.weight ?? 1));
  }
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  return (w) => counts.get(w) / (total || 1);
}
const byFunction = (s) => Object.keys(WORKERS).find((w) => s.names.includes(WORKERS[w])) ?? null;

// ---------------------------------------------------------------------------------------

const ebin = join(work, 'ebin');
mkdirSync(ebin, { recursive: true });
runCommand(ERLC, ['-o', ebin, join(REPO, 'tests', 'fixtures', 'erlang', 'work.erl')]);
const command = [ERL, ...ERL_ARGS, '-noshell', '-pa', ebin, '-run', 'work', 'main', String(MS), 'trace'];

const mapsBefore = perfMaps();
let perfRun, perfText, bpfRun, profile;
try {
  const data = join(work, 'perf.data');
  perfRun = runCommand(PERF, ['record', '-q', '-g', '-F', FREQUENCY, '-o', data, '--', ...command]);
  // perf script reads the map now: before it is removed.
  perfText = runCommand(PERF, ['script', '-i', data, ...PERF_SCRIPT_ARGS]).stdout;
  const file = join(work, 'bpfprof.json.gz');
  bpfRun = runCommand(BPFPROF, ['record', '-F', FREQUENCY, '-o', file, '--', ...command]);
  profile = readProfile(file);
} finally {
  for (const f of perfMaps()) if (!mapsBefore.has(f)) rmSync(join('/tmp', f), { force: true });
  if (!keep) rmSync(work, { recursive: true, force: true });
}

const perf = perfSamples(perfText);
const ours = bpfprofSamples(profile);
const p = shares(perf);
const b = shares(ours);

console.log(`# work.erl under \`erl ${ERL_ARGS.join(' ')}\`, ${MS} ms, ${FREQUENCY} Hz\n`);
console.log(`Scheduler threads' on-CPU samples with Erlang functions: perf ${p.erlang} of ${p.total} ` +
            `(${pct(p.erlang / (p.total || 1))}), bpfprof ${Math.round(b.erlang)} of ${Math.round(b.total)} ` +
            `(${pct(b.erlang / (b.total || 1))}). Shares below are of those samples.\n`);

// One table of shares: each function's in stack and innermost, for the top functions.
function shareTable(p, b) {
  const rank = (n) => Math.max(p.inStack(n), b.inStack(n), p.innermost(n), b.innermost(n));
  const top = [...new Set([...p.names, ...b.names])].sort((x, y) => rank(y) - rank(x)).slice(0, TOP);
  console.log('| function | in stack: perf | bpfprof | difference | innermost: perf | bpfprof | difference |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  let largest = { diff: 0 };
  for (const n of top) {
    const dStack = b.inStack(n) - p.inStack(n);
    const dInner = b.innermost(n) - p.innermost(n);
    for (const [kind, diff] of [['in stack', dStack], ['innermost', dInner]])
      if (Math.abs(diff) > Math.abs(largest.diff)) largest = { name: n, kind, diff };
    console.log(`| \`${n}\` | ${pct(p.inStack(n))} | ${pct(b.inStack(n))} | ${points(dStack)} | ` +
                `${pct(p.innermost(n))} | ${pct(b.innermost(n))} | ${points(dInner)} |`);
  }
  console.log(`\nLargest difference: ${largest.name ? `\`${largest.name}\` ${largest.kind}, ` +
              `${points(largest.diff)} points (bpfprof - perf)` : 'none'}.\n`);
}

shareTable(p, b);
// Where perf's walk is whole: samples taken in an Erlang function's JIT code. There the two
// should agree; elsewhere perf sees little (its walk from C code is lost).
const pJit = shares(perf.filter((s) => s.inJit));
const bJit = shares(ours.filter((s) => s.inJit));
console.log(`Samples taken in Erlang code: perf ${pJit.erlang} (${pct(pJit.erlang / (p.total || 1))} of its ` +
            `scheduler samples), bpfprof ${Math.round(bJit.erlang)} (${pct(bJit.erlang / (b.total || 1))}).\n`);
shareTable(pJit, bJit);

// The workers, as work.erl traced them and as each profiler's samples give them.
const perfTrace = traced(perfRun.stdout);
const ourTrace = traced(bpfRun.stdout);
const traceShare = (m) => (w) => (m.get(w) ?? 0) / (Object.keys(WORKERS).reduce((s, x) => s + (m.get(x) ?? 0), 0) || 1);
const cols = [
  ['work.erl\'s trace (perf run)', traceShare(perfTrace)],
  ['perf: samples of the function', workerShares(perf, byFunction)],
  ['work.erl\'s trace (bpfprof run)', traceShare(ourTrace)],
  ['bpfprof: samples of the function', workerShares(ours, byFunction)],
  ['bpfprof: process labels', workerShares(ours, (s) => s.worker)],
];
console.log(`| worker (function) | ${cols.map(([c]) => c).join(' | ')} |`);
console.log(`| --- |${cols.map(() => ' ---: |').join('')}`);
for (const [w, fn] of Object.entries(WORKERS))
  console.log(`| ${w} (\`${fn}\`) | ${cols.map(([, f]) => pct(f(w))).join(' | ')} |`);
