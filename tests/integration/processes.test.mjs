// Processes over time: 30 short-lived processes (20-50 ms each) under `-- CMD` and under
// -a; an exec chain; a process whose binary exists only in its own mount namespace.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync, chmodSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import {
  BPFPROF, FREQUENCY_HZ, RESULTS_DIR, fixturePath, hasUserChainAtLeaf, osPid, readProfile,
  itOnce, recordWith, requireRecorder, saveMetrics, startBackground, untilSampling, ProfileView,
} from './lib/harness.mjs';

const SHORT_RUNS = 30;
// 20, 25, ... 50 ms, cycling.
const shortLoop = () => {
  const durations = Array.from({ length: SHORT_RUNS }, (_, i) => 20 + 5 * (i % 7));
  return `for d in ${durations.join(' ')}; do ${fixturePath('busy')} $d >/dev/null; done`;
};

// Processes named busy whose samples reach main > outer > inner_spin (symbolized).
function symbolizedBusyProcesses(view) {
  const pids = new Set();
  for (const th of view.threads) {
    if (th.processName !== 'busy') continue;
    if (view.share(th, (f) => hasUserChainAtLeaf(f, ['main', 'outer', 'inner_spin'])).hit > 0) pids.add(osPid(th));
  }
  return pids;
}

describe('processes over time', () => {
  it(`${SHORT_RUNS} short-lived processes under -- CMD are each present and symbolized`, async (t) => {
    if (!requireRecorder(t)) return;
    const { view } = await recordWith('short_lived_cmd', ['--', 'sh', '-c', shortLoop()]);
    const pids = symbolizedBusyProcesses(view);
    t.diagnostic(`-- CMD: ${pids.size} of ${SHORT_RUNS} short busy processes present with inner_spin`);
    saveMetrics('short_lived_cmd', { present: pids.size, of: SHORT_RUNS });
    assert.ok(pids.size >= SHORT_RUNS - 2, `only ${pids.size} of ${SHORT_RUNS}`);
  });

  itOnce(`${SHORT_RUNS} short-lived processes under -a are each present and symbolized`, async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'short_lived_all.json.gz');
    rmSync(file, { force: true });
    const recorder = startBackground(BPFPROF, ['record', '-a', '-d', '4', '-F', String(FREQUENCY_HZ), '-o', file]);
    await untilSampling(recorder);
    const loop = startBackground('sh', ['-c', shortLoop()]);
    assert.equal((await loop.done).code, 0);
    const recording = await recorder.done;
    assert.equal(recording.code, 0, recording.stderr);
    const pids = symbolizedBusyProcesses(new ProfileView(readProfile(file)));
    t.diagnostic(`-a: ${pids.size} of ${SHORT_RUNS} short busy processes present with inner_spin`);
    saveMetrics('short_lived_all', { present: pids.size, of: SHORT_RUNS });
    assert.ok(pids.size >= SHORT_RUNS - 2, `only ${pids.size} of ${SHORT_RUNS}`);
  });

  // A full table of tracked processes leaves children unsampled: the summary and the
  // profile say how many, and that many are missing from the profile.
  it('--max-processes: the children beyond it are counted, and they are the ones missing', async (t) => {
    if (!requireRecorder(t)) return;
    const children = 6;
    const loop = `for i in $(seq ${children}); do ${fixturePath('busy')} 400 >/dev/null & done; wait`;
    const { view, profile, result } = await recordWith('max_processes', ['--max-processes', '3', '--', 'sh', '-c', loop]);
    const present = new Set(view.threads.filter((th) => th.processName === 'busy' && th.samples.length > 0)
      .map(osPid)).size;
    const entry = profile.meta.extra[0].entries.find((e) => e.label.startsWith('Processes not followed'));
    const said = /bpfprof: (\d+) processes started while 3 were followed went unsampled/.exec(result.stderr);
    t.diagnostic(`busy processes present: ${present} of ${children}; not followed: ${entry?.value}`);
    assert.ok(said, result.stderr);
    assert.equal(Number(said[1]), entry?.value);
    // sh is the first of the three; two children fit.
    assert.equal(present, 2);
    assert.equal(entry.value, children - present);
  });

  it('an exec chain (sh -c "exec busy") is a new process entry for the same pid', async (t) => {
    if (!requireRecorder(t)) return;
    const { view } = await recordWith('exec_chain', ['--keep-idle-threads', '--', 'sh', '-c', `exec ${fixturePath('busy')} 300`]);
    const entries = view.threads.map((x) => `${x.pid} ${x.processName}`);
    t.diagnostic(`entries: ${entries.join(', ')}`);
    const busy = view.threads.filter((x) => x.processName === 'busy');
    assert.equal(busy.length, 1, entries.join(', '));
    const sh = view.threads.filter((x) => x.processName === 'sh' && osPid(x) === osPid(busy[0]));
    assert.equal(sh.length, 1, `the shell before its exec: ${entries.join(', ')}`);
    assert.equal(String(busy[0].pid), osPid(busy[0]), 'the exec-ed image keeps the plain pid');
    assert.notEqual(String(sh[0].pid), String(busy[0].pid), 'the shell entry has its own pid string');
    assert.ok(sh[0].processShutdownTime !== null && sh[0].processShutdownTime <= busy[0].processStartupTime + 1e-6,
              `the shell entry ends when busy starts: ${sh[0].processShutdownTime} vs ${busy[0].processStartupTime}`);
    const r = view.share(busy[0], (f) => hasUserChainAtLeaf(f, ['main', 'outer', 'inner_spin']));
    assert.ok(r.share >= 0.9, `busy: ${r.share}`);
    assert.equal(view.share(sh[0], (f) => f.some((x) => x.name === 'inner_spin')).hit, 0,
                 "the shell's entry holds none of busy's samples");
  });

  it('a binary that exists only inside its own mount namespace is symbolized', async (t) => {
    if (!requireRecorder(t)) return;
    const dir = mkdtempSync(join(RESULTS_DIR, 'mntns-'));
    const inside = join(dir, 'mnt');
    const script = join(dir, 'run.sh');
    writeFileSync(script, [
      '#!/bin/sh', 'set -e', `mkdir -p ${inside}`, `mount -t tmpfs none ${inside}`,
      `cp ${fixturePath('busy')} ${inside}/busy-in-ns`, `exec ${inside}/busy-in-ns 600`, '',
    ].join('\n'));
    chmodSync(script, 0o755);
    try {
      const { view, profile } = await recordWith('mount_namespace',
        ['--', 'unshare', '--mount', '--propagation', 'private', script]);
      assert.equal(existsSync(join(inside, 'busy-in-ns')), false, 'the binary must not exist outside');
      const th = view.threads.filter((x) => x.processName === 'busy-in-ns');
      assert.equal(th.length, 1, view.threads.map((x) => x.processName).join(', '));
      const r = view.share(th[0], (f) => hasUserChainAtLeaf(f, ['main', 'outer', 'inner_spin']));
      t.diagnostic(`busy-in-ns: ${r.total} samples, ${(100 * r.share).toFixed(1)}% main > outer > inner_spin`);
      assert.ok(r.share >= 0.9, `${r.share}`);
      const lib = profile.libs.find((l) => l.path === `${inside}/busy-in-ns`);
      assert.ok(lib, `libs: ${profile.libs.map((l) => l.path).join(', ')}`);
      assert.match(lib.codeId ?? '', /^[0-9a-f]{40}$/, 'its build-id was read through the namespace');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
