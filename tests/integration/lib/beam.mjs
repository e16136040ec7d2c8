// What the BEAM tests (beam_stacks) and bench/beam_agreement.mjs share: which threads of a
// beam.smp are schedulers, which frames are Erlang's (and which of those name a function),
// the names Erlang and Elixir write, and how samples nest.
// Without the harness's side effects (a results directory): bench/ imports it too.
import { STATE_FRAMES, hasConsecutive, inOrder, weightOf } from './profile_view.mjs';

export { hasConsecutive, inOrder, weightOf };

export const ERL = '/usr/bin/erl';
export const ERLC = '/usr/bin/erlc';
export const ESCRIPT = '/usr/bin/escript';
export const ELIXIR = '/usr/bin/elixir';

// The category of the BEAM reader's frames (Erlang and Elixir functions, process labels).
export const ERLANG_CATEGORY = 'Erlang';

// Thread names (erl_process.c, cut to the kernel's 15 characters): `1_scheduler`,
// `1_dirty_cpu_sch` (…_scheduler), `1_dirty_io_sche`.
export const isScheduler = (th) => /^\d+_scheduler$/.test(th.name);
export const isDirtyCpu = (th) => /^\d+_dirty_cpu_sch/.test(th.name);
export const isDirtyIo = (th) => /^\d+_dirty_io_sch/.test(th.name);

export const beamThreads = (view) => view.threads.filter((th) => th.processName === 'beam.smp');
export const onCpu = (s) => s.frames.length > 0 && !STATE_FRAMES.has(s.frames.at(-1).name);

// The on-CPU samples of a profile's beam.smp threads that `which` picks, each with the thread's
// name.
export function beamSamples(view, which = isScheduler) {
  const out = [];
  for (const th of beamThreads(view)) {
    if (!which(th)) continue;
    for (const s of view.samples(th)) if (onCpu(s)) out.push({ ...s, thread: th.name });
  }
  return out;
}

// The samples (from beamSamples) of the first `ms` milliseconds of them.
export function firstOf(samples, ms) {
  const first = Math.min(...samples.map((s) => s.time));
  return samples.filter((s) => s.time < first + ms);
}

// `[process <0.85.0>]`, `[process <0.85.0> chain]`: the process a scheduler ran, just outside
// its outermost Erlang frame.
export const PROCESS_FRAME = /^\[process <\d+\.\d+\.\d+>(?: (.+))?\]$/;
export const JIT_CODE_FRAME = '[BEAM JIT code]';
export const isErlang = (f) => f.category === ERLANG_CATEGORY;
export const isProcessFrame = (f) => isErlang(f) && PROCESS_FRAME.test(f.name);
// An Erlang or Elixir function's frame (not a process label, not `[BEAM JIT code]`).
export const isErlangFunction = (f) => isErlang(f) && !f.name.startsWith('[');
export const processName = (f) => PROCESS_FRAME.exec(f?.name ?? '')?.[1] ?? null;

// Names as Erlang writes them (`mod:fun/arity`, atoms quoted where needed,
// `erl_init:'-start/2-fun-0-'/0`; the perf map's form leaves reserved words bare) and as Elixir
// does (`Fixture.Work.inner/1`, `Enum."-map/2-lists^map/1-0-"/2`,
// `anonymous fn/1 in Fixture.Work.middle/1`).
const ATOM = String.raw`(?:[a-z][A-Za-z0-9_@]*|'(?:[^'\\]|\\.)+')`;
const ELIXIR_MODULE = String.raw`[A-Z][A-Za-z0-9_]*(?:\.[A-Z][A-Za-z0-9_]*)*`;
const ELIXIR_FUN = String.raw`(?:[a-z_][A-Za-z0-9_]*[?!]?|"(?:[^"\\]|\\.)+"|[^\sA-Za-z0-9_"./][^\s/]*)`;
export const ERLANG_NAME = new RegExp(`^${ATOM}:${ATOM}/\\d+$`);
export const ELIXIR_NAME = new RegExp(`^${ELIXIR_MODULE}\\.${ELIXIR_FUN}/\\d+$`);
export const ELIXIR_ANONYMOUS = new RegExp(`^anonymous fn/\\d+ in ${ELIXIR_MODULE}\\.${ELIXIR_FUN}/\\d+$`);
export const wellFormedName = (name) =>
  ERLANG_NAME.test(name) || ELIXIR_NAME.test(name) || ELIXIR_ANONYMOUS.test(name);

// The module of an Erlang-form name (`lists:reverse/1` -> `lists`), or null.
export const erlangModule = (name) => /^('(?:[^'\\]|\\.)+'|[a-z][A-Za-z0-9_@]*):/.exec(name)?.[1] ?? null;

// The Erlang function frames of a sample, root first (names).
export const erlangNames = (s) => s.frames.filter(isErlangFunction).map((f) => f.name);

// The index in s.frames of the innermost frame whose name `pred` accepts, or -1.
export function innermostIndex(frames, pred) {
  for (let i = frames.length - 1; i >= 0; i--) if (pred(frames[i])) return i;
  return -1;
}


// The process label of a sample: the frame just outside its outermost Erlang function frame
// when that is a `[process ...]` frame; undefined without Erlang function frames, null when
// the frame there is no label.
export function processLabel(frames) {
  const outermost = frames.findIndex(isErlangFunction);
  if (outermost < 0) return undefined;
  return outermost > 0 && isProcessFrame(frames[outermost - 1]) ? frames[outermost - 1] : null;
}

export function tally(map, key, weight = 1) {
  map.set(key, (map.get(key) ?? 0) + weight);
}
export function topOf(map, limit = 5) {
  return [...map].sort((a, b) => b[1] - a[1]).slice(0, limit);
}

// 'a > b > c' of a sample's last `n` frames (kernel frames marked [k]).
export function tailOf(frames, n = 6) {
  const shown = frames.slice(-n).map((f) => (f.category === 'Kernel' ? `[k]${f.name}` : f.name));
  return (frames.length > n ? '... > ' : '') + shown.join(' > ');
}
export function headOf(frames, n = 5) {
  const shown = frames.slice(0, n).map((f) => f.name);
  return shown.join(' > ') + (frames.length > n ? ' > ...' : '');
}
