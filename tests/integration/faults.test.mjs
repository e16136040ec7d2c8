// Faults at write time: a full disk or an output directory removed during the
// recording does not lose the recording. The profile goes to a fallback place ($TMPDIR, then
// the user's ~/.cache/bpfprof), stderr says where in one line, the exit status is non-zero;
// when nothing can be written, no half-written file is left anywhere.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import {
  BPFPROF, ProfileView, checkWithProfilerCli, fixturePath, readProfile, requireRecorder, run,
} from './lib/harness.mjs';

// A tmpfs of `size` mounted for the duration of `body(dir)`.
async function withTinyFilesystem(size, body) {
  const dir = mkdtempSync(join(tmpdir(), 'bpfprof-tiny-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir]);
  try {
    return await body(dir);
  } finally {
    execFileSync('umount', [dir]);
    rmSync(dir, { recursive: true, force: true });
  }
}

function recordThreads(output, env = process.env) {
  return run(BPFPROF, ['record', '-o', output, '--', fixturePath('threads'), '300'], { env });
}

describe('a full disk at write time', () => {
  it('writes the profile to $TMPDIR instead, says where, exits non-zero', async (t) => {
    if (!requireRecorder(t)) return;
    const fallback = mkdtempSync(join(tmpdir(), 'bpfprof-fallback-'));
    try {
      await withTinyFilesystem('4k', async (full) => {
        // Plain JSON: a few tens of KB, more than the 4 KB the filesystem has.
        const result = await recordThreads(join(full, 'profile.json'),
                                           { ...process.env, TMPDIR: fallback });
        t.diagnostic(result.stderr.split('\n').filter((l) => /write|instead/.test(l)).join('\n'));
        assert.notEqual(result.code, 0, 'the profile did not go where it was asked: not a success');
        assert.match(result.stderr, /cannot write the profile: .*No space left on device/);
        const moved = join(fallback, 'profile.json');
        assert.match(result.stderr, new RegExp(`wrote the profile to ${moved} instead`));
        const view = new ProfileView(readProfile(moved));
        assert.ok(view.threads.some((th) => th.name === 'worker-alpha'), 'the recorded threads are in it');
        await checkWithProfilerCli(t, moved, view);
        assert.deepEqual(readdirSync(full), [], 'no temporary file left on the full filesystem');
      });
    } finally {
      rmSync(fallback, { recursive: true, force: true });
    }
  });

  it('with no room anywhere: one line per place, no profile, no leftovers, exit 1', async (t) => {
    if (!requireRecorder(t)) return;
    await withTinyFilesystem('4k', async (full) => {
      const result = await recordThreads(join(full, 'profile.json'),
                                         { ...process.env, TMPDIR: full, HOME: full });
      assert.equal(result.code, 1);
      assert.match(result.stderr, /no profile written/);
      const files = execFileSync('find', [full, '-type', 'f']).toString().trim();
      assert.equal(files, '', `files left behind: ${files}`);
    });
  });
});

describe('the output directory removed during the recording', () => {
  it('the profile is kept in $TMPDIR', async (t) => {
    if (!requireRecorder(t)) return;
    const fallback = mkdtempSync(join(tmpdir(), 'bpfprof-fallback-'));
    const gone = mkdtempSync(join(tmpdir(), 'bpfprof-gone-'));
    try {
      const result = await run(BPFPROF, [
        'record', '-o', join(gone, 'p.json.gz'), '--', 'sh', '-c',
        `${fixturePath('threads')} 300; rm -rf ${gone}`,
      ], { env: { ...process.env, TMPDIR: fallback } });
      assert.equal(existsSync(gone), false);
      assert.notEqual(result.code, 0);
      assert.match(result.stderr, /cannot write the profile: .*No such file or directory/);
      const moved = join(fallback, 'p.json.gz');
      assert.match(result.stderr, new RegExp(`wrote the profile to ${moved} instead`));
      const view = new ProfileView(readProfile(moved));
      assert.ok(view.threads.some((th) => th.name === 'worker-beta'));
    } finally {
      rmSync(fallback, { recursive: true, force: true });
      rmSync(gone, { recursive: true, force: true });
    }
  });
});
