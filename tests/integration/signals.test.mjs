// Signals: SIGINT/SIGTERM end a recording and the profile is written (exit
// 128+signal); a command killed by a signal still yields its profile; while the profile is
// written a second Ctrl-C is ignored with a message and a third aborts, leaving no file.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { describe, it } from 'node:test';

import {
  BPFPROF, ProfileView, RESULTS_DIR, checkWithProfilerCli, fixturePath, readProfile, recordWith,
  requireRecorder, sleep,
} from './lib/harness.mjs';

// Starts bpfprof (or `command`, which runs it); resolves { code, signal, stderr } at exit.
// `onStderr(text, child)` sees the stderr text so far after each chunk.
function startRecorder(args, onStderr = () => {}, command = BPFPROF) {
  const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
    onStderr(stderr, child);
  });
  const done = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stderr })));
  return { child, done };
}

function leftoverTempFiles(file) {
  return readdirSync(dirname(file)).filter((n) => n.startsWith(`.${basename(file)}`) || (n.includes(basename(file)) && n !== basename(file)));
}

for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]]) {
  describe(`${signal} ends an attached recording`, () => {
    it(`writes a valid profile and exits ${code}`, async (t) => {
      if (!requireRecorder(t)) return;
      const busy = spawn(fixturePath('busy'), ['20000'], { stdio: 'ignore' });
      try {
        const file = join(RESULTS_DIR, `signals-${signal}.json.gz`);
        rmSync(file, { force: true });
        let sampling;
        const started = new Promise((resolve) => { sampling = resolve; });
        const { child, done } = startRecorder(['record', '-o', file, '-p', String(busy.pid)], (text) => {
          if (/^bpfprof: sampling .* from now/m.test(text)) sampling();
        });
        await Promise.race([started, done]);
        await sleep(500);  // some samples first
        child.kill(signal);
        const r = await done;
        assert.equal(r.code, code, r.stderr);
        assert.ok(existsSync(file), `no profile: ${r.stderr}`);
        const view = new ProfileView(readProfile(file));
        const main = view.threads.find((th) => String(th.tid) === String(busy.pid));
        assert.ok(main && main.samples.length > 0, 'the attached process has samples');
        assert.deepEqual(leftoverTempFiles(file), []);
      } finally {
        busy.kill('SIGKILL');
      }
    });
  });
}

describe('a command killed by a signal', () => {
  it('still yields its profile; bpfprof exits 128+signal', async (t) => {
    if (!requireRecorder(t)) return;
    const rec = await recordWith('signals-killed', ['--', 'sh', '-c', `${fixturePath('busy')} 700; kill -KILL $$`],
                                 { expectCode: 137 });
    // Weighted: a spinning thread's repeated stacks are a few rows of many samples each.
    const busy = rec.view.threads.find((th) => th.name === 'busy');
    assert.ok(busy && rec.view.share(busy, () => true).total > 100, 'the busy child has its samples');
    await checkWithProfilerCli(t, rec.file, rec.view);
  });
});

// Starts bpfprof under strace, which holds the rename of the finished temporary file into
// place for HOLD_MS (a syscall delay): signals sent on seeing "writing the profile" land in
// the writing phase however fast the write is and however late this process reads the line
// (a loaded machine once delayed it past a 200 ms write). `onWriting(pid)` gets bpfprof's pid.
const HOLD_MS = 1500;
function startRecorderHeldAtRename(args, onWriting) {
  let seen = false;
  const strace = ['-f', '-qq', '-o', '/dev/null', '-e', 'trace=/^rename', '-e',
                  `inject=/^rename:delay_enter=${HOLD_MS * 1000}`];
  return startRecorder([...strace, BPFPROF, ...args], (text, child) => {
    if (seen || !text.includes('writing the profile')) return;
    seen = true;
    // strace's only child is bpfprof (its threads are not listed as children).
    onWriting(Number(readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim()));
  }, 'strace');
}

describe('Ctrl-C while the profile is written', () => {
  it('a second one is ignored with a message and the profile is complete', async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'signals-writing.json.gz');
    rmSync(file, { force: true });
    let sent = false;
    const { done } = startRecorderHeldAtRename(['record', '-a', '-d', '1', '-o', file], (pid) => {
      sent = true;
      process.kill(pid, 'SIGINT');
    });
    const r = await done;
    assert.ok(sent, `never saw the writing phase: ${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /still writing the profile; a third Ctrl-C aborts without it/);
    assert.ok(existsSync(file));
    readProfile(file);  // complete JSON
  });

  it('a third one aborts, leaving neither the profile nor a temporary file', async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'signals-abort.json.gz');
    rmSync(file, { force: true });
    let sent = false;
    const { done } = startRecorderHeldAtRename(['record', '-a', '-d', '1', '-o', file], (pid) => {
      sent = true;
      // One at a time: a signal sent while the same one is pending is merged into it.
      process.kill(pid, 'SIGINT');
      setTimeout(() => process.kill(pid, 'SIGINT'), 20);
      setTimeout(() => process.kill(pid, 'SIGINT'), 40);
    });
    const r = await done;
    assert.ok(sent, `never saw the writing phase: ${r.stderr}`);
    assert.equal(r.code, 130, r.stderr);
    assert.match(r.stderr, /aborted; no profile written/);
    assert.ok(!existsSync(file), 'a profile was left behind');
    assert.deepEqual(leftoverTempFiles(file), []);
  });
});

describe('SIGUSR2 without --flight-recorder', () => {
  it('is ignored with a message: the recording goes on and its profile is written', async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'signals-usr2.json.gz');
    rmSync(file, { force: true });
    // bpfprof prints nothing on a pipe until the end: the signal goes at 700 ms, when the
    // command (1.5 s) runs and sampling does (start-up ends well before).
    const { child, done } = startRecorder(['record', '-o', file, '--', fixturePath('busy'), '1500']);
    setTimeout(() => child.kill('SIGUSR2'), 700);
    const r = await done;
    assert.equal(r.signal, null, r.stderr);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /SIGUSR2 ignored/);
    const view = new ProfileView(readProfile(file));
    const busy = view.threads.find((th) => th.name === 'busy');
    assert.ok(busy && view.share(busy, () => true).total > 100, 'the busy command has its samples');
  });
});
