// bench/real_programs.sh's worker: records the real-program workloads of
// tests/integration/lib/workloads.mjs with `bpfprof record` and with
// `perf record -e cpu-clock --call-graph dwarf` (+ `perf script`), classifies both with
// tests/integration/lib/stack_quality.mjs and prints a markdown table.
//
//   node bench/real_programs.mjs --bpfprof BIN --fixtures DIR [--only a,b] [--keep DIR]
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { readProfile } from '../tests/integration/lib/harness.mjs';
import {
  PERF_SCRIPT_ARGS, parsePerfScript, perfStackQuality, printedCompleteness, profileStackQuality,
} from '../tests/integration/lib/stack_quality.mjs';
import { WORKLOADS, prepareWorkload } from '../tests/integration/lib/workloads.mjs';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const BPFPROF = opt('--bpfprof', 'build/bpfprof');
const FIXTURES = opt('--fixtures', 'build/tests/fixtures');
const only = opt('--only', null)?.split(',');
const keep = opt('--keep', null);
const FREQUENCY = '1000';

const work = keep ?? mkdtempSync(join(tmpdir(), 'bpfprof-real-bench-'));
mkdirSync(work, { recursive: true });

function runCommand(cmd, argv, { env, stdout = 'ignore' } = {}) {
  const r = spawnSync(cmd, argv, {
    env: { ...process.env, ...(env ?? {}) }, stdio: ['ignore', stdout, 'pipe'], encoding: 'utf8',
    maxBuffer: 1 << 30,
  });
  if (r.error) throw r.error;
  return r;
}

const pct = (x) => (typeof x === 'number' && !Number.isNaN(x) ? `${(100 * x).toFixed(1)}%` : '-');

const rows = [];
for (const spec of WORKLOADS) {
  if (only && !only.includes(spec.name)) continue;
  const w = prepareWorkload(spec, join(work, spec.name), FIXTURES);
  const profile = join(work, `${w.name}.json.gz`);
  const b = runCommand(BPFPROF, ['record', '-F', FREQUENCY, '-o', profile, ...(w.recordArgs ?? []), '--', ...w.argv],
                       { env: w.env });
  let bq = null;
  if (b.status === 0) bq = profileStackQuality(readProfile(profile)).overall;
  else process.stderr.write(`${w.name}: bpfprof record failed (exit ${b.status}): ${b.stderr.split('\n').slice(-3).join(' ')}\n`);

  // perf on the same command, inputs made afresh (git gc changed the repository).
  const pw = prepareWorkload(spec, join(work, `${spec.name}.perf`), FIXTURES);
  const data = join(work, `${w.name}.perf.data`);
  const p = runCommand('perf', ['record', '-q', '-e', 'cpu-clock', '-F', FREQUENCY,
                                ...(pw.perfArgs ?? ['--call-graph', 'dwarf']), '-o', data, '--', ...pw.argv], { env: pw.env });
  let pq = null;
  if (p.status === 0) {
    const s = runCommand('perf', ['script', '-i', data, ...PERF_SCRIPT_ARGS], { stdout: 'pipe' });
    pq = perfStackQuality(parsePerfScript(s.stdout)).overall;
  } else {
    process.stderr.write(`${w.name}: perf record failed (exit ${p.status}): ${p.stderr.split('\n').slice(-3).join(' ')}\n`);
  }
  if (!keep) {
    rmSync(join(work, spec.name), { recursive: true, force: true });
    rmSync(join(work, `${spec.name}.perf`), { recursive: true, force: true });
    rmSync(data, { force: true });
  }
  rows.push([
    `${w.name}${w.recordArgs ? ` (${w.recordArgs.join(' ')})` : ''}`,
    pct(printedCompleteness(b.stderr)),
    bq ? `${pct(bq.realRootShare)} (${pct(bq.rootShare)} by name)` : 'failed',
    bq ? pct(bq.truncatedShare) : '-',
    bq ? pct(bq.realSilentShare) : '-',
    pq ? pct(pq.realRootShare) : 'failed',
    pq ? pct(pq.realTruncatedShare) : '-',
    pq ? pct(pq.realSilentShare) : '-',
    `${bq ? Math.round(bq.user) : '-'} / ${pq ? Math.round(pq.user) : '-'}`,
  ]);
}
if (!keep) rmSync(work, { recursive: true, force: true });

console.log('| workload | bpfprof prints | bpfprof reaches a root | bpfprof [truncated] | cut silently | ' +
            'perf reaches a root | perf marked cut | perf cut silently | user samples (bpfprof / perf) |');
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const r of rows) console.log(`| ${r.join(' | ')} |`);
