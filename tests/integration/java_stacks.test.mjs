// Java on HotSpot with default flags (no -XX:+PreserveFramePointer, no agent, no perf map):
// Debian's OpenJDK 17 runs tests/fixtures/java fixture.Work (a TreeMap loop, a recursive fib,
// SHA-256 on a thread of its own, lambdas in a stream, an exception caught three calls up, a
// thread pool's task, C code through JNI that calls back into Java). Its compiled, interpreted and stub frames are walked in
// the kernel with the JVM's own frame sizes and named package.Class.method: stacks reach a
// thread root, are walked in the kernel at under 2 KB of ring buffer a sample, the Java code
// they sample is named, and the methods nest as the program calls them. Once started by
// bpfprof (`-- java ...`), once attached to a running JVM (`-p`).
import assert from 'node:assert/strict';
import { existsSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { before, describe, it } from 'node:test';

import {
  FIXTURES, IS_CI, REPO_DIR, RESULTS_DIR, STATE_FRAMES, pct, recordWith, recorderUnavailableReason,
  requireRecorder, run, saveMetrics, sleep, startBackground, weightOf,
} from './lib/harness.mjs';
import { isRootName } from './lib/stack_quality.mjs';

const JAVA = '/usr/bin/java';
const CLASSES = join(FIXTURES, 'java', 'classes');
// fixture.Work's JNI library (its native method, which calls back into Java).
const JNI = `-Dfixture.jni=${resolve(FIXTURES, 'java', 'libworkjni.so')}`;
const DURATION_MS = 4000;
// JFR's execution samples every millisecond (tests/fixtures/java/execution_sample.jfc).
const JFC = join(REPO_DIR, 'tests', 'fixtures', 'java', 'execution_sample.jfc');
const JFR_FILE = join(RESULTS_DIR, 'java_stacks_jfr.jfr');

const isOffCpu = (frames) => frames.length > 0 && STATE_FRAMES.has(frames.at(-1).name);
const userFrames = (frames) => frames.filter((f) => f.category !== 'Kernel' && !STATE_FRAMES.has(f.name));
const unnamedAddress = (f) => /^0x[0-9a-f]+$/.test(f.name);
const isJava = (f) => f.category === 'Java';
// A Java method's frame (package.Class.method), not a stub's ("StubRoutines (2)",
// "flush_icache_stub").
const isJavaMethod = (f) => isJava(f) && /^[^\s\[]+\.[^\s.]+$/.test(f.name);

// The on-CPU samples of the JVM, each with its user frames (root first) and thread name.
function javaSamples(view, pid) {
  const out = [];
  for (const thread of view.threads) {
    if (pid ? String(thread.pid) !== String(pid) : thread.processName !== 'java') continue;
    for (const s of view.samples(thread)) {
      if (!s.frames.length || isOffCpu(s.frames)) continue;
      const user = userFrames(s.frames);
      if (user.length) out.push({ ...s, user, thread: thread.name });
    }
  }
  return out;
}

// What the Java code left unnamed was: the most frequent leaves with their callers and
// threads, and when in the run (ms from its first sample) they came.
function describeUnnamed(unnamed, t0) {
  if (!unnamed.length) return 'none';
  const kinds = new Map();
  for (const s of unnamed) {
    const leaf = s.user.at(-1);
    const key = `${s.thread}: ${unnamedAddress(leaf) ? `address (${leaf.category})` : leaf.name} < ` +
                `${s.user.at(-2)?.name ?? 'nothing'}`;
    kinds.set(key, (kinds.get(key) ?? 0) + weightOf([s]));
  }
  const times = unnamed.map((s) => s.time - t0).sort((a, b) => a - b);
  const at = (q) => Math.round(times[Math.floor(q * (times.length - 1))]);
  const top = [...kinds].sort((a, b) => b[1] - a[1]).slice(0, 6).map(([k, n]) => `${n} ${k}`);
  return `${weightOf(unnamed)} samples at ${at(0)}/${at(0.5)}/${at(1)} ms (first/median/last); ${top.join('; ')}`;
}

function summaryNumber(stderr, label, re) {
  const line = new RegExp(`^bpfprof: ${label}: (.*)$`, 'm').exec(stderr)?.[1];
  return line === undefined ? undefined : Number(re.exec(line)?.[1]);
}

// A missing JDK or fixture fails under CI=true and skips elsewhere.
function requireJava(t) {
  if (existsSync(JAVA) && existsSync(join(CLASSES, 'fixture', 'Work.class')) &&
      existsSync(join(FIXTURES, 'java', 'libworkjni.so'))) return true;
  const why = `${JAVA}, ${CLASSES}/fixture/Work.class or libworkjni.so missing: apt-get install openjdk-17-jdk-headless`;
  if (IS_CI) assert.fail(why);
  t.skip(why);
  return false;
}

const names = (s) => s.user.map((f) => f.name);
// Consecutive-or-not order: each of `chain` above (inside) the one before it.
function nests(s, chain) {
  let at = -1;
  for (const name of chain) {
    at = names(s).indexOf(name, at + 1);
    if (at < 0) return false;
  }
  return true;
}

// Every figure the issue's table has, and the program's methods in their nesting. With
// `startupMs`, the samples of the recording's first milliseconds are counted apart: an
// attach's first samples come before the process's mappings and its JVM reach the kernel,
// and their fallback copies, unwound in userspace without the JVM's frame sizes, end at
// [truncated]; `maxRingBytes` bounds the bytes a sample, those copies' included.
function checkJava(t, rec, pid, label, { startupMs = 0, maxRingBytes = 2048 } = {}) {
  let t0 = Infinity;
  for (const thread of rec.view.threads) for (const s of rec.view.samples(thread)) t0 = Math.min(t0, s.time);
  const every = javaSamples(rec.view, pid);
  const samples = every.filter((s) => s.time - t0 >= startupMs);
  const early = every.filter((s) => s.time - t0 < startupMs);
  if (startupMs)
    t.diagnostic(`first ${startupMs} ms: ${weightOf(early)} samples, ` +
                 `${pct(weightOf(early, (s) => isRootName(s.user[0].name)) / (weightOf(early) || 1))} reach a root`);
  const total = weightOf(samples);
  const stderr = rec.result.stderr;
  // Samples whose innermost user frame is JIT or interpreter code: named, or a bare address.
  const inJavaCode = (s) => isJava(s.user.at(-1)) || unnamedAddress(s.user.at(-1));
  const named = (s) => isJava(s.user.at(-1)) && !s.user.at(-1).name.startsWith('[unknown');
  const m = {
    samples: total,
    rootShare: weightOf(samples, (s) => isRootName(s.user[0].name)) / total,
    javaCode: weightOf(samples, inJavaCode),
    namedShare: weightOf(samples, (s) => inJavaCode(s) && named(s)) / (weightOf(samples, inJavaCode) || 1),
    kernelShare: summaryNumber(stderr, 'User stacks unwound in the kernel', /^([\d.]+)%/) / 100,
    ringBytes: summaryNumber(stderr, 'Ring-buffer traffic', /^(\d+) bytes per sample/),
  };
  const main = samples.filter((s) => s.thread !== 'hasher');
  const inFib = main.filter((s) => names(s).includes('fixture.Work.fib'));
  const inTree = main.filter((s) => names(s).includes('fixture.Work.treeWork'));
  const hasher = samples.filter((s) => s.thread === 'hasher');
  // Lines (interpreted frames' bytecode pointers, compiled frames' debug info) and the methods
  // the JIT inlined, as frames of their own: TreeMap.put's fixAfterInsertion is inlined.
  const methodFrames = samples.flatMap((s) => s.user.filter(isJavaMethod));
  const inFix = main.filter((s) => names(s).includes('java.util.TreeMap.fixAfterInsertion'));
  Object.assign(m, {
    lineShare: methodFrames.filter((f) => rec.view.frameTable.line[f.frame] > 0).length /
               (methodFrames.length || 1),
    fixNested: weightOf(inFix, (s) => nests(s, ['fixture.Work.treeWork', 'java.util.TreeMap.put',
                                                'java.util.TreeMap.fixAfterInsertion'])) /
               (weightOf(inFix) || 1),
    fibNested: weightOf(inFib, (s) => nests(s, ['fixture.Work.main', 'fixture.Work.fib', 'fixture.Work.fib',
                                                'fixture.Work.fib'])) / (weightOf(inFib) || 1),
    treeUnderMain: weightOf(inTree, (s) => nests(s, ['fixture.Work.main', 'fixture.Work.treeWork'])) /
                   (weightOf(inTree) || 1),
    treeShare: weightOf(inTree) / (weightOf(main) || 1),
    hasherDigest: weightOf(hasher, (s) => nests(s, ['fixture.Work.digestWork'])) / (weightOf(hasher) || 1),
    ...otherWork(samples, main),
  });
  t.diagnostic(`${label}: ${total} on-CPU samples; reach a root ${pct(m.rootShare)}; Java code ` +
               `${m.javaCode} samples, named ${pct(m.namedShare)}; walked in the kernel ` +
               `${pct(m.kernelShare)}; ${m.ringBytes} ring bytes per sample; fib nested ${pct(m.fibNested)}, ` +
               `treeWork ${pct(m.treeShare)} of main (${pct(m.treeUnderMain)} under main), hasher in ` +
               `digestWork ${pct(m.hasherDigest)}; Java frames with a line ${pct(m.lineShare)}; ` +
               `fixAfterInsertion ${weightOf(inFix)} samples, ${pct(m.fixNested)} under treeWork > put`);
  for (const [what, { samples: n, nested }] of Object.entries(m.other))
    t.diagnostic(`${label}: ${what}: ${n} samples, ${pct(nested)} in their nesting`);
  t.diagnostic(`${label}: unnamed Java code: ${describeUnnamed(samples.filter((s) => inJavaCode(s) && !named(s)), t0)}`);
  // Threads named as Java names them, beyond the kernel's 15 characters (fixture-pool-wo).
  const threadNames = new Set(rec.view.threads.filter((th) => !pid || String(th.pid) === String(pid))
    .filter((th) => th.processName === 'java' || String(th.pid) === String(pid)).map((th) => th.name));
  m.javaThreadNames = ['main', 'hasher', 'fixture-pool-worker'].filter((n) => threadNames.has(n));
  t.diagnostic(`${label}: threads ${[...threadNames].join(', ')}`);
  saveMetrics(label, m);
  assert.ok(total >= 1000, `only ${total} on-CPU samples`);
  assert.ok(m.rootShare >= 0.95, `${pct(m.rootShare)} of stacks reach a root`);
  assert.ok(m.javaCode >= 500 && m.namedShare >= 0.95, `Java code: ${m.javaCode}, named ${pct(m.namedShare)}`);
  assert.ok(m.kernelShare >= 0.9, `walked in the kernel: ${pct(m.kernelShare)}`);
  assert.ok(m.ringBytes > 0 && m.ringBytes <= maxRingBytes, `${m.ringBytes} ring-buffer bytes per sample`);
  assert.ok(m.treeShare >= 0.2 && m.treeUnderMain >= 0.95, `treeWork ${pct(m.treeShare)}, ${pct(m.treeUnderMain)} under main`);
  assert.ok(weightOf(inFib) >= 10 && m.fibNested >= 0.9, `fib ${weightOf(inFib)} samples, ${pct(m.fibNested)} nested`);
  assert.ok(weightOf(hasher) >= 200 && m.hasherDigest >= 0.9, `hasher ${weightOf(hasher)}, ${pct(m.hasherDigest)} in digestWork`);
  assert.ok(m.lineShare >= 0.8, `Java frames with a line: ${pct(m.lineShare)}`);
  assert.ok(weightOf(inFix) >= 50 && m.fixNested >= 0.95,
            `fixAfterInsertion ${weightOf(inFix)} samples, ${pct(m.fixNested)} under treeWork > put`);
  assert.deepEqual(m.javaThreadNames, ['main', 'hasher', 'fixture-pool-worker'],
                   'threads named as Java names them');
  const apart = Object.entries(m.other).filter(([, o]) => o.samples < 10 || o.nested < 0.9);
  assert.deepEqual(apart, [], 'work found in fewer than 10 samples or out of its nesting');
}

// The fixture's other work, each as { samples, nested: the share in its expected nesting }:
// a stream pipeline with lambdas, an exception thrown three calls down, a task on a pool's thread, C code
// called through JNI and the Java method it calls back.
function otherWork(samples, main) {
  const work = (among, has, chain) => {
    const found = among.filter(has);
    return { samples: weightOf(found), nested: weightOf(found, (s) => chain(s)) / (weightOf(found) || 1) };
  };
  // The stream's lambdas run inlined into its compiled loop (Streams$RangeIntSpliterator.
  // forEachRemaining: the debug info at the pc names no deeper scope), as JFR shows them too.
  // Or the JVM's own C++ at streamWork's call sites (the first run links its lambdas through
  // invokedynamic's bootstrap: tens of ms on a loaded machine), or streamWork itself.
  const stream = (s) => names(s).findIndex((n, i) => i > names(s).indexOf('fixture.Work.streamWork') &&
                                                   n.startsWith('java.util.stream.'));
  const inStreamWork = (s) => {
    const below = names(s)[names(s).indexOf('fixture.Work.streamWork') + 1];
    return stream(s) >= 0 || below === undefined || below.includes('::');
  };
  const pool = samples.filter((s) => s.thread === 'fixture-pool-worker');
  return {
    other: {
      'stream pipeline': work(main, (s) => names(s).includes('fixture.Work.streamWork'), (s) =>
        nests(s, ['fixture.Work.main', 'fixture.Work.streamWork']) && inStreamWork(s)),
      'exception thrown': work(main, (s) => names(s).includes('fixture.Work.throwDeep'), (s) =>
        nests(s, ['fixture.Work.main', 'fixture.Work.exceptionWork', 'fixture.Work.throwDeep'])),
      'pool task': work(pool, (s) => names(s).includes('fixture.Work.poolTask'), (s) =>
        isRootName(s.user[0].name) && nests(s, ['java.util.concurrent.ThreadPoolExecutor.runWorker',
                                                'fixture.Work.poolTask'])),
      'JNI C code': work(main, (s) => names(s).includes('native_spin'), (s) =>
        nests(s, ['fixture.Work.main', 'fixture.Work.jniWork', 'Java_fixture_Work_nativeSum', 'native_spin'])),
      'JNI callback': work(main, (s) => names(s).includes('fixture.Work.jniCallback'), (s) =>
        nests(s, ['fixture.Work.main', 'fixture.Work.jniWork', 'Java_fixture_Work_nativeSum',
                  'fixture.Work.jniCallback'])),
    },
  };
}


// Shares of self samples by method, highest first: [[method, share], ...].
function selfShares(methods) {
  const counts = new Map();
  for (const m of methods) counts.set(m, (counts.get(m) ?? 0) + 1);
  return [...counts].map(([m, n]) => [m, n / methods.length]).sort((a, b) => b[1] - a[1]);
}

// JFR's execution samples of the run, by thread: each one's self method, its top frame (an
// inlined method's frame, as bpfprof's are).
async function jfrSelfMethods() {
  const jfr = join(dirname(realpathSync(JAVA)), 'jfr');
  const printed = await run(jfr, ['print', '--json', '--stack-depth', '1', '--events',
                                  'jdk.ExecutionSample', JFR_FILE]);
  assert.equal(printed.code, 0, `jfr print failed: ${printed.stderr}`);
  const byThread = { main: [], hasher: [], other: [], from: Infinity, to: 0 };
  for (const e of JSON.parse(printed.stdout).recording.events) {
    // Wall-clock time in ms (the ISO string has ns digits)
    const time = Date.parse(e.values.startTime.replace(/(\.\d{3})\d*/, '$1'));
    byThread.from = Math.min(byThread.from, time);
    byThread.to = Math.max(byThread.to, time);
    // JFR leaves out what it could not resolve (a sample of a thread whose Thread object is
    // gone, a frame without its method).
    const top = e.values.stackTrace?.frames?.[0];
    if (!top?.method || !e.values.sampledThread) continue;
    const thread = { hasher: 'hasher', main: 'main' }[e.values.sampledThread.javaName] ?? 'other';
    byThread[thread].push(`${top.method.type.name.replaceAll('/', '.')}.${top.method.name}`);
  }
  return byThread;
}

// bpfprof's samples of the same run that JFR can take: while JFR recorded (wall-clock times
// `from`-`to`; the JVM sets JFR up in Java code before), a thread in a Java method's code (JFR
// takes no sample of a thread in a stub, such as the SHA-256 intrinsic's, nor in the VM).
function bpfprofSelfMethods(view, from, to) {
  const byThread = { main: [], hasher: [], other: [] };
  const start = view.profile.meta.startTime;
  for (const s of javaSamples(view, null)) {
    if (start + s.time < from || start + s.time > to || !isJavaMethod(s.user.at(-1))) continue;
    // The main thread is named as Java names it (main); the pool's thread is the other.
    const thread = { hasher: 'hasher', main: 'main' }[s.thread] ?? 'other';
    for (let i = 0; i < s.weight; i++) byThread[thread].push(s.user.at(-1).name);
  }
  return byThread;
}

// The two profilers' top methods of one thread: [[method, JFR share, bpfprof share], ...].
function compareTop(t, thread, jfr, ours) {
  const jfrShares = selfShares(jfr);
  const ourShares = selfShares(ours);
  const share = (shares, m) => shares.find(([name]) => name === m)?.[1] ?? 0;
  const top = new Set([...jfrShares.slice(0, 5), ...ourShares.slice(0, 5)].map(([m]) => m));
  const rows = [...top].map((m) => [m, share(jfrShares, m), share(ourShares, m)]);
  t.diagnostic(`${thread}: self samples in Java methods: JFR ${jfr.length}, bpfprof ${ours.length}`);
  for (const [m, theirs, mine] of rows)
    t.diagnostic(`  ${m}: JFR ${pct(theirs)}, bpfprof ${pct(mine)}`);
  return rows;
}

describe('java fixture.Work: HotSpot frames walked in the kernel and named', () => {
  let started;
  let attached;
  let attachedPid;
  let withJfr;
  let short;
  before(async () => {
    if (recorderUnavailableReason() || !existsSync(JAVA)) return;
    // On treeWork, fib and the digests alone (-Dfixture.plain): JFR takes few samples of Java
    // code called from C (fixture.Work.jniCallback), and with the other work (exceptions,
    // streams) the self shares of the TreeMap methods inlined into each other differ between
    // the two from run to run: they give some pcs different inlined scopes.
    withJfr = await recordWith('java_stacks_jfr', [
      '--', JAVA, `-XX:StartFlightRecording=filename=${JFR_FILE},settings=${JFC}`, '-cp', CLASSES,
      '-Dfixture.plain=true', 'fixture.Work', String(DURATION_MS)]);
    started = await recordWith('java_stacks', ['--', JAVA, '-cp', CLASSES, JNI, 'fixture.Work', String(DURATION_MS)]);
    // After a JVM ran: with libjvm's unwind table not built yet (a fresh machine's first JVM),
    // most of a 300-ms JVM's samples fall back to stack copies, whose Java frames userspace
    // cannot unwind: a start-up cost of the table cache, not of reading a short JVM, which
    // this measures.
    short = await recordWith('java_stacks_short', ['--', JAVA, '-cp', CLASSES, JNI, 'fixture.Work', '300']);
    const target = startBackground(JAVA, ['-cp', CLASSES, JNI, 'fixture.Work', String(DURATION_MS + 2000)]);
    attachedPid = target.pid;
    await sleep(1000);  // attach to a JVM that has compiled its hot methods
    attached = await recordWith('java_stacks_attach', ['-p', String(target.pid)]);
    const exit = await target.done;
    assert.equal(exit.code, 0, `fixture.Work failed: ${exit.stderr}`);
  });

  it('started by bpfprof: reach a root, walked in the kernel, named, nested', (t) => {
    if (!requireRecorder(t) || !requireJava(t)) return;
    // The JVM runs Java code (class initialisers) before its code cache is known to the
    // kernel (its tables are filled during start-up, then read): those samples' stack copies
    // weigh in the recording's bytes per sample, hence a bound above the 2 KB of steady state.
    checkJava(t, started, null, 'java_stacks', { maxRingBytes: 4096 });
  });

  it('attached with -p to a running JVM: the same', (t) => {
    if (!requireRecorder(t) || !requireJava(t)) return;
    checkJava(t, attached, attachedPid, 'java_stacks_attach', { startupMs: 300, maxRingBytes: 4096 });
  });

  // The JVM's own profiler on the same run: the methods most often on top agree, on the main
  // thread, which JFR samples in full (the hasher runs the SHA-256 stub most of its time, where
  // JFR takes no sample; the pool's thread gets fewer of JFR's samples per period: both are
  // compared in the diagnostics).
  it('agrees with JFR on the methods that take the most samples', async (t) => {
    if (!requireRecorder(t) || !requireJava(t)) return;
    const jfr = await jfrSelfMethods();
    const ours = bpfprofSelfMethods(withJfr.view, jfr.from, jfr.to);
    const rows = compareTop(t, 'main', jfr.main, ours.main);
    const hasherRows = compareTop(t, 'hasher', jfr.hasher, ours.hasher);
    compareTop(t, 'the pool\'s thread', jfr.other, ours.other);
    saveMetrics('java_stacks_jfr', Object.fromEntries(
      [...rows, ...hasherRows].map(([m, a, b]) => [m, { jfr: a, bpfprof: b }])));
    assert.ok(jfr.main.length >= 300 && ours.main.length >= 1000,
              `JFR ${jfr.main.length}, bpfprof ${ours.main.length} samples of main`);
    // Within 6 points: JFR leaves out the samples it cannot walk, more of them in small
    // methods (their entries and exits), so its shares of small methods are lower and those
    // of long ones higher than bpfprof's.
    const apart = rows.filter(([, theirs, mine]) => Math.abs(theirs - mine) > 0.06);
    assert.deepEqual(apart, [], 'top methods more than 6 points apart');
  });

  // A JVM that runs 300 ms: most of it is start-up (class loading, the interpreter), before
  // and while its code cache reaches the kernel. Its methods are there, in their nesting.
  it('a JVM that runs 300 ms: its methods, nested, from a root', (t) => {
    if (!requireRecorder(t) || !requireJava(t)) return;
    const samples = javaSamples(short.view, null);
    const total = weightOf(samples);
    const inJava = samples.filter((s) => isJava(s.user.at(-1)) || unnamedAddress(s.user.at(-1)));
    const named = weightOf(inJava, (s) => isJavaMethod(s.user.at(-1))) / (weightOf(inJava) || 1);
    const root = weightOf(samples, (s) => isRootName(s.user[0].name)) / (total || 1);
    const main = samples.filter((s) => s.thread !== 'hasher');
    const tree = weightOf(main, (s) => nests(s, ['fixture.Work.main', 'fixture.Work.treeWork']));
    const digest = weightOf(samples, (s) => s.thread === 'hasher' && nests(s, ['fixture.Work.digestWork']));
    const bytes = summaryNumber(short.result.stderr, 'Ring-buffer traffic', /^(\d+) bytes per sample/);
    t.diagnostic(`java_stacks_short: ${total} on-CPU samples; reach a root ${pct(root)}; in Java code ` +
                 `${weightOf(inJava)}, a method named at the leaf ${pct(named)}; main > treeWork ${tree}, ` +
                 `hasher in digestWork ${digest}; ${bytes} ring bytes per sample`);
    const t0 = Math.min(...samples.map((s) => s.time));
    t.diagnostic(`java_stacks_short: not a method at the leaf: ` +
                 describeUnnamed(inJava.filter((s) => !isJavaMethod(s.user.at(-1))), t0));
    saveMetrics('java_stacks_short', { total, root, named, tree, digest, bytes });
    assert.ok(total >= 100, `only ${total} on-CPU samples`);
    // Below the 95% of longer runs: with builds and fuzzers at idle priority beside (make
    // test), some of the hasher's stacks in the SHA-256 intrinsic stub called from
    // just-compiled code come out [truncated] > compiled caller > stub; why is not known.
    assert.ok(root >= 0.85, `${pct(root)} of stacks reach a root`);
    // Named while the JVM lives: its stacks are read every 50 ms, so that most are named
    // before the JVM exits and its memory can no longer be read.
    // What the recorder said of the JVM, for a failure's message.
    const said = short.result.stderr.split('\n')
      .filter((l) => /java|not read|lost|start-up|Ring-buffer/.test(l)).join('\n');
    assert.ok(named >= 0.4, `a method named at the leaf in ${pct(named)} of ${weightOf(inJava)} samples in Java; ` +
              `the recorder said:\n${said}`);
    assert.ok(tree >= 10 && digest >= 5, `main > treeWork ${tree}, hasher in digestWork ${digest}`);
  });
});
