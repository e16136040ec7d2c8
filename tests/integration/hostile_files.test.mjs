// A hostile neighbour: another user (nobody) prepares the perf map that bpfprof will look up
// for a profiled process with JIT code (/tmp/perf-PID.map). Whatever it is — a FIFO, a link
// to /dev/zero or to a root-only file, a 2 GB sparse file, a map with false names — the
// recording ends at -d with a profile, in bounded memory, without the other user's names,
// and says what it refused. A process run by that user keeps its own perf map's names.
import assert from 'node:assert/strict';
import { chmodSync, chownSync, existsSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import {
  BPFPROF, FREQUENCY_HZ, ProfileView, RESULTS_DIR, fixturePath, osPid, readProfile, requireRecorder,
  run, sleep, startBackground,
} from './lib/harness.mjs';

const NOBODY = 65534;
// A bound on bpfprof's peak resident memory for a 2 s recording of one process: well above
// what such a recording takes, far below what reading an endless file such as /dev/zero as
// an ELF file would.
const MAX_RSS_KB = 512 * 1024;
const DURATION_S = 2;
// Set-up, the recording and writing the profile, on a loaded 2-CPU machine.
const TIMEOUT_MS = (DURATION_S + 40) * 1000;
const FALSE_NAME = 'false_name_from_nobody';
const SECRET_NAME = 'secret_name_of_root';

function asNobody(command, args) {
  return run('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', command, ...args]);
}

// What another user can put at `path`, each made by that user.
const PREPARATIONS = {
  fifo: (path) => asNobody('mkfifo', ['-m', '0644', path]),
  'link to /dev/zero': (path) => asNobody('ln', ['-s', '/dev/zero', path]),
  'link to a root-only file': (path, secret) => asNobody('ln', ['-s', secret, path]),
  '2 GB sparse file': (path) => asNobody('truncate', ['-s', '2G', path]),
  // Covers every address: whatever JIT code the process runs would get this name.
  'false names': (path) => asNobody('sh', ['-c', `printf '0 7fffffffffff ${FALSE_NAME}\\n' > ${path}`]),
};

// Records `jit` with -p while the other user's file sits at its perf map's path.
async function recordWithForeignMap(label, prepare, secret) {
  const target = startBackground(fixturePath('jit'), ['60000', '--no-perf-map']);
  try {
    await sleep(300);  // the fixture has removed any stale map and runs its JIT code
    const mapPath = `/tmp/perf-${target.pid}.map`;
    rmSync(mapPath, { force: true });
    const prepared = await prepare(mapPath, secret);
    assert.equal(prepared.code, 0, `preparing ${label}: ${prepared.stderr}`);
    const file = join(RESULTS_DIR, `hostile-map-${label.replace(/[^a-z0-9]+/gi, '-')}.json.gz`);
    rmSync(file, { force: true });
    const result = await run('/usr/bin/time', [
      '-f', 'maxrss_kb=%M', BPFPROF, 'record', '-F', String(FREQUENCY_HZ), '-d', String(DURATION_S),
      '-p', String(target.pid), '-o', file,
    ], { timeoutMs: TIMEOUT_MS });
    rmSync(mapPath, { force: true });
    return { file, result, mapPath, pid: target.pid };
  } finally {
    target.child.kill('SIGKILL');
    await target.done;
  }
}

function allFuncNames(view) {
  return new Set(view.funcTable.name.map((n) => view.strings[n]));
}

function metaExtra(profile, label) {
  const entry = (profile.meta.extra ?? []).flatMap((group) => group.entries ?? [group])
    .find((e) => e.label === label);
  return entry?.value;
}

describe('a perf map prepared by another user', () => {
  for (const [label, prepare] of Object.entries(PREPARATIONS)) {
    it(`${label}: the recording ends at -d with a profile, without that user's names`, async (t) => {
      if (!requireRecorder(t)) return;
      const secret = join(RESULTS_DIR, 'root-only-perf-map');
      writeFileSync(secret, `0 7fffffffffff ${SECRET_NAME}\n`);
      chmodSync(secret, 0o600);
      const { file, result, mapPath } = await recordWithForeignMap(label, prepare, secret);
      const rss = Number(result.stderr.match(/maxrss_kb=(\d+)/)?.[1]);
      t.diagnostic(`${label}: exit ${result.code} in ${result.ms} ms, peak RSS ${Math.round(rss / 1024)} MB`);
      assert.equal(result.code, 0, result.stderr);
      assert.ok(result.ms < TIMEOUT_MS, `took ${result.ms} ms`);
      assert.ok(rss > 0 && rss < MAX_RSS_KB, `peak RSS ${rss} KB, bound ${MAX_RSS_KB} KB`);
      assert.ok(existsSync(file), result.stderr);
      const profile = readProfile(file);
      const names = allFuncNames(new ProfileView(profile));
      assert.ok(!names.has(FALSE_NAME) && !names.has(SECRET_NAME), `foreign names in the profile`);
      // Each refusal is said in the summary and kept in meta.extra.
      const said = result.stderr.split('\n').filter((l) => l.includes(`perf map ${mapPath} ignored`));
      assert.equal(said.length, 1, result.stderr);
      t.diagnostic(said[0]);
      assert.match(metaExtra(profile, 'Files refused') ?? '', new RegExp(`perf map ${mapPath} ignored`));
    });
  }
});

describe('a process of another user with its own perf map', () => {
  it('keeps its names: the map belongs to the process\'s user', async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'hostile-own-map.json.gz');
    rmSync(file, { force: true });
    // The fixture must be runnable by nobody (the build tree may be private).
    const copy = join('/tmp', `bpfprof-jit-${process.pid}`);
    await run('cp', [fixturePath('jit'), copy]);
    chownSync(copy, NOBODY, NOBODY);
    chmodSync(copy, 0o755);
    try {
      const result = await run(BPFPROF, [
        'record', '-F', String(FREQUENCY_HZ), '-o', file, '--',
        'setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', copy, '1500',
      ], { timeoutMs: TIMEOUT_MS });
      assert.equal(result.code, 0, result.stderr);
      const profile = readProfile(file);
      const view = new ProfileView(profile);
      // nobody may still change its binary: it was read from a copy, at least its whole size.
      const copied = Number(metaExtra(profile, "Bytes of other users' files read from copies") ?? 0);
      assert.ok(copied >= statSync(copy).size, `${copied} bytes read from copies`);
      // The fixture leaves its map behind, as JITs do: not in this machine's /tmp.
      for (const thread of view.threads) rmSync(`/tmp/perf-${osPid(thread)}.map`, { force: true });
      assert.ok(allFuncNames(view).has('jit_spin_function'), result.stderr);
      assert.doesNotMatch(result.stderr, /perf map .* ignored/);
    } finally {
      rmSync(copy, { force: true });
    }
  });
});
