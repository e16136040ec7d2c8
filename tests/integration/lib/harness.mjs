// Shared pieces of the bpfprof integration tests: finding the recorder and the fixtures,
// recording a fixture, reading a processed profile (.json.gz) and walking its stacks, and
// driving profiler-cli (the Firefox Profiler's own loading and view code).
//
// Tests import everything from here. The pieces: environment.mjs (the recorder, fixtures and
// results directory, from the environment), processes.mjs (running commands),
// profile_view.mjs (a profile's stacks and frames), profile_checks.mjs (CPU time and
// structure), profiler_cli.mjs; this module holds recording itself.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { BPFPROF, FIXTURES, FREQUENCY_HZ, IS_CI, RESULTS_DIR } from './environment.mjs';
import { run, sleep } from './processes.mjs';
import { ProfileView, readProfile } from './profile_view.mjs';

export * from './environment.mjs';
export * from './processes.mjs';
export * from './profile_checks.mjs';
export * from './profile_view.mjs';
export * from './profiler_cli.mjs';

// ---------------------------------------------------------------------------------------
// Preconditions

// Why recording cannot run here, or null when it can.
export function recorderUnavailableReason() {
  if (typeof process.getuid === 'function' && process.getuid() !== 0)
    return `not root (uid ${process.getuid()}): bpfprof needs root for BPF`;
  if (!existsSync(BPFPROF)) return `no recorder binary at ${BPFPROF} (BPFPROF)`;
  return null;
}

// To call first in a test that records. Returns false (after skipping the test) when it
// cannot record and CI is not 'true'; under CI=true the test fails instead.
export function requireRecorder(t) {
  const reason = recorderUnavailableReason();
  if (!reason) return true;
  if (IS_CI) assert.fail(`cannot record under CI=true: ${reason}`);
  t.skip(reason);
  return false;
}

export function fixturePath(name) {
  return join(FIXTURES, name);
}

// `cputime tid=<tid> name=<comm> ns=<ns>` lines a fixture prints, one per thread.
export function parseCputimeLines(stdout) {
  const lines = [];
  for (const m of stdout.matchAll(/^cputime tid=(\d+) name=(.*) ns=(\d+)$/gm))
    lines.push({ tid: Number(m[1]), name: m[2], ns: Number(m[3]) });
  return lines;
}

// The integration.copy.* rerun (tests/integration/CMakeLists.txt) runs a test file again with
// BPFPROF_CALL_GRAPH set. Its parts that come out the same in every stack mode (no recording,
// a recording that chooses its own mode or does not pass callGraphArgs, or what symbolization
// alone decides) are declared with describeOnce / itOnce: skipped there, saying why.
const ONCE_ONLY = process.env.BPFPROF_CALL_GRAPH
  ? { skip: 'the same in every stack mode: checked in the default run' } : {};
export function describeOnce(name, fn) {
  return describe(name, ONCE_ONLY, fn);
}
export function itOnce(name, fn) {
  return it(name, ONCE_ONLY, fn);
}

// Records `fixture durationMs` with `bpfprof record -v -F 1000 -o <file> --` (-v: the full
// summary, whose figures tests compare with the profile), checks that both
// exited 0, and returns { file, profile, cputimes, result }. The profile is kept as
// RESULTS_DIR/<label>.json.gz for inspection.
// BPFPROF_CALL_GRAPH (e.g. dwarf-copy) runs the recordings that do not choose a mode
// themselves in that mode: every test passes in each.
export function callGraphArgs(args) {
  const mode = process.env.BPFPROF_CALL_GRAPH;
  return mode && !args.some((a) => String(a).startsWith('--call-graph')) ? ['--call-graph', mode] : [];
}

export async function recordFixture(fixture, durationMs, { label = fixture, args = [], recordArgs = [] } = {}) {
  const file = join(RESULTS_DIR, `${label}.json.gz`);
  rmSync(file, { force: true });
  const argv = ['record', '-v', '-F', String(FREQUENCY_HZ), '-o', file, ...recordArgs,
                ...callGraphArgs(recordArgs), '--', fixturePath(fixture), String(durationMs), ...args];
  const result = await run(BPFPROF, argv, { timeoutMs: durationMs + 120_000 });
  const describe = `${BPFPROF} ${argv.join(' ')}\nexit ${result.code} signal ${result.signal}` +
                   `\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`;
  assert.equal(result.code, 0, `recording failed:\n${describe}`);
  assert.ok(existsSync(file), `no profile written:\n${describe}`);
  const cputimes = parseCputimeLines(result.stdout);
  assert.ok(cputimes.length > 0, `the fixture printed no cputime lines:\n${describe}`);
  return { file, profile: readProfile(file), cputimes, result };
}

// ---------------------------------------------------------------------------------------
// Measured numbers, kept for the lead to quote: RESULTS_DIR/metrics.<name>.json

export function saveMetrics(name, metrics) {
  writeFileSync(join(RESULTS_DIR, `metrics.${name}.json`), JSON.stringify(metrics, null, 2) + '\n');
}

// ---------------------------------------------------------------------------------------
// Recordings of processes that run beside them (-p, -a), and what they leave behind.

// Waits until a `bpfprof record -p/-a` started with startBackground says it samples (its
// set-up takes ~0.2-0.7 s, more on a loaded machine): what starts after this is recorded.
// `target`: the process it attached to (startBackground's), said of when the recorder fails.
export async function untilSampling(recorder, { timeoutMs = 20_000, target = null } = {}) {
  const started = Date.now();
  const targetState = () => (!target ? '' : target.exited()
    ? `\nthe target ${target.pid} had exited; its stderr:\n${target.stderrSoFar()}`
    : `\nthe target ${target.pid} still runs`);
  for (;;) {
    if (/^bpfprof: sampling .* from now/m.test(recorder.stderrSoFar())) return;
    assert.ok(!recorder.exited(), `bpfprof ended before sampling:\n${recorder.stderrSoFar()}${targetState()}`);
    assert.ok(Date.now() - started < timeoutMs,
              `bpfprof not sampling after ${timeoutMs} ms:\n${recorder.stderrSoFar()}`);
    await sleep(10);
  }
}

// The JIT perf maps in /tmp now (/tmp/perf-PID.map), and a way to remove those made after:
// a map left behind under a pid that a later test's process (another user's) gets makes that
// process's own map unwritable.
export function perfMapsNow() {
  return new Set(readdirSync('/tmp').filter((f) => /^perf-\d+\.map$/.test(f)));
}
export function removePerfMapsSince(before) {
  for (const f of perfMapsNow()) if (!before.has(f)) rmSync(join('/tmp', f), { force: true });
}

// Runs `bpfprof record <args>` writing RESULTS_DIR/<label>.json.gz; returns
// { file, profile, view, result } after checking that it exited with `expectCode`. With
// `prefix` ([command, ...args]), bpfprof and its arguments are that command's last arguments.
export async function recordWith(label, args, { expectCode = 0, timeoutMs = 180_000, prefix = [] } = {}) {
  const file = join(RESULTS_DIR, `${label}.json.gz`);
  rmSync(file, { force: true });
  const argv = ['record', '-v', '-F', String(FREQUENCY_HZ), '-o', file, ...callGraphArgs(args), ...args];
  const [command, ...commandArgs] = [...prefix, BPFPROF, ...argv];
  const result = await run(command, commandArgs, { timeoutMs });
  const describe = `${[command, ...commandArgs].join(' ')}\nexit ${result.code} signal ${result.signal}` +
                   `\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`;
  assert.equal(result.code, expectCode, `unexpected exit status:\n${describe}`);
  assert.ok(existsSync(file), `no profile written:\n${describe}`);
  const profile = readProfile(file);
  return { file, profile, view: new ProfileView(profile), result };
}

// The OS pid of a profile thread: pid strings of earlier entries of a reused pid (exec)
// carry a suffix, "1234.1".
export function osPid(thread) {
  return String(thread.pid).split('.')[0];
}
