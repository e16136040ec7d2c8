// Hostile conditions: two recorders at once each get their own processes only; a
// recorder killed outright (SIGKILL) leaves no BPF program or link behind, and its command
// is not left stopped (it runs on, reparented, as after any parent's death).
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import {
  BPFPROF, FREQUENCY_HZ, ProfileView, RESULTS_DIR, fixturePath, readProfile, requireRecorder, run,
  sleep, startBackground,
} from './lib/harness.mjs';

// The BPF objects (programs, links, maps) a process holds open, from /proc/PID/fdinfo.
function heldBpfObjects(pid) {
  const ids = { prog_id: new Set(), link_id: new Set() };
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    if (!target.startsWith('anon_inode:bpf')) continue;
    const info = readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8');
    for (const key of Object.keys(ids)) {
      const m = info.match(new RegExp(`^${key}:\\s*(\\d+)`, 'm'));
      if (m) ids[key].add(m[1]);
    }
  }
  return ids;
}

async function bpftoolKnows(kind, id) {
  const result = await run('bpftool', [kind, 'show', 'id', id]);
  return result.code === 0;
}

function processNames(file) {
  return new Set(new ProfileView(readProfile(file)).threads.map((th) => th.processName));
}

describe('two recorders at once', () => {
  it('each profile holds its own command only, both complete', async (t) => {
    if (!requireRecorder(t)) return;
    const files = ['first', 'second'].map((n) => join(RESULTS_DIR, `two-recorders-${n}.json.gz`));
    files.forEach((f) => rmSync(f, { force: true }));
    const [a, b] = await Promise.all([
      run(BPFPROF, ['record', '-F', String(FREQUENCY_HZ), '-o', files[0], '--', fixturePath('threads'), '800']),
      run(BPFPROF, ['record', '-F', String(FREQUENCY_HZ), '-o', files[1], '--', fixturePath('syscalls'), '800']),
    ]);
    assert.equal(a.code, 0, a.stderr);
    assert.equal(b.code, 0, b.stderr);
    const first = processNames(files[0]);
    const second = processNames(files[1]);
    t.diagnostic(`first: ${[...first].join(', ')}; second: ${[...second].join(', ')}`);
    assert.ok(first.has('threads') && !first.has('syscalls'), [...first].join(', '));
    assert.ok(second.has('syscalls') && !second.has('threads'), [...second].join(', '));
    for (const r of [a, b]) assert.match(r.stderr, /[^0-9]0 events lost/);
  });
});

describe('the recorder killed with SIGKILL', () => {
  it('leaves no BPF program or link attached; the command runs on', async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'killed.json.gz');
    const recorder = startBackground(BPFPROF, ['record', '-o', file, '--', 'sleep', '60']);
    let held = { prog_id: new Set(), link_id: new Set() };
    // Attached, and the command started (it is released after the attach). The recorder has
    // another child for a moment: the dynamic loader listing the command's libraries.
    let command = '';
    const runsSleep = (pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('sleep\0');
      } catch {
        return false;  // gone meanwhile
      }
    };
    for (let i = 0; i < 100 && (held.link_id.size === 0 || !command); ++i) {
      await sleep(20);
      held = heldBpfObjects(recorder.pid);
      const children = readFileSync(`/proc/${recorder.pid}/task/${recorder.pid}/children`, 'utf8');
      command = children.trim().split(/\s+/).find(runsSleep) ?? '';
    }
    assert.ok(held.prog_id.size > 0 && held.link_id.size > 0, 'the recorder attached its programs');
    recorder.child.kill('SIGKILL');
    // Not recorder.done: the command holds the recorder's stderr pipe open.
    for (let i = 0; i < 100 && existsSync(`/proc/${recorder.pid}/stat`) &&
         !readFileSync(`/proc/${recorder.pid}/stat`, 'utf8').includes(') Z'); ++i) await sleep(20);
    await sleep(200);
    for (const id of held.prog_id) assert.equal(await bpftoolKnows('prog', id), false, `program ${id} left`);
    for (const id of held.link_id) assert.equal(await bpftoolKnows('link', id), false, `link ${id} left`);
    t.diagnostic(`${held.prog_id.size} programs and ${held.link_id.size} links gone with the recorder`);
    // The command was released before the kill: it runs on, not stopped, under a new parent.
    assert.ok(command, 'the command had started');
    const state = readFileSync(`/proc/${command}/stat`, 'utf8').split(') ')[1].split(' ')[0];
    assert.notEqual(state, 'T', 'the command was left stopped');
    process.kill(Number(command), 'SIGKILL');
    const { signal } = await recorder.done;
    assert.equal(signal, 'SIGKILL');
  });
});

// -p checks its targets up front, then loads BPF (hundreds of ms) before it follows them with
// pidfd_open. A target that exits in between must end the recording at once, with a profile
// or a one-line error, never leave it waiting for a process that is gone.
describe('-p of a target that exits while the recorder starts', () => {
  it('ends every time, with a profile or one line and exit status 2', async (t) => {
    if (!requireRecorder(t)) return;
    const outcomes = { profile: 0, error: 0 };
    for (const lifeMs of [0, 100, 200, 300, 400, 500, 700, 900]) {
      const file = join(RESULTS_DIR, `exits-at-attach-${lifeMs}.json.gz`);
      rmSync(file, { force: true });
      const target = startBackground('sleep', [String(lifeMs / 1000)]);
      const r = await run(BPFPROF, ['record', '-p', String(target.pid), '-o', file], { timeoutMs: 20_000 });
      await target.done;
      if (r.code === 0) {
        outcomes.profile += 1;
        assert.ok(existsSync(file), `life ${lifeMs} ms: exit 0 without a profile`);
        new ProfileView(readProfile(file));
      } else {
        outcomes.error += 1;
        assert.equal(r.code, 2, `life ${lifeMs} ms: ${r.stderr}`);
        assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
        assert.match(r.stderr, /exited|no process|does not exist|not found/i);
        assert.ok(!existsSync(file), 'no profile file after an error');
      }
    }
    t.diagnostic(`${outcomes.profile} recordings ended with the target, ${outcomes.error} refused`);
  });
});
