// bpfprof record's command-line contract: it exits with the command's exit status
// (128+signal when the command is killed), and a command that cannot be started gives a
// non-zero exit and a one-line error.
import assert from 'node:assert/strict';
import { existsSync, rmSync } from 'node:fs';
import { getPriority } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { BPFPROF, RESULTS_DIR, readProfile, requireRecorder, run } from './lib/harness.mjs';

describe('bpfprof record exit status', () => {
  it("exits with the command's status (sh -c 'exit 3' -> 3) and still writes the profile", async (t) => {
    if (!requireRecorder(t)) return;
    const out = join(RESULTS_DIR, 'exit3.json.gz');
    rmSync(out, { force: true });
    const r = await run(BPFPROF, ['record', '-F', '1000', '-o', out, '--', 'sh', '-c', 'exit 3']);
    t.diagnostic(`exit 3: bpfprof exited ${r.code} in ${r.ms} ms`);
    assert.equal(r.code, 3, r.stderr);
    assert.ok(existsSync(out), 'no profile written');
    const profile = readProfile(out);
    assert.equal(profile.meta.preprocessedProfileVersion, 70);
  });

  // The recorder raises its own priority while it loads and reads; the command, forked before,
  // keeps the one it was given.
  it('runs the command at the priority it was given', async (t) => {
    if (!requireRecorder(t)) return;
    const out = join(RESULTS_DIR, 'priority.json.gz');
    const r = await run(BPFPROF, ['record', '-o', out, '--', 'sh', '-c', "echo nice=$(cut -d' ' -f19 /proc/self/stat)"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(/nice=(-?\d+)/.exec(r.stdout)?.[1], String(getPriority()), r.stdout);
  });

  it('exits 128+signal when the command is killed (SIGTERM -> 143)', async (t) => {
    if (!requireRecorder(t)) return;
    const out = join(RESULTS_DIR, 'cli-killed.json.gz');
    const r = await run(BPFPROF, ['record', '-F', '1000', '-o', out, '--', 'sh', '-c', 'kill -TERM $$']);
    t.diagnostic(`kill -TERM: bpfprof exited ${r.code} (signal ${r.signal})`);
    assert.equal(r.code, 128 + 15, r.stderr);
  });

  it('a missing command gives a non-zero exit and a one-line error', async (t) => {
    if (!requireRecorder(t)) return;
    const out = join(RESULTS_DIR, 'cli-missing.json.gz');
    const missing = '/nonexistent/bpfprof-no-such-command';
    const r = await run(BPFPROF, ['record', '-F', '1000', '-o', out, '--', missing, 'arg']);
    const lines = r.stderr.trim().split('\n').filter((l) => l.trim() !== '');
    t.diagnostic(`missing command: exit ${r.code}, stderr: ${JSON.stringify(r.stderr)}`);
    assert.notEqual(r.code, 0);
    assert.equal(r.signal, null);
    assert.equal(lines.length, 1, `want one line on stderr, got:\n${r.stderr}`);
  });
});
