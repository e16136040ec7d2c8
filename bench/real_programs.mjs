// bench/real_programs.sh's worker: records the real-program workloads of
// tests/integration/lib/workloads.mjs and the unwinding fixtures with `bpfprof record` (the
// default, stacks walked in the kernel, and --call-graph dwarf-copy) and with
// `perf record -e cpu-clock --call-graph dwarf` (+ `perf script`), classifies them with
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

// The unwinding fixtures too (bench only; the tests record them in kernel_unwind.test.mjs).
const FIXTURE_WORKLOADS = ['unwind_qsort', 'unwind_recursion', 'unwind_signal', 'signal_storm', 'threads']
  .map((name) => ({ name, fixture: true }));

function prepare(spec, dir) {
  if (!spec.fixture) return prepareWorkload(spec, dir, FIXTURES);
  return { ...spec, argv: [join(FIXTURES, spec.name), '1500'] };
}

// One bpfprof recording of a workload with extra `record` options: its stack quality and
// what it printed.
function recordBpfprof(spec, label, extraArgs) {
  const w = prepare(spec, join(work, `${spec.name}.${label}`));
  const profile = join(work, `${w.name}.${label}.json.gz`);
  const b = runCommand(BPFPROF, ['record', '-F', FREQUENCY, '-o', profile, ...extraArgs, ...(w.recordArgs ?? []),
                                 '--', ...w.argv], { env: w.env });
  let quality = null;
  if (b.status === 0) quality = profileStackQuality(readProfile(profile)).overall;
  else process.stderr.write(`${w.name}: bpfprof record ${label} failed (exit ${b.status}): ${b.stderr.split('\n').slice(-3).join(' ')}\n`);
  if (!keep) {
    rmSync(join(work, `${spec.name}.${label}`), { recursive: true, force: true });
    rmSync(profile, { force: true });
  }
  return { w, b, quality };
}

const rows = [];
for (const spec of [...WORKLOADS, ...FIXTURE_WORKLOADS]) {
  if (only && !only.includes(spec.name)) continue;
  const { w, b, quality: bq } = recordBpfprof(spec, 'default', []);
  // The copy mode, unless the workload fixes a mode of its own.
  const copy = spec.recordArgs ? null : recordBpfprof(spec, 'copy', ['--call-graph', 'dwarf-copy']).quality;

  // perf on the same command, inputs made afresh (git gc changed the repository).
  const pw = prepare(spec, join(work, `${spec.name}.perf`));
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
    rmSync(join(work, `${spec.name}.perf`), { recursive: true, force: true });
    rmSync(data, { force: true });
  }
  rows.push([
    `${w.name}${w.recordArgs ? ` (${w.recordArgs.join(' ')})` : ''}`,
    pct(printedCompleteness(b.stderr)),
    bq ? `${pct(bq.realRootShare)} (${pct(bq.rootShare)} by name)` : 'failed',
    bq ? pct(bq.truncatedShare) : '-',
    bq ? pct(bq.realSilentShare) : '-',
    copy ? pct(copy.realRootShare) : '-',
    pq ? pct(pq.realRootShare) : 'failed',
    pq ? pct(pq.realTruncatedShare) : '-',
    pq ? pct(pq.realSilentShare) : '-',
    `${bq ? Math.round(bq.user) : '-'} / ${pq ? Math.round(pq.user) : '-'}`,
  ]);
}
if (!keep) rmSync(work, { recursive: true, force: true });

console.log('| workload | bpfprof prints | bpfprof reaches a root | bpfprof [truncated] | cut silently | ' +
            'dwarf-copy reaches a root | perf reaches a root | perf marked cut | perf cut silently | ' +
            'user samples (bpfprof / perf) |');
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const r of rows) console.log(`| ${r.join(' | ')} |`);
