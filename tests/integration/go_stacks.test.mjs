// Go stacks walked in the kernel (a Go binary's unwind table from Go's pcsp table; the walk
// ends where Go's own traceback does): the go_cpu fixture unstripped and stripped, esbuild
// (go1.26, stripped) and Debian's fzf have complete stacks, walked in the kernel, at a few
// hundred ring-buffer bytes a sample, with the nesting Go's traceback gives; so does a Go
// program recorded with -p. Goroutines blocking on channels and a mutex leave the CPU with
// complete stacks inside Go's scheduler; a cgo program's stacks go through its calls into C and
// back, to the goroutine's root. Go's own CPU profile (runtime/pprof) of go_cpu, taken during
// the same run, has the same top functions.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  INTEGRATION_DIR, IS_CI, ProfileView, RESULTS_DIR, STATE_FRAMES, fixturePath, pct, recordFixture, recordWith,
  recorderUnavailableReason, requireRecorder, run, saveMetrics, sleep, startBackground, weightOf,
} from './lib/harness.mjs';
import {
  isRootName, recordingFigures, TRUNCATED,
} from './lib/stack_quality.mjs';

const DURATION_MS = 3000;
const ESBUILD = join(INTEGRATION_DIR, 'node_modules', '@esbuild', 'linux-x64', 'bin', 'esbuild');
const FZF = '/usr/bin/fzf';

// Where Go's own traceback ends (funcFlag TOPFRAME or SPWRITE: a goroutine's or thread's
// first function, or a switch of stacks), as the profile names them: the kernel walk ends
// there as at a thread root.
// Where a Go stack is complete: a goroutine's first function, a thread's (mstart, rt0_go and
// the entry point for the first), or the scheduler's on the system stack (mcall, and morestack
// once it has dropped the goroutine it preempts), as Go's own profiles root them.
// A stack that ends at a switch of stacks, a signal trampoline or a vDSO caller was cut.
const GO_ROOTS = new Set(['runtime.goexit', 'runtime.mstart', 'runtime.rt0_go', 'runtime.mcall',
                          'runtime.morestack', '_rt0_amd64_linux', '_rt0_amd64']);
const VDSO_CALLERS = new Set(['time.now', 'runtime.nanotime1']);
const isGoOrCRoot = (name) => GO_ROOTS.has(name) || isRootName(name);

// A name made from an address or the ELF entry point, not a function's own.
const UNNAMED = /^(_start|fn_0x[0-9a-f]+|0x[0-9a-f]+|)$|\+0x[0-9a-f]+$/;

const isOffCpu = (frames) => frames.length > 0 && STATE_FRAMES.has(frames.at(-1).name);
const userFrames = (frames) => frames.filter((f) => f.category !== 'Kernel' && !STATE_FRAMES.has(f.name));

// The samples of the processes named `name` (all when null), on-CPU or off-CPU, each with its
// user frames (root first).
function samplesOf(view, name, { offCpu = false } = {}) {
  const out = [];
  for (const thread of view.threads) {
    if (name && thread.processName !== name) continue;
    for (const s of view.samples(thread)) {
      if (!s.frames.length || isOffCpu(s.frames) !== offCpu) continue;
      const user = userFrames(s.frames);
      if (!user.length && s.frames[0].name !== TRUNCATED) continue;  // kernel-only
      out.push({ ...s, user, pid: thread.pid });
    }
  }
  return out;
}

// A user stack that reaches a root: its outermost frame, above any kernel frame, is one.
const reachesRoot = (s) => s.frames[0].category !== 'Kernel' && isGoOrCRoot(s.frames[0].name);

function tally(map, key, weight) {
  map.set(key, (map.get(key) ?? 0) + weight);
}

function top(map, total, limit = 6) {
  return [...map].sort((a, b) => b[1] - a[1]).slice(0, limit)
    .map(([k, w]) => `${pct(w / total)} ${k}`).join('\n    ');
}

// The most common user stacks, root first, for the diagnostics.
function topStacks(samples, limit = 6) {
  const counts = new Map();
  for (const s of samples) tally(counts, s.user.map((f) => f.name).join(' > ') || s.frames[0].name, s.weight);
  return top(counts, weightOf(samples), limit);
}


// Completeness, names and the recorder's own figures of the Go process `name` in `rec`.
// With `startupMs`, the stacks of the recording's first milliseconds are only counted apart
// (an attach's first samples can come before the process's mappings reach the kernel; their
// fallback copies of a Go stack, with no CFI to unwind them, end at [truncated]), and
// `maxRingBytes` bounds the bytes a sample.
function checkGoProgram(t, rec, name, metrics, { minSamples = 300, startupMs = 0, maxRingBytes = 2048 } = {}) {
  let t0 = Infinity;
  for (const thread of rec.view.threads) for (const s of rec.view.samples(thread)) t0 = Math.min(t0, s.time);
  const everySample = samplesOf(rec.view, name);
  const samples = everySample.filter((s) => s.time - t0 >= startupMs);
  if (startupMs) {
    const early = everySample.filter((s) => s.time - t0 < startupMs);
    metrics.startupSamples = weightOf(early);
    metrics.startupRootShare = weightOf(early, reachesRoot) / (weightOf(early) || 1);
    t.diagnostic(`first ${startupMs} ms: ${metrics.startupSamples} samples, ${pct(metrics.startupRootShare)} reach a root`);
  }
  const total = weightOf(samples);
  const rooted = weightOf(samples, reachesRoot);
  const truncated = weightOf(samples, (s) => s.frames[0].name === TRUNCATED);
  const named = weightOf(samples, (s) => s.user.length && !UNNAMED.test(s.user.at(-1).name));
  const outermost = new Map();
  // Where each cut stack ends: its outermost frame, or the one under [truncated].
  for (const s of samples) {
    if (reachesRoot(s)) continue;
    const below = s.user.find((f) => f.name !== TRUNCATED)?.name ?? '(kernel)';
    const cutAt = s.frames[0].name === TRUNCATED ? `[truncated] > ${below}` : s.frames[0].name;
    tally(outermost, cutAt, s.weight);
  }
  const f = recordingFigures(rec);
  Object.assign(metrics, {
    samples: total, rootShare: rooted / total, truncatedShare: truncated / total,
    namedLeafShare: named / total, ...f,
  });
  t.diagnostic(`${name}: ${total} on-CPU samples; reach a Go or C root ${pct(metrics.rootShare)}, ` +
               `[truncated] ${pct(metrics.truncatedShare)}, named leaf ${pct(metrics.namedLeafShare)}; ` +
               `summary: complete ${pct(f.printedComplete)}, walked in the kernel ${pct(f.kernelShare)}, ` +
               `${f.ringBytes} ring-buffer bytes per sample (${f.ringBytesBesideCopies} beside the stack copies)`);
  if (outermost.size) t.diagnostic(`not at a root:\n    ${top(outermost, total)}`);
  // Why the kernel's walks stopped, and which tables it had: what a cut needs explained.
  if (f.kernelShare < 0.99 || metrics.rootShare < 0.99)
    t.diagnostic(`kernel walks that fell back: ${f.fellBack}\n    ` +
                 (rec.result.stderr.match(/^bpfprof: (Unwind tables|user stacks complete).*$/gm) ?? []).join('\n    '));
  t.diagnostic(`top stacks:\n    ${topStacks(samples)}`);
  assert.ok(total >= minSamples, `${name}: only ${total} on-CPU samples`);
  assert.ok(metrics.rootShare >= 0.99, `${name}: ${pct(metrics.rootShare)} of stacks reach a root`);
  assert.ok(metrics.namedLeafShare >= 0.99, `${name}: ${pct(metrics.namedLeafShare)} with a named leaf`);
  // The figure printed is the profile's, and the profile's is what its stacks show.
  assert.ok(f.printedComplete !== undefined && f.storedComplete !== undefined,
            `no completeness figure:\n${rec.result.stderr}`);
  assert.ok(Math.abs(f.printedComplete - f.storedComplete) <= 0.0005,
            `printed ${pct(f.printedComplete)}, stored ${pct(f.storedComplete)}`);
  const all = samplesOf(rec.view, null).filter((s) => s.time - t0 >= startupMs);
  const allRooted = weightOf(all, reachesRoot) / weightOf(all);
  if (!startupMs) assert.ok(Math.abs(allRooted - f.storedComplete) <= 0.005,
            `the profile's stacks: ${pct(allRooted)} reach a root; meta.extra says ${pct(f.storedComplete)}`);
  // The recorder's figures, in the summary and in meta.extra alike.
  assert.ok(f.kernelShare >= 0.95, `walked in the kernel: ${pct(f.kernelShare)}`);
  assert.equal(f.kernelShareMeta, f.kernelShare);
  // A stack copy (about 25 KB) is the fallback of a sample taken before its table was loaded:
  // their share is bounded above; what the walks cost is bounded here.
  assert.ok(f.ringBytesBesideCopies > 0 && f.ringBytesBesideCopies <= maxRingBytes,
            `${f.ringBytes} ring-buffer bytes per sample, ${f.ringBytesBesideCopies} beside the stack copies`);
  assert.equal(f.ringBytesMeta, f.ringBytes);
  return samples;
}

// Of the samples in `fn`, the share whose user stack starts with `chain` and goes on into
// a function matching `inner` below it.
function nestingShare(samples, chain, inner) {
  const inFn = samples.filter((s) => s.user.some((f) => f.name === chain.at(-1)));
  const nested = inFn.filter((s) => chain.every((name, i) => s.user[i]?.name === name) &&
                                    s.user.slice(chain.length).some((f) => inner.test(f.name)));
  return { of: weightOf(inFn), share: weightOf(nested) / (weightOf(inFn) || 1) };
}

// recordFixture with a ProfileView of its profile.
async function recordGo(fixture, durationMs, label) {
  const rec = await recordFixture(fixture, durationMs, { label });
  rec.view = new ProfileView(rec.profile);
  return rec;
}

// A missing program fails under CI=true and skips elsewhere.
function requireFile(t, path, why) {
  if (existsSync(path)) return true;
  if (IS_CI) assert.fail(`${path} missing under CI=true: ${why}`);
  t.skip(`${path} missing: ${why}`);
  return false;
}

for (const [fixture, label] of [['go/go_cpu', 'go_cpu'], ['go/go_cpu_stripped', 'go_cpu_stripped']]) {
  describe(`${label}: on-CPU Go stacks`, () => {
    let rec;
    const metrics = {};
    before(async () => {
      if (recorderUnavailableReason() || !existsSync(fixturePath(fixture))) return;
      rec = await recordFixture(fixture, DURATION_MS, { label: `go_stacks_${label}`, args: ['clock', 'signals'] });
      rec.view = new ProfileView(rec.profile);
    });

    it('reach a root, walked in the kernel, at a few hundred ring-buffer bytes a sample', (t) => {
      if (!requireRecorder(t) || !requireFile(t, fixturePath(fixture), 'go not installed')) return;
      checkGoProgram(t, rec, label, metrics);
    });

    it('nest as Go\'s traceback does: runtime.goexit > main.main.func1 > main.hashWork > sha256', (t) => {
      if (!requireRecorder(t) || !requireFile(t, fixturePath(fixture), 'go not installed')) return;
      const samples = samplesOf(rec.view, label);
      const hash = nestingShare(samples, ['runtime.goexit', 'main.main.func1', 'main.hashWork'], /^crypto\/sha256\./);
      const sort = nestingShare(samples, ['runtime.goexit', 'main.main.func3', 'main.sortWork'], /^(sort\.|main\.)/);
      metrics.hashNesting = hash.share;
      metrics.sortNesting = sort.share;
      t.diagnostic(`hashWork: ${hash.of} samples, ${pct(hash.share)} goexit > main.main.func1 > ` +
                   `main.hashWork > crypto/sha256...; sortWork: ${sort.of}, ${pct(sort.share)}`);
      assert.ok(hash.of >= 50 && hash.share >= 0.95, `hashWork ${hash.of} samples, ${pct(hash.share)}`);
      assert.ok(sort.of >= 50 && sort.share >= 0.9, `sortWork ${sort.of} samples, ${pct(sort.share)}`);
      saveMetrics(`go_stacks_${label}`, metrics);
    });

    // time.Now and time.Since call the vDSO on the system stack (g0): the stack goes on from the
    // vDSO through time.now or runtime.nanotime1 (rbp-based rows where they switched) into the
    // goroutine that asked for the time.
    it('goes on from the vDSO into the goroutine that read the clock: runtime.goexit > main.clockWork > time.Now', (t) => {
      if (!requireRecorder(t) || !requireFile(t, fixturePath(fixture), 'go not installed')) return;
      const samples = samplesOf(rec.view, label).filter((s) => s.user.some((f) => f.name.startsWith('__vdso_')));
      // clockWork reads the clock in its loop; signalWork (the `signals` goroutine) once a round.
      const chain = ['runtime.goexit', /^main\.main\.func\d$/, /^main\.(clockWork|signalWork)$/];
      const joined = weightOf(samples, (s) => chain.every((name, i) => s.user[i]?.name.match(name)) &&
                                              s.user.some((f) => VDSO_CALLERS.has(f.name)));
      metrics.vdsoSamples = weightOf(samples);
      metrics.vdsoJoined = joined / (weightOf(samples) || 1);
      t.diagnostic(`${weightOf(samples)} on-CPU samples in the vDSO, ${pct(metrics.vdsoJoined)} ` +
                   `runtime.goexit > main.main.funcN > main.clockWork or main.signalWork > ... > time.now or runtime.nanotime1 > __vdso_...; top:\n    ${topStacks(samples, 3)}`);
      assert.ok(weightOf(samples) >= 50, `${weightOf(samples)} samples in the vDSO`);
      const cut = samples.filter((s) => !(chain.every((name, i) => s.user[i]?.name.match(name)) &&
                                          s.user.some((f) => VDSO_CALLERS.has(f.name))));
      assert.ok(metrics.vdsoJoined >= 0.98, `joined to the goroutine: ${pct(metrics.vdsoJoined)}; the others:\n` +
                                            `    ${topStacks(cut, 5)}`);
    });

    // A goroutine signals the process in a loop: a sample in Go's signal handler goes on
    // through runtime.sigtramp and the kernel's signal frame (the restorer,
    // runtime.sigreturn) into the code the signal interrupted, and on to its goroutine's root.
    it('goes on from Go\'s signal handler into the code it interrupted', (t) => {
      if (!requireRecorder(t) || !requireFile(t, fixturePath(fixture), 'go not installed')) return;
      const inHandler = samplesOf(rec.view, label).filter((s) => s.user.some((f) => f.name === 'runtime.sigtramp'));
      const total = weightOf(inHandler);
      const rooted = weightOf(inHandler, reachesRoot);
      const beyond = weightOf(inHandler, (s) => s.user.findIndex((f) => f.name === 'runtime.sigtramp') > 1);
      metrics.signalHandlerSamples = total;
      metrics.signalHandlerRooted = rooted / (total || 1);
      t.diagnostic(`${total} on-CPU samples in the signal handler: ${pct(rooted / (total || 1))} reach a root, ` +
                   `${pct(beyond / (total || 1))} with frames above the handler; top:\n    ${topStacks(inHandler, 3)}`);
      assert.ok(total >= 15, `${total} samples in the signal handler`);
      assert.ok(rooted / total >= 0.97, `${pct(rooted / total)} reach a root`);
      assert.ok(beyond / total >= 0.97, `${pct(beyond / total)} go on above the handler`);
    });

    // The runtime's work on the system stack (the garbage collector's, large allocations')
    // goes on into the goroutine it is done for: runtime.goexit > runtime.gcBgMarkWorker >
    // runtime.systemstack > ... > runtime.gcDrain, not a stack that begins at systemstack.
    it('goes on from runtime.systemstack into the goroutine that called it', (t) => {
      if (!requireRecorder(t) || !requireFile(t, fixturePath(fixture), 'go not installed')) return;
      const samples = samplesOf(rec.view, label).filter((s) => s.user.some((f) => f.name === 'runtime.systemstack'));
      const joined = weightOf(samples, (s) => s.user[0].name === 'runtime.goexit') / weightOf(samples);
      t.diagnostic(`${weightOf(samples)} on-CPU samples through runtime.systemstack, ${pct(joined)} from runtime.goexit`);
      assert.ok(weightOf(samples) >= 10, `${weightOf(samples)} samples through runtime.systemstack`);
      assert.ok(joined >= 0.95, `joined to the goroutine: ${pct(joined)}`);
    });

    // Go names no thread: each is named after what it ran most (go_thread_roles.h). The five
    // goroutines keep the two Ps busy for the run, and sysmon has its own M. Which goroutine an
    // M ran most is the scheduler's choice (they move between Ms at each preemption): three
    // Ms were once all named main.sortWork. So the Ms that ran them are named after one of them.
    it('names its threads after what they ran: the goroutines\' functions, runtime.sysmon', (t) => {
      if (!requireRecorder(t) || !requireFile(t, fixturePath(fixture), 'go not installed')) return;
      const names = rec.view.threads.filter((th) => th.processName === label).map((th) => th.name);
      t.diagnostic(`threads: ${names.join(', ')}`);
      assert.ok(names.includes(`${label} (runtime.sysmon)`), names.join(', '));
      const work = new Set(['main.hashWork', 'main.jsonWork', 'main.sortWork', 'main.clockWork', 'main.signalWork']
        .map((fn) => `${label} (${fn})`));
      const workers = names.filter((name) => work.has(name));
      assert.ok(workers.length >= 2, `threads named after the goroutines' work: ${workers.join(', ')}`);
    });
  });
}

describe('esbuild (go1.26, stripped): on-CPU Go stacks', () => {
  let rec;
  const metrics = {};
  before(async () => {
    if (recorderUnavailableReason() || !existsSync(ESBUILD)) return;
    // A generated program of 3 MB, bundled over and over: 2-4 s of esbuild's own work. A
    // loop of a fixed count, so that nothing else starts processes (whose first stacks can
    // fall back to copies) and weighs in the recording's figures.
    const dir = mkdtempSync(join(tmpdir(), 'bpfprof-esbuild-'));
    const lines = [];
    for (let i = 0; i < 20000; i++) {
      lines.push(`export function f${i}(a, b) { const o = { k: a + ${i}, s: \`v\${b}\`, ` +
                 `l: [a, b, ${i}].map((x) => x * 2) }; return o.k * ${i % 97} + o.s.length + o.l.length; }`);
    }
    writeFileSync(join(dir, 'big.js'), lines.join('\n'));
    writeFileSync(join(dir, 'entry.js'), "import * as big from './big.js'; console.log(Object.keys(big).length);");
    const script = 'for i in 1 2 3 4 5; do ' +
                   `${ESBUILD} ${join(dir, 'entry.js')} --bundle --minify --outfile=${join(dir, 'out.js')} ` +
                   '--log-level=error || exit 1; done';
    try {
      rec = await recordWith('go_stacks_esbuild', ['--', 'sh', '-c', script]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reach a root, walked in the kernel, at a few hundred ring-buffer bytes a sample', (t) => {
    if (!requireRecorder(t) || !requireFile(t, ESBUILD, 'npm install in tests/integration')) return;
    checkGoProgram(t, rec, 'esbuild', metrics);
    const samples = samplesOf(rec.view, 'esbuild');
    assert.ok(samples.some((s) => s.user[0]?.name === 'runtime.goexit' &&
                                  s.user.some((f) => f.name.startsWith('github.com/evanw/esbuild/'))),
              'no esbuild goroutine from runtime.goexit');
    saveMetrics('go_stacks_esbuild', metrics);
  });
});

describe('Debian\'s fzf: on-CPU Go stacks', () => {
  let rec;
  let dir;
  const metrics = {};
  before(async () => {
    if (recorderUnavailableReason() || !existsSync(FZF)) return;
    dir = mkdtempSync(join(tmpdir(), 'bpfprof-fzf-'));
    const input = join(dir, 'lines');
    writeFileSync(input, Array.from({ length: 3_000_000 }, (_, i) => String(i + 1)).join('\n') + '\n');
    const script = `for i in 1 2 3; do ${FZF} --filter 12345 < ${input} > /dev/null || exit 1; done`;
    rec = await recordWith('go_stacks_fzf', ['--', 'sh', '-c', script]);
  });
  after(() => dir && rmSync(dir, { recursive: true, force: true }));

  it('reach a root, walked in the kernel, at a few hundred ring-buffer bytes a sample', (t) => {
    if (!requireRecorder(t) || !requireFile(t, FZF, 'scripts/install-deps.sh installs fzf')) return;
    checkGoProgram(t, rec, 'fzf', metrics);
    saveMetrics('go_stacks_fzf', metrics);
  });
});

describe('a Go program recorded with -p (started before bpfprof)', () => {
  let rec;
  let target;
  const metrics = {};
  before(async () => {
    if (recorderUnavailableReason() || !existsSync(fixturePath('go/go_cpu_stripped'))) return;
    target = startBackground(fixturePath('go/go_cpu_stripped'), ['4000']);
    await sleep(500);  // running Go code, all its threads started, before the attach
    rec = await recordWith('go_stacks_attach', ['-p', String(target.pid)]);
    const exit = await target.done;
    assert.equal(exit.code, 0, `go_cpu_stripped failed: ${exit.stderr}`);
  });

  it('has its stacks complete and walked in the kernel from the attach on', (t) => {
    if (!requireRecorder(t) || !requireFile(t, fixturePath('go/go_cpu_stripped'), 'go not installed')) return;
    // Every sample from the first on: the tables of the files the process maps are loaded
    // before it is tracked (a stripped Go binary's stack copy could not be unwound).
    const samples = checkGoProgram(t, rec, 'go_cpu_stripped', metrics);
    const hash = nestingShare(samples, ['runtime.goexit', 'main.main.func1', 'main.hashWork'], /^crypto\/sha256\./);
    t.diagnostic(`hashWork: ${hash.of} samples, ${pct(hash.share)} nested as Go's traceback`);
    assert.ok(hash.of >= 50 && hash.share >= 0.95, `hashWork ${hash.of} samples, ${pct(hash.share)}`);
    saveMetrics('go_stacks_attach', metrics);
  });
});

describe('go_block: goroutines waiting on channels and a mutex (off-CPU)', () => {
  let rec;
  const metrics = {};
  before(async () => {
    if (recorderUnavailableReason() || !existsSync(fixturePath('go/go_block'))) return;
    rec = await recordGo('go/go_block', DURATION_MS, 'go_stacks_block');
  });

  it('leaves the CPU with complete stacks inside Go\'s scheduler', (t) => {
    if (!requireRecorder(t) || !requireFile(t, fixturePath('go/go_block'), 'go not installed')) return;
    const off = samplesOf(rec.view, 'go_block', { offCpu: true });
    const total = weightOf(off);
    const rooted = weightOf(off, reachesRoot) / total;
    const parked = weightOf(off, (s) => s.user.some((f) => f.name === 'runtime.park_m')) / total;
    const futex = weightOf(off, (s) => s.user.some((f) => f.name === 'runtime.park_m') &&
                                       s.user.at(-1)?.name === 'runtime.futex' &&
                                       s.user.some((f) => f.name === 'runtime.futexsleep')) / total;
    const f = recordingFigures(rec);
    Object.assign(metrics, { offCpuMs: total, rootShare: rooted, parkShare: parked, futexSleepShare: futex,
                             offCpuKernelShare: f.offCpuKernelShare, ringBytes: f.ringBytes });
    t.diagnostic(`go_block: ${total.toFixed(0)} ms off the CPU; reach a root ${pct(rooted)}; ` +
                 `in runtime.park_m ${pct(parked)}, park_m ... futexsleep > futex ${pct(futex)}; ` +
                 `off-CPU stacks walked in the kernel ${pct(f.offCpuKernelShare)}; ${f.ringBytes} ring bytes a sample`);
    t.diagnostic(`top off-CPU stacks:\n    ${topStacks(off, 8)}`);
    assert.ok(total > 500, `${total} ms off the CPU`);
    assert.ok(rooted >= 0.99, `off-CPU: ${pct(rooted)} reach a root`);
    assert.ok(parked >= 0.2, `runtime.park_m: ${pct(parked)}`);
    assert.ok(futex >= 0.05, `runtime.park_m ... runtime.futexsleep > runtime.futex: ${pct(futex)}`);
    assert.ok(f.offCpuKernelShare >= 0.95, `off-CPU walked in the kernel: ${pct(f.offCpuKernelShare)}`);
    // Its on-CPU stacks too: the goroutines' work between waits.
    checkGoProgram(t, rec, 'go_block', metrics, { minSamples: 100 });
    saveMetrics('go_stacks_block', metrics);
  });
});

// Go calls C (crunch > leaf_work) and C calls back into Go (goCallback > goHash > leaf_work).
// C runs on the thread's system stack, entered through runtime.asmcgocall, and the callback on
// the goroutine's through runtime.cgocallback. Go's own traceback ends at these switches; the
// kernel walk follows them (symbols/go/cgo_switches.h), so a stack in C goes on into the
// goroutine that called it (main.cgoWork, runtime.goexit), and one in the callback into the C
// code that called back (crunch) and on to the goroutine. Order checked root first:
// goexit > ... > main.cgoWork > runtime.cgocall > C crunch > [crosscall2 ... goHash > leaf_work].
describe('go_cgo: Go calling C calling back into Go', () => {
  let rec;
  const metrics = {};
  before(async () => {
    if (recorderUnavailableReason() || !existsSync(fixturePath('go/go_cgo'))) return;
    rec = await recordGo('go/go_cgo', DURATION_MS, 'go_stacks_cgo');
  });

  it('joins the goroutine and system stacks at each cgo call and callback', (t) => {
    if (!requireRecorder(t) || !requireFile(t, fixturePath('go/go_cgo'), 'go or gcc not installed')) return;
    const samples = checkGoProgram(t, rec, 'go_cgo', metrics);
    const names = (s) => s.user.map((f) => f.name);
    const at = (s, re) => names(s).findIndex((n) => re.test(n));
    const inC = samples.filter((s) => at(s, /^(crunch|leaf_work)$/) >= 0);
    const inCallback = samples.filter((s) => at(s, /^main\.goHash$/) >= 0);
    // Root first: the goroutine's frames, then the C call, then (in a callback) the Go
    // called back, then C again.
    const joined = (s) => names(s)[0] === 'runtime.goexit' && at(s, /^main\.cgoWork$/) >= 0 &&
      at(s, /^main\.cgoWork$/) < at(s, /^runtime\.cgocall$/) &&
      at(s, /^runtime\.cgocall$/) < at(s, /^crunch$/);
    const joinedCallback = (s) => joined(s) && at(s, /^crunch$/) < at(s, /^crosscall2$/) &&
      at(s, /^crosscall2$/) < at(s, /^main\.goHash$/);
    metrics.cSamples = weightOf(inC);
    metrics.cJoined = weightOf(inC, joined) / weightOf(inC);
    metrics.callbackSamples = weightOf(inCallback);
    metrics.callbackJoined = weightOf(inCallback, joinedCallback) / weightOf(inCallback);
    t.diagnostic(`in C: ${metrics.cSamples} samples, ${pct(metrics.cJoined)} joined to the goroutine; ` +
                 `in the Go callback: ${metrics.callbackSamples}, ${pct(metrics.callbackJoined)} joined ` +
                 'through the C caller to the goroutine');
    assert.ok(metrics.cSamples >= 100 && metrics.callbackSamples >= 30,
              `too few samples in C (${metrics.cSamples}) or in the callback (${metrics.callbackSamples})`);
    assert.ok(metrics.cJoined >= 0.97, `C joined ${pct(metrics.cJoined)}`);
    assert.ok(metrics.callbackJoined >= 0.95, `callback joined ${pct(metrics.callbackJoined)}`);
    saveMetrics('go_stacks_cgo', metrics);
  });
});

// Go's own CPU profile of the same run: the top functions by self time in `go tool pprof
// -top` and in bpfprof (the leaf user function of each on-CPU sample of the process) agree,
// as shares of those five functions' time together. Of the rest each profiler sees what the
// other cannot: bpfprof, Go's own profiling (its SIGPROF handler, runtime.sigtramp and the
// traceback it takes); Go, its timer's signals as they land (a thread's CPU timer fires at most
// once a kernel tick, so on a busy machine Go's profile holds half the samples, and up to 16%
// of them in runtime.asyncPreempt). Those moved the five's share of the whole by 5-8 points
// between runs of fresh clones, their shares of each other by at most 3.3.
// Go's profile has a good share of its samples at runtime.asyncPreempt, a leaf bpfprof's timer
// hardly finds: the SIGPROF delivered as a preempted goroutine returns from the preemption
// signal lands there. Their traceback has the preempted function (the sorting goroutine's
// less function and partition, here) as the caller, so -hide gives them to it. 10 s: Go's
// timer fires at most once a kernel tick (HZ 250 here), ~1,000 samples on a busy machine.
describe('go_cpu against Go\'s own profiler (runtime/pprof)', () => {
  let rec;
  let pprofFile;
  const metrics = {};
  before(async () => {
    if (recorderUnavailableReason() || !existsSync(fixturePath('go/go_cpu'))) return;
    pprofFile = join(RESULTS_DIR, 'go_stacks_pprof.prof');
    rmSync(pprofFile, { force: true });
    process.env.GO_CPU_PPROF = pprofFile;
    try {
      rec = await recordGo('go/go_cpu', 10_000, 'go_stacks_pprof');
    } finally {
      delete process.env.GO_CPU_PPROF;
    }
  });

  it('has the same top 5 functions by self time, their shares of the five within 5 points', async (t) => {
    if (!requireRecorder(t) || !requireFile(t, fixturePath('go/go_cpu'), 'go not installed')) return;
    assert.ok(existsSync(pprofFile), `go_cpu wrote no profile: ${rec.result.stderr}`);
    const pprofTop = await run('go', ['tool', 'pprof', '-top', '-nodecount=15', '-hide=^runtime\\.asyncPreempt$', pprofFile]);
    assert.equal(pprofTop.code, 0, pprofTop.stderr);
    const totalMs = Number(/of ([\d.]+)(m?s) total/.exec(pprofTop.stdout)?.[1]) *
                    (/of [\d.]+s total/.test(pprofTop.stdout) ? 1000 : 1);
    const goTop = [];
    // pprof marks an inlined function's own entry `main.mix (inline)`; bpfprof names it main.mix.
    for (const m of pprofTop.stdout.matchAll(/^\s*([\d.]+)(m?s)\s+([\d.]+)%\s+[\d.]+%\s+[\d.]+m?s\s+[\d.]+%\s+(\S.*)$/gm))
      goTop.push({ name: m[4].replace(/ \(inline\)$/, '').trim(), share: Number(m[3]) / 100 });
    const asyncPreempt = await run('go', ['tool', 'pprof', '-top', '-focus=^runtime\\.asyncPreempt$', pprofFile]);
    const preemptShare = Number(/accounting for [\d.]+m?s, ([\d.]+)% of/.exec(asyncPreempt.stdout)?.[1] ?? 0) / 100;

    // Go's own profiler at work: its SIGPROF handler (runtime.sigtramp, and the traceback it
    // takes), which its profile cannot hold; left out, so that the shares are of the same work.
    const all = samplesOf(rec.view, 'go_cpu');
    const samples = all.filter((s) => !s.user.some((f) => f.name === 'runtime.sigtramp'));
    const profilerShare = 1 - weightOf(samples) / (weightOf(all) || 1);
    const total = weightOf(samples);
    const self = new Map();
    for (const s of samples) tally(self, s.user.at(-1)?.name ?? s.frames[0].name, s.weight);
    const ours = (name) => (self.get(name) ?? 0) / total;
    const topFive = goTop.slice(0, 5);
    const goFive = topFive.reduce((sum, r) => sum + r.share, 0);
    const oursFive = topFive.reduce((sum, r) => sum + ours(r.name), 0);
    const rows = topFive.map(({ name, share }) =>
      ({ name, go: share / (goFive || 1), bpfprof: ours(name) / (oursFive || 1) }));
    Object.assign(metrics, { goTotalMs: totalMs, bpfprofSamples: total, goAsyncPreemptShare: preemptShare,
                             goProfilerShare: profilerShare, top5: rows });
    t.diagnostic(`Go's profile: ${totalMs} samples (runtime.asyncPreempt ${pct(preemptShare)}, hidden); ` +
                 `bpfprof: ${total} on-CPU samples of go_cpu (${pct(profilerShare)} more in Go's SIGPROF ` +
                 `handler, left out); the five: ${pct(goFive)} of Go's, ${pct(oursFive)} of bpfprof's; ` +
                 'shares of the five:');
    for (const r of rows)
      t.diagnostic(`  ${r.name}: pprof ${pct(r.go)}, bpfprof ${pct(r.bpfprof)}, ` +
                   `${((r.bpfprof - r.go) * 100).toFixed(1)} points`);
    t.diagnostic(`bpfprof's top self:\n    ${top(self, total, 8)}`);
    saveMetrics('go_stacks_pprof', metrics);
    // Go weighs each sample 1 ms at 1 kHz, but the kernel fires a thread's CPU timer at most
    // once a tick: the total is a count of samples, low, and the shares are what compare.
    assert.ok(totalMs >= 400, `Go's profile holds ${totalMs} samples`);
    assert.ok(total >= 1000, `bpfprof: ${total} samples`);
    assert.equal(rows.length, 5, pprofTop.stdout);
    // Samples bpfprof names wrongly would leave the five, not move among them.
    assert.ok(oursFive >= goFive - 0.15, `the five: ${pct(goFive)} of Go's, ${pct(oursFive)} of bpfprof's`);
    for (const r of rows)
      assert.ok(Math.abs(r.bpfprof - r.go) <= 0.05, `${r.name}: pprof ${pct(r.go)}, bpfprof ${pct(r.bpfprof)}`);
  });
});
