// beam_stacks: Debian's Erlang/OTP 25 (erlang-base, the BeamAsm JIT) and Elixir 1.14 with
// default flags, recorded with `-- CMD`: tests/fixtures/erlang/work.erl (compiled with erlc
// first; registered processes running known call chains, light BIFs, a NIF, =:= in C and a
// dirty CPU BIF), once with one scheduler and once with two and `+JPperf true` (frame pointers
// in Erlang code, and the perf map the emulator writes); tests/fixtures/elixir/work.exs; and
// erlc, OTP's compiler, compiling modules tests/fixtures/erlang/gen_modules.escript writes.
// Scheduler threads' stacks must reach their root, walked in the kernel, at <= 2 KB a sample,
// with the Erlang functions named `module:function/arity` (Elixir's as Elixir writes them), in
// the Erlang category, in the order the program calls them, under a `[process <0.N.S> NAME]`
// frame; C code (light BIFs, helpers, GC, a NIF under beam_jit_call_nif) under its Erlang
// caller; a dirty scheduler's process's Erlang frames just outside erts_call_dirty_bif. Runs
// alone: it compares shares of CPU time.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  FREQUENCY_HZ, IS_CI, REPO_DIR, pct, perfMapsNow, recordWith, recorderUnavailableReason, removePerfMapsSince, requireRecorder, run,
  saveMetrics,
} from './lib/harness.mjs';
import {
  ELIXIR, ERL, ERLC, ESCRIPT, JIT_CODE_FRAME, beamSamples, erlangModule, erlangNames, firstOf,
  hasConsecutive, headOf, inOrder, innermostIndex, isDirtyCpu, isErlang, isErlangFunction, isProcessFrame,
  isScheduler, processLabel, processName, tailOf, tally, topOf, weightOf, wellFormedName,
} from './lib/beam.mjs';
import { TRUNCATED, isRootName, recordingFigures } from './lib/stack_quality.mjs';

const WORK_ERL = join(REPO_DIR, 'tests', 'fixtures', 'erlang', 'work.erl');
const GEN_MODULES = join(REPO_DIR, 'tests', 'fixtures', 'erlang', 'gen_modules.escript');
const WORK_EXS = join(REPO_DIR, 'tests', 'fixtures', 'elixir', 'work.exs');
const RELOAD_ERL = join(REPO_DIR, 'tests', 'fixtures', 'erlang', 'reload.erl');
const MS = 3000;
// The issue's figures, for the scheduler threads' on-CPU samples.
const MIN_COMPLETE = 0.97;
const MIN_ERLANG = 0.90;
const MIN_KERNEL = 0.90;
const MAX_RING_BYTES = 2048;
// Samples of a kind in their expected nesting.
const MIN_ORDERED = 0.95;

// Temporary files: work.beam, the generated modules and erlc's output.
let tmp;
const ebin = () => join(tmp, 'ebin');
const genSrc = () => join(tmp, 'gen');
const genOut = () => join(tmp, 'gen_ebin');

const share = (hit, total) => (total ? hit / total : 0);

// Whether the test can run: a recorder, and Debian's erlang-base and elixir (under CI=true
// missing ones fail).
function beamReady(t, binaries = [ERL, ERLC, ESCRIPT]) {
  if (!requireRecorder(t)) return false;
  const missing = binaries.filter((b) => !existsSync(b));
  if (!missing.length) return true;
  const why = `${missing.join(', ')} missing (erlang-base, elixir: scripts/install-deps.sh)`;
  if (IS_CI) assert.fail(why);
  t.skip(why);
  return false;
}

// ---------------------------------------------------------------------------------------
// Checks every recording gets

// The issue's figures for the scheduler threads' on-CPU samples: reaching a root (>= 97%),
// with Erlang functions named (>= 90%); the recorder's walked in the kernel (>= 90%) and
// ring-buffer bytes a sample (<= 2 KB), from its -v summary (all the recording's processes:
// the shell script erl and erlexec before beam.smp are a few samples).
function checkFigures(t, rec, metrics, { minSamples }) {
  const samples = beamSamples(rec.view, isScheduler);
  const total = weightOf(samples);
  const rooted = weightOf(samples, (s) => isRootName(s.frames[0].name));
  const withErlang = weightOf(samples, (s) => s.frames.some(isErlangFunction));
  // The first second too (the BEAM's boot loads its code from JIT code while a launched
  // command's first walkers are in, bpf/runtime_list.h), where it has enough samples to say.
  const boot = firstOf(samples, 1000);
  const f = recordingFigures(rec);
  Object.assign(metrics, {
    schedulerSamples: total, complete: share(rooted, total), withErlang: share(withErlang, total),
    printedComplete: f.printedComplete, kernelShare: f.kernelShare, ringBytes: f.ringBytes,
    bootComplete: share(weightOf(boot, (s) => isRootName(s.frames[0].name)), weightOf(boot)),
  });
  t.diagnostic(`${total} on-CPU samples of scheduler threads: ${pct(metrics.complete)} reach a root ` +
               `(${pct(metrics.bootComplete)} of the first second's ${weightOf(boot)}), ` +
               `${pct(metrics.withErlang)} with Erlang functions; recorder: complete ${pct(f.printedComplete)}, ` +
               `walked in the kernel ${pct(f.kernelShare)}, ${f.ringBytes} ring-buffer bytes a sample ` +
               `(${f.ringBytesBesideCopies} beside the stack copies); kernel walks that fell back: ${f.fellBack}`);
  const notRooted = new Map();
  const noErlang = new Map();
  for (const s of samples) {
    if (!isRootName(s.frames[0].name)) tally(notRooted, headOf(s.frames), s.weight);
    if (!s.frames.some(isErlangFunction)) tally(noErlang, tailOf(s.frames), s.weight);
  }
  if (metrics.complete < 0.995)
    for (const [k, n] of topOf(notRooted)) t.diagnostic(`  not at a root x${n}: ${k}`);
  if (metrics.withErlang < 0.99)
    for (const [k, n] of topOf(noErlang)) t.diagnostic(`  without Erlang frames x${n}: ${k}`);
  assert.ok(total >= minSamples, `only ${total} on-CPU samples of scheduler threads`);
  assert.ok(metrics.complete >= MIN_COMPLETE,
            `${pct(metrics.complete)} of scheduler samples reach a root; the others begin:\n` +
            topOf(notRooted).map(([k, n]) => `x${n}: ${k}`).join('\n'));
  assert.ok(weightOf(boot) < 200 || metrics.bootComplete >= MIN_COMPLETE,
            `${pct(metrics.bootComplete)} of the first second's scheduler samples reach a root`);
  assert.ok(metrics.withErlang >= MIN_ERLANG,
            `${pct(metrics.withErlang)} of scheduler samples with Erlang functions; without, innermost frames:\n` +
            topOf(noErlang).map(([k, n]) => `x${n}: ${k}`).join('\n'));
  assert.ok(f.kernelShare >= MIN_KERNEL, `walked in the kernel: ${pct(f.kernelShare)}\n${rec.result.stderr}`);
  assert.ok(f.ringBytes > 0 && f.ringBytes <= MAX_RING_BYTES, `${f.ringBytes} ring-buffer bytes a sample`);
}

// The shape of every beam.smp sample with Erlang frames (schedulers, dirty schedulers, any
// other thread): Erlang-category frames named as Erlang or Elixir write them, or `[process
// <0.N.S> NAME]`, or `[BEAM JIT code]`; the process label just outside the outermost Erlang
// function, the Erlang functions one run of frames from there (C code is called from Erlang
// code, never the reverse: on a dirty scheduler too, where they sit outside the dirty call);
// `[BEAM JIT code]` at the leaf only (kernel frames under it).
function checkShape(t, rec, metrics) {
  const samples = beamSamples(rec.view, () => true);
  let withErlang = 0, labelled = 0, oneRun = 0, malformed = 0, jitNotLeaf = 0, perfMapNamed = 0;
  const badNames = new Map(), unlabelled = new Map(), split = new Map(), jitInner = new Map();
  for (const s of samples) {
    const bad = s.frames.filter((f) => isErlang(f) && !isProcessFrame(f) && f.name !== JIT_CODE_FRAME &&
                                       !wellFormedName(f.name));
    if (bad.length) {
      malformed += s.weight;
      for (const f of bad) tally(badNames, f.name, s.weight);
    }
    const jit = s.frames.findIndex((f) => f.name === JIT_CODE_FRAME && isErlang(f));
    if (jit >= 0 && s.frames.slice(jit + 1).some((f) => f.category !== 'Kernel')) {
      jitNotLeaf += s.weight;
      tally(jitInner, tailOf(s.frames.slice(jit), 4), s.weight);
    }
    const first = s.frames.findIndex(isErlangFunction);
    if (first < 0) continue;
    withErlang += s.weight;
    // JIT code named from the emulator's perf map (+JPperf true writes /tmp/perf-PID.map:
    // `$work:inner/1`, `$global::call_light_bif_shared`) beside the reader's frames.
    if (s.frames.some((f) => f.name.startsWith('$'))) perfMapNamed += s.weight;
    if (processLabel(s.frames)) labelled += s.weight;
    else tally(unlabelled, headOf(s.frames.slice(Math.max(0, first - 3)), 5), s.weight);
    const last = innermostIndex(s.frames, isErlangFunction);
    if (s.frames.slice(first, last + 1).every(isErlang)) oneRun += s.weight;
    else tally(split, s.frames.slice(first, last + 1).map((f) => (isErlang(f) ? f.name : `{${f.name}}`)).join(' > '),
               s.weight);
  }
  const total = weightOf(samples);
  Object.assign(metrics, {
    malformedNames: share(malformed, total), labelled: share(labelled, withErlang),
    oneRun: share(oneRun, withErlang), jitCodeNotLeaf: share(jitNotLeaf, total),
    perfMapNamed: share(perfMapNamed, withErlang),
  });
  t.diagnostic(`${withErlang} beam.smp samples with Erlang functions: ${pct(metrics.labelled)} with their ` +
               `process's label just outside them, ${pct(metrics.oneRun)} with their Erlang frames in one run; ` +
               `malformed Erlang names in ${malformed} of ${total}; [BEAM JIT code] not at the leaf in ${jitNotLeaf}; ` +
               `frames named from a perf map in ${perfMapNamed}`);
  for (const [k, n] of topOf(badNames)) t.diagnostic(`  malformed name x${n}: ${k}`);
  for (const [k, n] of topOf(unlabelled, 3)) t.diagnostic(`  no process label x${n}: ${k}`);
  for (const [k, n] of topOf(split, 3)) t.diagnostic(`  Erlang frames with others between x${n}: ${k}`);
  for (const [k, n] of topOf(jitInner, 3)) t.diagnostic(`  [BEAM JIT code] not at the leaf x${n}: ${k}`);
  assert.ok(withErlang > 0, 'no sample with Erlang functions');
  assert.ok(metrics.malformedNames <= 0.01, `malformed Erlang names in ${pct(metrics.malformedNames)} of samples`);
  assert.ok(metrics.labelled >= MIN_ORDERED, `${pct(metrics.labelled)} with a process label`);
  assert.ok(metrics.oneRun >= 0.99, `${pct(metrics.oneRun)} with their Erlang frames in one run`);
  assert.ok(metrics.jitCodeNotLeaf <= 0.01, `[BEAM JIT code] not at the leaf in ${pct(metrics.jitCodeNotLeaf)}`);
}

// Of the scheduler samples whose innermost frame matching `isOwn` is `leaf`, the share whose
// Erlang function names pass `nests` (names root first); at least `minSamples`.
function checkNesting(t, samples, { what, isOwn, leaf, nests, minSamples = 50 }, metrics) {
  let all = 0, ordered = 0;
  const other = new Map();
  for (const s of samples) {
    const names = erlangNames(s);
    const own = names.filter(isOwn);
    if (own.at(-1) !== leaf) continue;
    all += s.weight;
    if (nests(names, s)) ordered += s.weight;
    else tally(other, names.join(' > '), s.weight);
  }
  metrics[what] = { samples: all, ordered: share(ordered, all) };
  t.diagnostic(`${what}: ${all} samples with ${leaf} innermost, ${pct(share(ordered, all))} nested as called`);
  for (const [k, n] of topOf(other, 3)) t.diagnostic(`  other x${n}: ${k}`);
  assert.ok(all >= minSamples, `${what}: only ${all} samples with ${leaf} innermost`);
  assert.ok(share(ordered, all) >= MIN_ORDERED, `${what}: ${pct(share(ordered, all))} nested as called`);
}

// The samples with `fn` (an Erlang function) anywhere have the label of process `name` in >= 95%.
function checkLabel(t, samples, fn, name, metrics, minSamples = 50) {
  let all = 0, right = 0;
  const other = new Map();
  for (const s of samples) {
    if (!s.frames.some((f) => isErlangFunction(f) && f.name === fn)) continue;
    all += s.weight;
    const label = processLabel(s.frames);
    if (processName(label) === name) right += s.weight;
    else tally(other, label?.name ?? '(none)', s.weight);
  }
  metrics[`label ${name}`] = { samples: all, share: share(right, all) };
  t.diagnostic(`${fn}: ${all} samples, ${pct(share(right, all))} labelled [process <...> ${name}]` +
               topOf(other, 3).map(([k, n]) => `; ${k} x${n}`).join(''));
  assert.ok(all >= minSamples, `${fn}: only ${all} samples`);
  assert.ok(share(right, all) >= MIN_ORDERED, `${fn}: ${pct(share(right, all))} labelled ${name}`);
}

// Native functions under their Erlang caller: of the samples with a native frame `native`
// (optionally only those labelled with process `processOnly`), the share whose nearest frame
// outside it that is no native one (the C code between, e.g. beam_jit_call_bif, aside) is an
// Erlang function (`callers`: one of those). Stacks cut short ([truncated]: counted by the
// figures' check) are left out, and so are those with a native frame `exceptUnder` outside it:
// the runtime's own calls (erts_schedule's GC of a process it is about to run).
function checkCaller(t, samples, { native, callers = null, processOnly = null, exceptUnder = null, minSamples = 20 },
                     metrics) {
  const matches = typeof native === 'string' ? (f) => f.name === native : (f) => native.test(f.name);
  let all = 0, right = 0, cut = 0, runtime = 0;
  const seen = new Map();
  for (const s of samples) {
    const i = s.frames.findIndex((f) => f.category === 'User' && matches(f));
    if (i < 0) continue;
    if (processOnly && processName(processLabel(s.frames)) !== processOnly) continue;
    if (s.frames[0].name === TRUNCATED) {
      cut += s.weight;
      continue;
    }
    let j = i - 1;
    while (j >= 0 && s.frames[j].category === 'User') j--;
    if (exceptUnder && s.frames.slice(j + 1, i).some((f) => exceptUnder.test(f.name))) {
      runtime += s.weight;
      continue;
    }
    all += s.weight;
    const caller = s.frames[j];
    if (caller && isErlangFunction(caller) && (!callers || callers.includes(caller.name))) right += s.weight;
    const between = s.frames.slice(j + 1, i).map((f) => `{${f.name}} > `).join('');
    tally(seen, `${caller?.name ?? '(root)'} > ${between}${s.frames[i].name}`, s.weight);
  }
  const label = `${native}${processOnly ? ` in ${processOnly}` : ''}`;
  metrics[`caller ${label}`] = { samples: all, share: share(right, all), cut, runtime };
  t.diagnostic(`${label}: ${all} samples, ${pct(share(right, all))} under ` +
               `${callers ? callers.join(' or ') : 'an Erlang function'} (left out: ${cut} cut short` +
               `${exceptUnder ? `, ${runtime} under ${exceptUnder}` : ''})` +
               topOf(seen, 4).map(([k, n]) => `; ${k} x${n}`).join(''));
  assert.ok(all >= minSamples, `${label}: only ${all} samples`);
  assert.ok(share(right, all) >= MIN_ORDERED, `${label}: ${pct(share(right, all))} under their Erlang caller`);
}

// ---------------------------------------------------------------------------------------
// work.erl

const WORK_CHAIN = ['work:outer/1', 'work:middle/1', 'work:inner/1'];
const isWork = (n) => n.startsWith('work:');

function describeWork(label, erlArgs, { dirty, measured }) {
  describe(label, () => {
    let rec;
    const metrics = { erlArgs };
    before(async () => {
      if (!tmp) return;
      const maps = perfMapsNow();
      try {
        rec = await recordWith(label, ['--', ERL, ...erlArgs, '-noshell', '-pa', ebin(), '-run', 'work', 'main',
                                       String(MS), ...(measured ? ['trace'] : [])]);
      } finally {
        removePerfMapsSince(maps);
      }
    });
    after(() => {
      if (rec) saveMetrics(label, metrics);
    });

    it(`scheduler threads: reach a root in >= ${MIN_COMPLETE * 100}%, Erlang functions in >= ` +
       `${MIN_ERLANG * 100}%, walked in the kernel >= ${MIN_KERNEL * 100}%, <= 2 KB a sample`, (t) => {
      if (!beamReady(t)) return;
      checkFigures(t, rec, metrics, { minSamples: 1000 });
    });

    it('names Erlang functions module:function/arity, one run of frames under their process\'s label', (t) => {
      if (!beamReady(t)) return;
      checkShape(t, rec, metrics);
    });

    it('nests work:outer/1 > work:middle/1 > work:inner/1 as called, in [process <...> chain]', (t) => {
      if (!beamReady(t)) return;
      const samples = beamSamples(rec.view, isScheduler);
      checkNesting(t, samples, {
        what: 'chain', isOwn: isWork, leaf: 'work:inner/1',
        nests: (names) => hasConsecutive(names, WORK_CHAIN),
      }, metrics);
      checkLabel(t, samples, 'work:outer/1', 'chain', metrics);
      checkLabel(t, samples, 'work:digest/1', 'zipper', metrics);
      checkLabel(t, samples, 'work:compare/1', 'comparer', metrics);
    });

    it('puts light BIFs, eq and GC under their Erlang caller', (t) => {
      if (!beamReady(t)) return;
      const samples = beamSamples(rec.view, isScheduler);
      // lists:reverse/1 is Erlang code that tail-calls the BIF lists:reverse/2 (lists_reverse_2):
      // its frame may be there or not; erlang:phash2/1 is the BIF phash2_1, called from inner/1.
      checkCaller(t, samples, { native: 'lists_reverse_2', callers: ['work:inner/1', 'lists:reverse/1'],
                                processOnly: 'chain' }, metrics);
      checkCaller(t, samples, { native: 'phash2_1', callers: ['work:inner/1'], processOnly: 'chain' }, metrics);
      checkCaller(t, samples, { native: 'eq', callers: ['work:compare/1'], processOnly: 'comparer' }, metrics);
      checkCaller(t, samples, { native: 'erts_garbage_collect_nobump', exceptUnder: /^erts_schedule$/ }, metrics);
      // In chain's samples of lists_reverse_2, inner/1 is the innermost work: frame.
      let all = 0, inInner = 0;
      for (const s of samples) {
        if (processName(processLabel(s.frames)) !== 'chain' || !s.frames.some((f) => f.name === 'lists_reverse_2')) continue;
        all += s.weight;
        if (erlangNames(s).filter(isWork).at(-1) === 'work:inner/1') inInner += s.weight;
      }
      assert.ok(all >= 20 && share(inInner, all) >= MIN_ORDERED,
                `lists_reverse_2 in chain: ${all} samples, ${pct(share(inInner, all))} under work:inner/1`);
    });

    it('puts zlib\'s NIF under beam_jit_call_nif, under zlib:deflate_nif/4, under work:digest/1', (t) => {
      if (!beamReady(t)) return;
      const samples = beamSamples(rec.view, isScheduler);
      checkCaller(t, samples, { native: /^beam_jit_call_nif/ }, metrics);
      let all = 0, right = 0;
      const other = new Map();
      for (const s of samples) {
        const i = s.frames.findIndex((f) => isErlangFunction(f) && f.name === 'zlib:deflate_nif/4');
        if (i < 0) continue;
        all += s.weight;
        const names = erlangNames(s);
        const ok = (s.frames[i + 1]?.name ?? '').startsWith('beam_jit_call_nif') && s.frames[i + 1].category === 'User' &&
                   names.at(-1) === 'zlib:deflate_nif/4' && inOrder(names, ['work:digest/1', 'zlib:deflate_nif/4']) &&
                   processName(processLabel(s.frames)) === 'zipper';
        if (ok) right += s.weight;
        else tally(other, tailOf(s.frames.slice(0, i + 3), 8), s.weight);
      }
      metrics.nif = { samples: all, share: share(right, all) };
      t.diagnostic(`zlib:deflate_nif/4: ${all} samples, ${pct(share(right, all))} with beam_jit_call_nif just inside, ` +
                   `under work:digest/1 in zipper`);
      for (const [k, n] of topOf(other, 3)) t.diagnostic(`  other x${n}: ${k}`);
      assert.ok(all >= 100, `zlib:deflate_nif/4: only ${all} samples`);
      assert.ok(share(right, all) >= MIN_ORDERED, `zlib:deflate_nif/4: ${pct(share(right, all))} as expected`);
    });

    if (dirty) {
      it('puts the dirty process\'s Erlang frames just outside erts_call_dirty_bif on a dirty CPU scheduler', (t) => {
        if (!beamReady(t)) return;
        const samples = beamSamples(rec.view, isDirtyCpu);
        let all = 0, right = 0;
        const other = new Map();
        for (const s of samples) {
          const i = innermostIndex(s.frames, (f) => f.name === 'erts_call_dirty_bif' && f.category === 'User');
          if (i < 0) continue;
          all += s.weight;
          const label = s.frames.findIndex(isProcessFrame);
          const ok = isRootName(s.frames[0].name) && label > 0 &&
                     s.frames[label - 1].name === 'erts_dirty_process_main' &&
                     processName(s.frames[label]) === 'dirty' &&
                     s.frames.slice(label + 1, i).every(isErlangFunction) &&
                     hasConsecutive(s.frames.slice(label + 1, i).map((f) => f.name),
                                    ['work:run/2', 'work:dirty/1', 'erts_debug:dirty_cpu/2']) &&
                     s.frames[i - 1].name === 'erts_debug:dirty_cpu/2';
          if (ok) right += s.weight;
          else tally(other, headOf(s.frames.slice(Math.max(0, (label > 0 ? label : i) - 2), i + 1), 10), s.weight);
        }
        // The dirty threads' samples against the kernel's accounting of their time on a CPU, as
        // work.erl read it.
        const kernel = [...rec.result.stdout.matchAll(/^thread name=\S+ on_cpu_ns=(\d+) runqueue_ns=(\d+)$/gm)];
        assert.ok(kernel.length > 0, `work.erl printed no dirty thread:\n${rec.result.stdout}`);
        const onCpuMs = kernel.reduce((sum, m) => sum + Number(m[1]), 0) / 1e6;
        const waitingMs = kernel.reduce((sum, m) => sum + Number(m[2]), 0) / 1e6;
        const expected = (onCpuMs * FREQUENCY_HZ) / 1000;
        const sampled = weightOf(samples);
        metrics.dirty = { samples: all, share: share(right, all), sampled, expected };
        t.diagnostic(`dirty CPU schedulers: on a CPU ${onCpuMs.toFixed(0)} ms, waiting for one ${waitingMs.toFixed(0)} ms ` +
                     `(kernel): ${sampled} on-CPU samples (${expected.toFixed(0)} expected), ${all} in erts_call_dirty_bif, ` +
                     `${pct(share(right, all))} from a root, erts_dirty_process_main > [process <...> dirty] > ... > ` +
                     'work:run/2 > work:dirty/1 > erts_debug:dirty_cpu/2 > erts_call_dirty_bif');
        for (const [k, n] of topOf(other, 3)) t.diagnostic(`  other x${n}: ${k}`);
        assert.ok(Math.abs(sampled - expected) <= 0.1 * expected + 20,
                  `${sampled} samples of the dirty threads, ${expected.toFixed(0)} by the kernel's accounting`);
        assert.ok(all >= 200, `only ${all} dirty samples (the dirty threads ran ${onCpuMs.toFixed(0)} ms)`);
        assert.ok(share(right, all) >= MIN_ORDERED, `${pct(share(right, all))} of dirty samples as expected`);
      });
    }

    if (measured) {
      // work.erl's trace of its workers' scheduling (the time each was scheduled in: with one
      // scheduler, their shares of it) against the samples of the scheduler thread labelled
      // with each: within 3 points and three standard deviations of a sampled share.
      it('gives each worker process its share of the scheduler, as work.erl traced it', (t) => {
        if (!beamReady(t)) return;
        const names = ['chain', 'zipper', 'comparer'];
        const traced = new Map([...rec.result.stdout.matchAll(/^process running name=(\S+) ns=(\d+)$/gm)]
          .map((m) => [m[1], Number(m[2])]));
        assert.ok(names.every((n) => traced.has(n)), `work.erl printed:\n${rec.result.stdout}`);
        const tracedTotal = names.reduce((sum, n) => sum + traced.get(n), 0);
        const ours = new Map(names.map((n) => [n, 0]));
        for (const s of beamSamples(rec.view, isScheduler)) {
          const name = processName(processLabel(s.frames));
          if (ours.has(name)) ours.set(name, ours.get(name) + s.weight);
        }
        const total = [...ours.values()].reduce((a, b) => a + b, 0);
        metrics.shares = {};
        const apart = [];
        for (const n of names) {
          const mine = share(ours.get(n), total);
          const truth = traced.get(n) / tracedTotal;
          const bound = 0.03 + 3 * Math.sqrt((truth * (1 - truth)) / (total || 1));
          metrics.shares[n] = { bpfprof: mine, traced: truth, bound };
          t.diagnostic(`${n}: bpfprof ${pct(mine)} of ${total} labelled samples, traced ${pct(truth)} ` +
                       `(${(traced.get(n) / 1e6).toFixed(0)} ms), bound ${(bound * 100).toFixed(1)} points`);
          if (Math.abs(mine - truth) > bound) apart.push(n);
        }
        assert.ok(total >= 1000, `only ${total} samples labelled with the workers`);
        assert.deepEqual(apart, [], 'workers whose share is apart from work.erl\'s trace');
      });
    }
  });
}

// ---------------------------------------------------------------------------------------

describe('beam_stacks', () => {
  before(async () => {
    if (recorderUnavailableReason() || ![ERL, ERLC, ESCRIPT].every(existsSync)) return;
    tmp = mkdtempSync(join(tmpdir(), 'bpfprof-beam-'));
    mkdirSync(ebin());
    mkdirSync(genOut());
    const c = await run(ERLC, ['-o', ebin(), WORK_ERL, RELOAD_ERL]);
    assert.equal(c.code, 0, `erlc work.erl: ${c.stdout}${c.stderr}`);
    const g = await run(ESCRIPT, [GEN_MODULES, genSrc(), '15', '40']);
    assert.equal(g.code, 0, `gen_modules.escript: ${g.stdout}${g.stderr}`);
  });
  after(() => {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  // One normal scheduler, and a dirty CPU scheduler beside it, copying terms in C.
  describeWork('beam_erl', ['+S', '1'], { dirty: true, measured: true });
  // Two schedulers (the default here), frame pointers in Erlang code and the perf map
  // (+JPperf true: the FP_RA stack layout, each Erlang frame two words).
  describeWork('beam_erl_jpperf', ['+JPperf', 'true'], { dirty: false, measured: false });

  // A module reloaded every 150 ms, the version before the last purged each time (its memory
  // free for the next): each sample of a version's function must fall in that version's
  // lifetime, as reload.erl printed it on the wall clock (the profile's time base is
  // meta.startTime's).
  describe('beam_reload', () => {
    let rec;
    before(async () => {
      if (!tmp) return;
      rec = await recordWith('beam_reload', ['--', ERL, '+S', '1', '-noshell', '-pa', ebin(), '-run', 'reload',
                                             'main', String(MS), '150']);
    });

    it('names each sample of a reloaded module by the version it ran, never another', (t) => {
      if (!beamReady(t)) return;
      const lifetimes = new Map([...rec.result.stdout.matchAll(/^version (\d+) (\d+) (\d+)$/gm)]
        .map((m) => [Number(m[1]), [Number(m[2]) / 1e6, Number(m[3]) / 1e6]]));
      assert.ok(lifetimes.size >= 10, `${lifetimes.size} versions`);
      const start = rec.profile.meta.startTime;
      let inside = 0, total = 0;
      const outside = [];
      for (const s of beamSamples(rec.view, isScheduler)) {
        const spin = s.frames.map((f) => /^hot:spin(\d+)\/1$/.exec(f.name)).find(Boolean);
        if (!spin) continue;
        total += s.weight;
        const [from, to] = lifetimes.get(Number(spin[1])) ?? [0, 0];
        const at = start + s.time;
        // 2 ms: the clocks' agreement and a sample's interval.
        if (at >= from - 2 && at <= to + 2) inside += s.weight;
        else if (outside.length < 5) outside.push(`spin${spin[1]} at ${(at - from).toFixed(1)} ms from its start`);
      }
      t.diagnostic(`${lifetimes.size} versions; ${total} samples in a version's function, ${pct(share(inside, total))} ` +
                   `within its lifetime${outside.length ? `; outside: ${outside.join(', ')}` : ''}`);
      assert.ok(total >= 500, `${total} samples`);
      assert.ok(share(inside, total) >= 0.99, `${pct(share(inside, total))} within their version's lifetime`);
    });
  });

  describe('beam_elixir', () => {
    let rec;
    const metrics = {};
    before(async () => {
      if (!tmp || !existsSync(ELIXIR)) return;
      // One scheduler, as beam_erl: with two, the one without work spends a varying share of the
      // run (4-17% of the schedulers' samples here) spinning and being woken, with no Erlang
      // process on it.
      rec = await recordWith('beam_elixir', ['--', ELIXIR, '--erl', '+S 1', WORK_EXS, String(MS)]);
    });
    after(() => {
      if (rec) saveMetrics('beam_elixir', metrics);
    });

    it(`scheduler threads: reach a root in >= ${MIN_COMPLETE * 100}%, Erlang functions in >= ` +
       `${MIN_ERLANG * 100}%, walked in the kernel >= ${MIN_KERNEL * 100}%, <= 2 KB a sample`, (t) => {
      if (!beamReady(t, [ERL, ELIXIR])) return;
      checkFigures(t, rec, metrics, { minSamples: 1000 });
    });

    it('names Elixir functions as Elixir writes them, Erlang modules\' as Erlang does', (t) => {
      if (!beamReady(t, [ERL, ELIXIR])) return;
      checkShape(t, rec, metrics);
      const names = new Map();
      for (const s of beamSamples(rec.view, () => true))
        for (const f of s.frames.filter(isErlangFunction)) tally(names, f.name, s.weight);
      // No Elixir module in Erlang's form ('Elixir.Enum':map/2), no Erlang module in Elixir's
      // (:lists.reverse/1); both kinds there.
      const wrong = [...names.keys()].filter((n) => /^'?Elixir\./.test(n) || n.startsWith(':'));
      const elixirForm = [...names.keys()].filter((n) => /^[A-Z]/.test(n) || n.startsWith('anonymous fn/'));
      const erlangForm = [...names.keys()].filter((n) => erlangModule(n) !== null);
      t.diagnostic(`${names.size} functions: ${elixirForm.length} in Elixir's form (${elixirForm.slice(0, 5).join(', ')}), ` +
                   `${erlangForm.length} in Erlang's (${erlangForm.slice(0, 5).join(', ')})`);
      assert.deepEqual(wrong, [], 'names in the other language\'s form');
      for (const n of ['Fixture.Work.outer/1', 'Fixture.Work.middle/1', 'Fixture.Work.inner/1',
                       'anonymous fn/1 in Fixture.Work.middle/1'])
        assert.ok(names.has(n), `no frame named ${n}`);
      assert.ok(erlangForm.length > 0, 'no Erlang module\'s function');
    });

    it('nests Fixture.Work.outer/1 > middle/1 > Enum > anonymous fn/1 in Fixture.Work.middle/1 > inner/1', (t) => {
      if (!beamReady(t, [ERL, ELIXIR])) return;
      const samples = beamSamples(rec.view, isScheduler);
      const anon = 'anonymous fn/1 in Fixture.Work.middle/1';
      checkNesting(t, samples, {
        what: 'elixir chain', isOwn: (n) => n.includes('Fixture.Work.'), leaf: 'Fixture.Work.inner/1',
        nests: (names) => {
          const i = names.indexOf('Fixture.Work.middle/1');
          const j = names.lastIndexOf(anon);
          // Enum.map/2 on a list runs Enum's copy of lists:map/2, body-recursive: one frame or
          // more of it between middle/1 and the fn.
          return i > 0 && names[i - 1] === 'Fixture.Work.outer/1' && j > i + 1 &&
                 names.slice(i + 1, j).every((n) => n.startsWith('Enum.')) &&
                 names[j + 1] === 'Fixture.Work.inner/1';
        },
      }, metrics);
      checkLabel(t, samples, 'Fixture.Work.outer/1', 'chain', metrics);
      checkCaller(t, samples, { native: 'phash2_1', callers: ['Fixture.Work.inner/1'], processOnly: 'chain' }, metrics);
    });
  });

  describe('beam_erlc', () => {
    let rec;
    const metrics = {};
    before(async () => {
      if (!tmp) return;
      const sources = readdirSync(genSrc()).filter((f) => f.endsWith('.erl')).sort().map((f) => join(genSrc(), f));
      metrics.modules = sources.length;
      rec = await recordWith('beam_erlc', ['--', ERLC, '-o', genOut(), ...sources]);
      assert.equal(readdirSync(genOut()).filter((f) => f.endsWith('.beam')).length, sources.length,
                   `erlc wrote ${readdirSync(genOut()).join(', ')}`);
    });
    after(() => {
      if (rec) saveMetrics('beam_erlc', metrics);
    });

    it(`scheduler threads: reach a root in >= ${MIN_COMPLETE * 100}%, Erlang functions in >= ` +
       `${MIN_ERLANG * 100}%, walked in the kernel >= ${MIN_KERNEL * 100}%, <= 2 KB a sample`, (t) => {
      if (!beamReady(t)) return;
      checkFigures(t, rec, metrics, { minSamples: 1000 });
    });

    it('names the compiler\'s functions, one run of frames under their process\'s label', (t) => {
      if (!beamReady(t)) return;
      checkShape(t, rec, metrics);
    });

    // The compiler's passes (v3_core, sys_core_fold, v3_kernel, the beam_ssa_* passes, beam_asm)
    // run under compile:internal_comp/5 > compile:fold_comp/4 in the process compile:file/2
    // starts: a pass's frames under compile: frames.
    it('puts the compiler\'s passes (v3_core, beam_ssa_*) under compile:', (t) => {
      if (!beamReady(t)) return;
      const samples = beamSamples(rec.view, isScheduler).filter((s) => s.frames.some(isErlangFunction));
      const total = weightOf(samples);
      const modules = new Map();
      for (const s of samples) for (const m of new Set(erlangNames(s).map(erlangModule))) tally(modules, m, s.weight);
      t.diagnostic(`${total} scheduler samples with Erlang functions; by module (in stack): ` +
                   topOf(modules, 15).map(([m, n]) => `${m} ${pct(n / total)}`).join(', '));
      const underCompile = (s) => {
        const names = erlangNames(s);
        const pass = names.findIndex((n) => /^(v3_core|beam_ssa[a-z_]*|v3_kernel|sys_core_fold|beam_[a-z_]+):/.test(n));
        return pass > 0 && names.slice(0, pass).some((n) => n.startsWith('compile:'));
      };
      const inPass = samples.filter((s) => erlangNames(s).some((n) => /^(v3_core|beam_ssa[a-z_]*):/.test(n)));
      const compileShare = share(weightOf(samples, (s) => erlangNames(s).some((n) => n.startsWith('compile:'))), total);
      const ssa = weightOf(samples, (s) => erlangNames(s).some((n) => /^beam_ssa[a-z_]*:/.test(n)));
      const core = weightOf(samples, (s) => erlangNames(s).some((n) => n.startsWith('v3_core:')));
      const nested = share(weightOf(inPass, underCompile), weightOf(inPass));
      Object.assign(metrics, { compileShare, ssaSamples: ssa, v3CoreSamples: core, passesUnderCompile: nested });
      t.diagnostic(`under compile: ${pct(compileShare)}; beam_ssa_*: ${ssa} samples; v3_core: ${core}; ` +
                   `v3_core/beam_ssa_* frames under a compile: frame in ${pct(nested)}`);
      const other = new Map();
      for (const s of inPass) if (!underCompile(s)) tally(other, erlangNames(s).join(' > '), s.weight);
      for (const [k, n] of topOf(other, 3)) t.diagnostic(`  other x${n}: ${k}`);
      // The rest is the BEAM's boot loading code (init, erl_prim_loader, code: 200-320 samples
      // with Erlang frames), whose share grows as the compile's time shrinks on a quick machine:
      // 2.7 to 5 s of erlc's CPU here, 88-94% under compile:.
      assert.ok(compileShare >= 0.85, `${pct(compileShare)} under compile:`);
      assert.ok(ssa >= 0.2 * total, `beam_ssa_* in ${ssa} of ${total}`);
      assert.ok(core >= 10, `v3_core in ${core} samples`);
      assert.ok(nested >= MIN_ORDERED, `${pct(nested)} of the passes' samples under compile:`);
    });
  });
});
