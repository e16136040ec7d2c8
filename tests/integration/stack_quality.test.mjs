// Checks of lib/stack_quality.mjs (the classification real_programs.test.mjs and
// bench/real_programs.sh rely on), without root or a recorder: hand-made profiles and
// perf script text with known answers.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { makeProfile } from './lib/synthetic.mjs';
import {
  ROOT_FUNCTIONS, classifyFrames, describeQuality, elfEntryRelative, parsePerfScript, perfStackQuality,
  printedCompleteness, profileStackQuality, storedCompleteness,
} from './lib/stack_quality.mjs';

const U = (n) => [n, 'U'];
const K = (n) => [n, 'K'];
const O = (n) => [n, 'O'];
const MAIN = [U('_start'), U('__libc_start_main'), U('__libc_start_call_main'), U('main')];
const THREAD = [U('clone3'), U('start_thread'), U('worker')];

function profileWithEverything() {
  return makeProfile([
    {
      pid: 10, tid: 10, name: 'prog', processName: 'prog', isMainThread: true,
      samples: [
        // 3 + 1 ticks that reach _start, one of them in the kernel below main
        { stack: [...MAIN, U('hot')], cpuNs: 1e6, weight: 3 },
        { stack: [...MAIN, U('read'), K('ksys_read')], cpuNs: 1e6 },
        // marked cut, 2 ticks
        { stack: [O('[truncated]'), U('middle'), U('hot')], cpuNs: 1e6, weight: 2 },
        // cut silently: 1 tick ends in the middle of the program, 1 only has a leaf
        { stack: [U('middle'), U('hot')], cpuNs: 1e6 },
        { stack: [U('hot')], cpuNs: 1e6 },
        // not counted: an off-CPU wait (fractional weight) cut silently, a kernel-only tick
        { stack: [U('middle'), K('schedule'), O('[waiting for CPU]')], cpuNs: 0, weight: 7.5 },
        { stack: [K('ret_from_fork'), K('kthread')], cpuNs: 1e6 },
      ],
    },
    {
      pid: 10, tid: 11, name: 'worker', processName: 'prog', isMainThread: false,
      samples: [{ stack: [...THREAD, U('spin')], cpuNs: 1e6, weight: 2 }],
    },
    {
      pid: 20, tid: 20, name: 'other', processName: 'other', isMainThread: true,
      samples: [{ stack: [U('lost'), U('spin')], cpuNs: 1e6, weight: 5 }],
    },
  ]);
}

describe('stack_quality: bpfprof profiles', () => {
  it('classifies single stacks: root, [truncated], silent, kernel-only, off-CPU', () => {
    const f = (names) => names.map(([name, kind]) => ({ name, category: { U: 'User', K: 'Kernel', O: 'Other' }[kind] }));
    assert.equal(classifyFrames(f([...MAIN, U('x')])), 'root');
    assert.equal(classifyFrames(f([...THREAD])), 'root');
    assert.equal(classifyFrames(f([U('_dl_start_user'), U('_dl_start')])), 'root');
    assert.equal(classifyFrames(f([O('[truncated]'), U('x')])), 'truncated');
    assert.equal(classifyFrames(f([U('main'), U('x')])), 'silent');
    assert.equal(classifyFrames(f([K('entry_SYSCALL_64'), U('x')])), 'silent', 'a kernel frame above user frames is no root');
    assert.equal(classifyFrames(f([K('kthread')])), 'kernel-only');
    assert.equal(classifyFrames(f([U('x'), O('[sleeping]')])), 'off-cpu');
    assert.equal(classifyFrames([]), 'empty');
    for (const name of ['_start', '__libc_start_call_main', 'clone3', '__clone', 'start_thread', '_dl_start'])
      assert.ok(ROOT_FUNCTIONS.has(name), name);
    assert.ok(!ROOT_FUNCTIONS.has('main'), 'main is not a thread root: a stack must reach _start');
  });

  it('weights the on-CPU samples, per process and overall; off-CPU and kernel-only samples aside', () => {
    const q = profileStackQuality(profileWithEverything());
    // prog: root 3+1+2 (worker), truncated 2, silent 2; other: silent 5
    assert.equal(q.overall.root, 6);
    assert.equal(q.overall.truncated, 2);
    assert.equal(q.overall.silent, 7);
    assert.equal(q.overall.user, 15);
    assert.equal(q.overall.kernelOnly, 1);
    assert.equal(q.overall.offCpu, 7.5);
    assert.equal(q.overall.rootShare, 6 / 15);
    const prog = q.processes.find((g) => g.name === 'prog');
    assert.deepEqual([prog.root, prog.truncated, prog.silent, prog.user], [6, 2, 2, 10]);
    assert.equal(prog.silentShare, 0.2);
    const other = q.byName.find((g) => g.name === 'other');
    assert.equal(other.silentShare, 1);
    assert.deepEqual(q.overall.silentOutermost.map((s) => [s.name, s.weight]),
                     [['lost', 5], ['middle', 1], ['hot', 1]]);
    const text = describeQuality(q, { minSamples: 1 });
    assert.match(text, /prog \(10\): 10 user samples: 60\.0% reach a root, 20\.0% \[truncated\], 20\.0% cut silently/);
    assert.match(text, /lost: 5 samples, e\.g\. lost > spin/);
  });

  it("counts a misnamed frame at its file's ELF entry point as silent by name, as a root in real*Share", () => {
    const entry = elfEntryRelative(process.execPath);
    assert.ok(Number.isInteger(entry) && entry > 0, `entry point of ${process.execPath}: ${entry}`);
    assert.equal(elfEntryRelative('/nonexistent'), null);
    const profile = makeProfile([{
      pid: 1, tid: 1, name: 'node', processName: 'node', isMainThread: true,
      samples: [
        { stack: [U('node+0xentry'), U('__libc_start_main'), U('main'), U('hot')], cpuNs: 1e6, weight: 3 },
        { stack: [U('node+0xfar'), U('hot')], cpuNs: 1e6 },
      ],
    }]);
    profile.libs = [{ name: 'node', path: process.execPath, debugName: 'node', debugPath: process.execPath,
                      arch: 'x86_64', breakpadId: '', codeId: null }];
    const { shared } = profile;
    const setFrame = (name, address) => {
      const func = shared.funcTable.name.indexOf(shared.stringArray.indexOf(name));
      const frame = shared.frameTable.func.indexOf(func);
      shared.frameTable.address[frame] = address;
      shared.frameTable.lib[frame] = 0;
    };
    setFrame('node+0xentry', entry + 0x20); // a return address inside _start
    setFrame('node+0xfar', entry + 0x1000);
    const q = profileStackQuality(profile).overall;
    assert.equal(q.root, 0);
    assert.equal(q.silent, 4);
    assert.equal(q.silentAtEntry, 3);
    assert.equal(q.realRootShare, 0.75);
    assert.equal(q.realSilentShare, 0.25);
  });

  it('reads the stored and printed completeness figures', () => {
    const profile = profileWithEverything();
    assert.equal(storedCompleteness(profile), undefined);
    profile.meta.extra = [{ label: 'bpfprof', entries: [
      { label: 'Samples', format: 'integer', value: 10 },
      { label: 'User stacks complete', format: 'percentage', value: 0.917 },
    ] }];
    assert.equal(storedCompleteness(profile), 0.917);
    assert.equal(printedCompleteness('bpfprof: 3 samples\nbpfprof: user stacks complete: 99.7% (997 of 1000); unwinding'), 0.997);
    assert.equal(printedCompleteness('bpfprof: nothing'), undefined);
  });
});

// perf script -F comm,pid,tid,ip,sym,dso --no-inline, leaf first.
const PERF_TEXT = `perf-exec  99/99
	ffffffff81000000 exc_page_fault ([kernel.kallsyms])

sqlite3  100/100
	ffffffffa1b2c3d4 clear_page_erms ([kernel.kallsyms])
	           a6be2 sqlite3DbMallocSize (/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6)
	           27249 __libc_start_call_main (/usr/lib/x86_64-linux-gnu/libc.so.6)
	           27304 __libc_start_main@@GLIBC_2.34 (/usr/lib/x86_64-linux-gnu/libc.so.6)

sqlite3  100/100
	           a6be2 sqlite3DbMallocSize+0x12 (/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6)
	           200c3 [unknown] (/nonexistent/sqlite3)

sqlite3  100/100
	           a6be2 sqlite3DbMallocSize (/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6)
	           edde1 sqlite3VdbeExec (/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6)

my worker  100/101
	           1234 spin (/tmp/a.out)
	           5678 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)
	           9abc __clone3 (/usr/lib/x86_64-linux-gnu/libc.so.6)

swapper  0/0
	ffffffff81234567 default_idle ([kernel.kallsyms])

big_frame  300/300
	            1329 hot_leaf (/tmp/big_frame)
	            1377 big_frame (/tmp/big_frame)
	ffffffffffffffff [unknown] ([unknown])
`;

describe('stack_quality: perf script output', () => {
  it('parses comm, pid/tid and the frames, telling kernel from user by address', () => {
    const samples = parsePerfScript(PERF_TEXT);
    assert.equal(samples.length, 7);
    assert.deepEqual(samples.map((s) => s.comm), ['perf-exec', 'sqlite3', 'sqlite3', 'sqlite3', 'my worker', 'swapper', 'big_frame']);
    assert.deepEqual(samples[6].frames.map((f) => f.kernel), [false, false, false], "perf's end-of-unwind marker is no kernel frame");
    assert.deepEqual([samples[4].pid, samples[4].tid], ['100', '101']);
    assert.deepEqual(samples[1].frames.map((f) => f.kernel), [true, false, false, false]);
    assert.equal(samples[1].frames[3].sym, '__libc_start_main@@GLIBC_2.34');
    assert.equal(samples[1].frames[1].dso, '/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6');
  });

  it('classifies by the outermost user frame: root, [unknown] = marked cut, else silent; perf-exec aside', () => {
    const q = perfStackQuality(parsePerfScript(PERF_TEXT));
    assert.deepEqual([q.overall.root, q.overall.truncated, q.overall.silent, q.overall.kernelOnly], [2, 2, 1, 1]);
    const sqlite = q.byName.find((g) => g.name === 'sqlite3');
    assert.deepEqual([sqlite.root, sqlite.truncated, sqlite.silent], [1, 1, 1]);
    assert.deepEqual(q.overall.silentOutermost.map((s) => s.name), ['sqlite3VdbeExec']);
    assert.ok(!q.byName.some((g) => g.name === 'perf-exec'));
  });
});
