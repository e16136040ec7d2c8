// Pressure: a target with 10,000 threads, a process that execs 100 times a
// second, a pid that two processes have one after the other during -a, a target in another
// pid namespace, and a recorder under a memory limit (ulimit -v, a cgroup's). Each ends
// with a correct profile or one clear line, never a crash.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import {
  BPFPROF, ProfileView, RESULTS_DIR, describeOnce, fixturePath, pct, readProfile, recordFixture,
  requireRecorder, run, sleep, startBackground, untilSampling,
} from './lib/harness.mjs';

// 37.5 MB measured (issue 54's goal: 40); 70 MB before the walker objects stopped parsing the
// kernel's whole BTF, the capture was released before the writing, the rings were mapped once
// and kallsyms was read for the profile's addresses only.
const MAX_RECORDER_RSS_MB = 44;

// Runs argv under python's getrusage: { code, signal, stdout, stderr, maxRssMb }.
async function runMeasured(argv, timeoutMs = 120_000) {
  const script = 'import resource,subprocess,sys\n' +
    'r = subprocess.run(sys.argv[1:])\n' +
    'print(f"maxrss_kb={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}", file=sys.stderr)\n' +
    'sys.exit(r.returncode if r.returncode >= 0 else 128 - r.returncode)\n';
  const r = await run('python3', ['-c', script, ...argv], { timeoutMs });
  const kb = Number(/maxrss_kb=(\d+)/.exec(r.stderr)?.[1]);
  return { ...r, maxRssMb: kb / 1024 };
}

function userNames(s) {
  return s.frames.filter((f) => f.category === 'User').map((f) => f.name);
}

// A frame the symbolizer could not name: an address, or an offset in its file.
function unnamed(name) {
  return name === '[truncated]' || /^0x[0-9a-f]+$/.test(name) || /\+0x[0-9a-f]+$/.test(name);
}

describeOnce('a target with 10,000 threads', () => {
  it('every thread is in the profile; memory stays bounded; losses are counted', async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'pressure-threads.json.gz');
    rmSync(file, { force: true });
    const r = await runMeasured([BPFPROF, 'record', '-o', file, '--', fixturePath('many_threads'), '1000', '10000']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /threads started=10000/);
    const view = new ProfileView(readProfile(file));
    const printed = /from 1 processes and (\d+) threads; (\d+) events lost/.exec(r.stderr);
    assert.ok(printed, r.stderr);
    const lost = Number(printed[2]);
    t.diagnostic(`${view.threads.length} threads in the profile, ${printed[1]} printed, ${lost} events ` +
                 `lost, recorder max RSS ${r.maxRssMb.toFixed(0)} MB`);
    assert.equal(view.threads.length, Number(printed[1]));
    // Each thread ran and waited: each shows up, unless its events were lost (and counted).
    assert.ok(view.threads.length >= 10001 || lost > 0, `${view.threads.length} threads, nothing lost`);
    assert.ok(view.threads.length >= 9000, `${view.threads.length} threads`);
    assert.ok(r.maxRssMb < 1024, `recorder max RSS ${r.maxRssMb.toFixed(0)} MB`);
  });
});

describe('a process that execs 100 times a second', () => {
  it('each image is named: the spin of every generation is exec_storm > storm_spin', async (t) => {
    if (!requireRecorder(t)) return;
    const rec = await recordFixture('exec_storm', 2000, { label: 'pressure-exec-storm', args: ['100'] });
    const generations = Number(/generations=(\d+)/.exec(rec.result.stdout)?.[1]);
    const view = new ProfileView(rec.profile);
    let onCpu = 0;
    let named = 0;
    let rooted = 0;
    const inExec = { oldStack: 0, exec: 0, truncated: 0 };
    for (const th of view.threads.filter((x) => x.processName === 'exec_storm')) {
      for (const s of view.samples(th)) {
        if (!(s.cpuDelta > 0)) continue;
        // Inside execve the old image is being replaced: not a generation's spin (their share
        // grows with the machine's load). Before the new mm is in, the old stack is walked
        // (main > execv); after, there is none: the sample begins with [exec], never cut.
        if (s.frames.some((f) => f.name.startsWith('do_execveat_common') || f.name === '__x64_sys_execve')) {
          const root = s.frames[0].name;
          const kind = root === '[exec]' ? 'exec' : root === '[truncated]' ? 'truncated' : 'oldStack';
          inExec[kind] += s.weight;
          continue;
        }
        const names = userNames(s);
        if (!names.length) continue;
        onCpu += s.weight;
        // Every frame named, from the image's own _start: each image's stacks unwound with its
        // own mappings (they were once unwound with the last image's of a batch, and ended at
        // __libc_start_call_main, found by frame pointers). Besides the spin: ld.so's and
        // libc's start-up, a fixed CPU cost per image (its share grows with the machine's
        // load, as the spin is timed by the clock).
        if (names[0] === '_start' && !names.some(unnamed)) rooted += s.weight;
        if (names.includes('storm_spin') && names.includes('main')) named += s.weight;
      }
    }
    t.diagnostic(`${generations} generations; of ${Math.round(onCpu)} on-CPU user samples ${pct(rooted / onCpu)} ` +
                 `named from _start, ${pct(named / onCpu)} in main > storm_spin; inside execve (left out): ` +
                 `${inExec.oldStack} with the old stack, ${inExec.exec} [exec], ${inExec.truncated} [truncated]`);
    assert.ok(generations >= 20, `${generations} generations`);
    assert.ok(rooted >= 0.98 * onCpu, `${pct(rooted / onCpu)} of the on-CPU user samples named from _start`);
    assert.ok(named >= 0.75 * onCpu, `${pct(named / onCpu)} in storm_spin`);
    assert.equal(inExec.truncated, 0, 'samples inside execve begin with [truncated]');
    assert.ok(inExec.exec > 0, 'no sample inside execve after the old image was gone ([exec])');
  });
});

describeOnce('a pid reused during -a', () => {
  it('gives two processes, each with its own function only', async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'pressure-pid-reuse.json.gz');
    rmSync(file, { force: true });
    const recorder = startBackground(BPFPROF, ['record', '-a', '-d', '6', '-o', file]);
    await untilSampling(recorder);
    const cycler = await run(fixturePath('pid_cycler'), ['500'], { timeoutMs: 90_000 });
    const done = await recorder.done;
    assert.equal(done.code, 0, done.stderr);
    const pid = /reused pid=(\d+)/.exec(cycler.stdout)?.[1];
    assert.ok(pid, `the pid was not reused: ${cycler.stdout}`);
    const view = new ProfileView(readProfile(file));
    const owners = view.threads.filter((x) => String(x.tid) === pid);
    const describeOwner = (th) => {
      const names = new Set(view.samples(th).flatMap(userNames));
      return { name: th.name, first: names.has('first_owner'), second: names.has('second_owner') };
    };
    const seen = owners.map(describeOwner);
    t.diagnostic(`pid ${pid}: ${JSON.stringify(seen)}`);
    const first = seen.filter((o) => o.first);
    const second = seen.filter((o) => o.second);
    assert.equal(first.length, 1, JSON.stringify(seen));
    assert.equal(second.length, 1, JSON.stringify(seen));
    assert.ok(!first[0].second && !second[0].first, `one thread holds both: ${JSON.stringify(seen)}`);
    assert.equal(first[0].name, 'first-owner');
    assert.equal(second[0].name, 'second-owner');
  });
});

describeOnce('a target in another pid namespace', () => {
  it('shows the host pids (as the kernel sees them), and the target\'s functions', async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'pressure-pidns.json.gz');
    rmSync(file, { force: true });
    const r = await run(BPFPROF, ['record', '-o', file, '--', 'unshare', '--pid', '--fork', '--mount-proc',
                                  fixturePath('busy'), '800']);
    assert.equal(r.code, 0, r.stderr);
    const nsTid = /cputime tid=(\d+)/.exec(r.stdout)?.[1];
    const view = new ProfileView(readProfile(file));
    const busy = view.threads.find((x) => x.processName === 'busy');
    assert.ok(busy, view.threads.map((x) => x.processName).join(', '));
    const share = view.share(busy, (frames) => frames.some((f) => f.name === 'inner_spin'));
    t.diagnostic(`busy: tid ${nsTid} in its namespace, pid ${busy.pid} tid ${busy.tid} in the profile; ` +
                 `${pct(share.share)} in inner_spin`);
    assert.equal(nsTid, '1');  // the namespace's first process
    assert.notEqual(String(busy.pid), '1');
    assert.equal(String(busy.tid), String(busy.pid));
    assert.ok(share.share >= 0.8, pct(share.share));
  });
});

// The recorder's own resident memory for a short command: its ring buffer (mapped twice), BPF
// maps, libraries and heap. bench/memory.py gives it by part; issue 54's goal is 40 MB.
describeOnce('the recorder\'s own memory', () => {
  it(`record -- true peaks at <= ${MAX_RECORDER_RSS_MB} MB resident`, async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'pressure-rss.json.gz');
    const r = await runMeasured([BPFPROF, 'record', '-o', file, '--', 'true']);
    assert.equal(r.code, 0, r.stderr);
    t.diagnostic(`recorder max RSS ${r.maxRssMb.toFixed(1)} MB`);
    assert.ok(r.maxRssMb <= MAX_RECORDER_RSS_MB, `recorder max RSS ${r.maxRssMb.toFixed(1)} MB`);
  });
});

describeOnce('the recorder under a memory limit', () => {
  it('ulimit -v too small: one line saying so, exit 2, no profile', async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'pressure-ulimit.json.gz');
    rmSync(file, { force: true });
    const r = await run('sh', ['-c', `ulimit -v 100000; exec "$0" record -o "$1" -- true`, BPFPROF, file]);
    t.diagnostic(r.stderr.trim());
    assert.equal(r.signal, null);
    assert.equal(r.code, 2, r.stderr);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /out of memory.*memory limit/);
    assert.ok(!existsSync(file));
  });

  it('a cgroup memory limit below the BPF maps: one line saying so, exit 2', async (t) => {
    if (!requireRecorder(t)) return;
    // cgroup v1's memory controller here; v2 where it is mounted alone.
    const v1 = '/sys/fs/cgroup/memory';
    const v2 = existsSync('/sys/fs/cgroup/cgroup.controllers') ? '/sys/fs/cgroup' : null;
    const root = existsSync(`${v1}/memory.limit_in_bytes`) ? v1 : v2;
    assert.ok(root, 'no cgroup memory controller');
    const group = join(root, `bpfprof-test-${process.pid}`);
    mkdirSync(group, { recursive: true });
    try {
      writeFileSync(join(group, root === v1 ? 'memory.limit_in_bytes' : 'memory.max'), String(32 << 20));
      const r = await run('sh', ['-c', 'echo $$ > "$0/cgroup.procs"; exec "$1" record -o /dev/null -- true',
                                 group, BPFPROF]);
      t.diagnostic(r.stderr.trim());
      assert.equal(r.signal, null);
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, /out of memory for their maps/);
    } finally {
      for (let i = 0; i < 50; ++i) {
        try {
          rmdirSync(group);
          break;
        } catch {
          await sleep(100);
        }
      }
    }
  });
});
