// Up-front checks and help: what cannot work is refused before anything
// starts, with one line and exit status 2; --help shows examples, --version the version.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { BPFPROF, RESULTS_DIR, requireRecorder } from './lib/harness.mjs';

function bpfprof(args, { asNobody = false } = {}) {
  const [cmd, argv] = asNobody
    ? ['setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--inh-caps=-all', BPFPROF, ...args]]
    : [BPFPROF, args];
  return spawnSync(cmd, argv, { encoding: 'utf8', timeout: 60_000 });
}

function assertOneLineError(r, pattern) {
  assert.equal(r.status, 2, `exit ${r.status}: ${r.stderr}`);
  assert.match(r.stderr, /^bpfprof: [^\n]+\n$/, `not one line: ${JSON.stringify(r.stderr)}`);
  assert.match(r.stderr, pattern);
}

describe('refused before anything starts', () => {
  const marker = join(RESULTS_DIR, 'preflight-marker');

  it('an unprivileged user: told to use sudo, the command never runs', (t) => {
    if (!requireRecorder(t)) return;  // needs root to drop to nobody
    rmSync(marker, { force: true });
    const r = bpfprof(['record', '-o', '/tmp/preflight-nobody.json.gz', '--', 'touch', marker], { asNobody: true });
    assertOneLineError(r, /needs root \(or the capabilities CAP_BPF and CAP_PERFMON\).*sudo/);
    assert.ok(!existsSync(marker), 'the command ran');
  });

  it('an output directory that does not exist: the command never runs, no file', (t) => {
    if (!requireRecorder(t)) return;
    rmSync(marker, { force: true });
    const r = bpfprof(['record', '-o', '/nonexistent-dir/p.json.gz', '--', 'touch', marker]);
    assertOneLineError(r, /cannot create \/nonexistent-dir\/p\.json\.gz/);
    assert.ok(!existsSync(marker), 'the command ran');
  });

  it('conflicting modes, unknown options, bad values', () => {
    assertOneLineError(bpfprof(['record', '-a', '-p', '1']), /give exactly one of -- CMD, -p PID, -a or --cgroup PATH/);
    assertOneLineError(bpfprof(['record', '--cgroup', '/tmp', '-d', '1']), /--cgroup \/tmp: \/tmp is not a cgroup directory/);
    assertOneLineError(bpfprof(['record', '--bogus']), /--bogus/);
    assertOneLineError(bpfprof(['record', '-F', '0', '--', 'true']), /frequency/i);
    assertOneLineError(bpfprof(['record', '--call-graph', 'lbr', '--', 'true']), /--call-graph must be fp or dwarf/);
  });

  it('an unknown pid and a missing command', (t) => {
    if (!requireRecorder(t)) return;
    assertOneLineError(bpfprof(['record', '-p', '999999999']), /no process with pid 999999999|invalid pid/);
    const r = bpfprof(['record', '--', 'no-such-command-xyz']);
    assert.equal(r.status, 127);
    assert.match(r.stderr, /^bpfprof: no-such-command-xyz: command not found\n$/);
  });
});

describe('help and version', () => {
  it('--help and record --help show examples for the four modes', () => {
    const top = bpfprof(['--help']);
    assert.equal(top.status, 0);
    const record = bpfprof(['record', '--help']);
    assert.equal(record.status, 0);
    for (const text of [top.stdout, record.stdout]) {
      assert.match(text, /bpfprof record (-o \S+ )?(-F \d+ )?-- /);
      assert.match(text, /bpfprof record -p \d+/);
      assert.match(text, /bpfprof record -a -d \d+/);
      assert.match(text, /bpfprof record --cgroup \S+ -d \d+/);
    }
    assert.match(record.stdout, /--buffer-size/);
  });

  it('--version prints the version', () => {
    const r = bpfprof(['--version']);
    assert.equal(r.status, 0);
    assert.match(r.stdout, /^bpfprof \d+\.\d+\.\d+\n$/);
  });
});

describe('started through sudo', () => {
  // sudo is not installed here; it sets these variables, which is all bpfprof looks at.
  const sudoEnv = { ...process.env, SUDO_UID: '65534', SUDO_GID: '65534', SUDO_USER: 'nobody' };
  const run = (args) => spawnSync(BPFPROF, args, { encoding: 'utf8', env: sudoEnv, timeout: 120_000 });

  it('runs the command as the invoking user (uid, gid, groups, HOME) and gives them the profile', (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'sudo-user.json.gz');
    const ids = join('/tmp', `bpfprof-sudo-ids-${process.pid}`);
    rmSync(ids, { force: true });
    const r = run(['record', '-o', file, '--', 'sh', '-c', `echo "$(id -u) $(id -g) $(id -G) $HOME $USER" > ${ids}`]);
    assert.equal(r.status, 0, r.stderr);
    const [uid, gid, groups, home, user] = readFileSync(ids, 'utf8').trim().split(' ');
    assert.deepEqual([uid, gid, groups, user], ['65534', '65534', '65534', 'nobody']);
    assert.equal(home, '/nonexistent');
    const st = statSync(file);
    assert.equal(st.uid, 65534);
    assert.equal(st.gid, 65534);
    rmSync(ids, { force: true });
  });

  it('--run-as-root keeps the command root', (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'sudo-root.json.gz');
    const ids = join('/tmp', `bpfprof-sudo-root-${process.pid}`);
    const r = run(['record', '--run-as-root', '-o', file, '--', 'sh', '-c', `id -u > ${ids}`]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(readFileSync(ids, 'utf8').trim(), '0');
    rmSync(ids, { force: true });
  });
});
