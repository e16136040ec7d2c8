// How truthful the user stacks of a profile are: every user stack must either
// reach a real thread root or say, with a `[truncated]` frame at its root end, that it was
// cut. This module sorts samples into three kinds, for bpfprof profiles and for
// `perf script` output of `perf record --call-graph dwarf`, with the same rules:
//
//   root       the outermost user frame is a thread root (ROOT_FUNCTIONS)
//   truncated  the stack says it was cut: bpfprof's root-most frame is `[truncated]`;
//              perf's outermost user frame is `[unknown]`
//   silent     neither: a stack that ends somewhere in the middle of the program without
//              saying so (the one that lies)
//
// What is counted (bpfprof profiles): the on-CPU samples that have at least one user frame
// (category User) or a [truncated] frame, weighted by samples.weight (a collapsed sample
// stands for `weight` timer ticks). Off-CPU samples (ending in [sleeping], [I/O wait] or
// [waiting for CPU], fractional weights) are left out: their stacks are frame-pointer walks,
// not DWARF unwinds, and they are not timer ticks. Kernel-only samples (no user frame, e.g.
// a kernel thread, or a task exiting) are counted apart (`kernelOnly`), not classified.
// bpfprof's launcher child (before its exec) is not written to the profile, so nothing of
// it is counted; for perf, samples of comm `perf-exec` (perf's child before the exec) and
// `perf` are left out.
//
// Names decide, as a user reads the profile (the tests use these counts). A stack whose
// outermost frame lies at its file's ELF entry point but is not named as a root (a stripped
// executable's _start shown as `sqlite3+0xa7a0`, as a wrong symbol, or by perf as
// `[unknown]`) is counted as silent (perf: truncated) and also in `silentAtEntry`
// (`truncatedAtEntry`), so that messages tell a naming problem from an unwinding one; the
// `real*Share` figures count those stacks as reaching a root (what the unwinder achieved,
// whatever the name: the benchmark's figures).
import { closeSync, openSync, readSync } from 'node:fs';

import { ProfileView, STATE_FRAMES } from './profile_view.mjs';

// The outermost user frame of a stack that reached its thread's start. glibc's entry points
// under the names they can carry (the symbol table, DWARF, versioned aliases).
export const ROOT_FUNCTIONS = new Set([
  // main thread: the executable's (or the dynamic loader's) entry point and libc's start-up
  '_start', '__libc_start_main', '__libc_start_main_impl', '__libc_start_main_alias_2',
  '__libc_start_call_main',
  // other threads
  'clone3', '__clone3', 'clone', '__clone', 'start_thread',
  // the dynamic loader's start-up, before the executable's _start
  '_dl_start', '_dl_start_user',
]);

// A symbol name without perf's `+0x12` offset and without a symbol version (`@@GLIBC_2.34`).
export function bareName(name) {
  return String(name).replace(/\+0x[0-9a-f]+$/i, '').replace(/@.*$/, '');
}

export function isRootName(name) {
  return ROOT_FUNCTIONS.has(bareName(name));
}

export const TRUNCATED = '[truncated]';

// One bpfprof sample's frames (root first, harness ProfileView.frames) ->
// 'root' | 'truncated' | 'silent' | 'kernel-only' | 'off-cpu' | 'empty'.
export function classifyFrames(frames) {
  if (!frames.length) return 'empty';
  if (STATE_FRAMES.has(frames[frames.length - 1].name)) return 'off-cpu';
  if (frames[0].name === TRUNCATED) return 'truncated';
  if (!frames.some((f) => f.category === 'User')) return 'kernel-only';
  // A user stack starts at the root end; a kernel frame above a user frame is no root.
  if (frames[0].category !== 'User') return 'silent';
  return isRootName(frames[0].name) ? 'root' : 'silent';
}

function emptyCounts() {
  return { root: 0, truncated: 0, silent: 0, silentAtEntry: 0, truncatedAtEntry: 0, kernelOnly: 0, offCpu: 0, samples: 0 };
}

// The ELF entry point of a file as a library-relative address (e_entry minus the load base,
// the lowest PT_LOAD's p_vaddr - p_offset), or null (unreadable, not a 64-bit ELF file).
export function elfEntryRelative(path) {
  let fd;
  try {
    fd = openSync(path, 'r');
    const header = Buffer.alloc(64);
    if (readSync(fd, header, 0, 64, 0) < 64) return null;
    if (header.readUInt32BE(0) !== 0x7f454c46 || header[4] !== 2 || header[5] !== 1) return null;
    const entry = header.readBigUInt64LE(24);
    const phoff = header.readBigUInt64LE(32);
    const phentsize = header.readUInt16LE(54);
    const phnum = header.readUInt16LE(56);
    if (!entry) return null;
    const table = Buffer.alloc(phentsize * phnum);
    readSync(fd, table, 0, table.length, Number(phoff));
    let base = null;
    for (let i = 0; i < phnum; i++) {
      const ph = table.subarray(i * phentsize);
      if (ph.readUInt32LE(0) !== 1) continue; // PT_LOAD
      const b = ph.readBigUInt64LE(16) - ph.readBigUInt64LE(8); // p_vaddr - p_offset
      if (base === null || b < base) base = b;
    }
    return Number(entry - (base ?? 0n));
  } catch {
    return null;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

// An entry point's code (x86-64 _start: 0x22 bytes; aarch64 a few instructions) lies
// within this many bytes after it.
const ENTRY_CODE_BYTES = 64;

function addCounts(into, kind, weight, atEntry) {
  into.samples += weight;
  if (kind === 'root') into.root += weight;
  else if (kind === 'truncated') {
    into.truncated += weight;
    if (atEntry) into.truncatedAtEntry += weight;
  } else if (kind === 'silent') {
    into.silent += weight;
    if (atEntry) into.silentAtEntry += weight;
  }
  else if (kind === 'kernel-only' || kind === 'empty') into.kernelOnly += weight;
  else if (kind === 'off-cpu') into.offCpu += weight;
}

// Shares of root / truncated / silent among the classified (user) samples.
function withShares(c) {
  const user = c.root + c.truncated + c.silent;
  return {
    ...c, user,
    rootShare: user ? c.root / user : 0,
    truncatedShare: user ? c.truncated / user : 0,
    silentShare: user ? c.silent / user : 0,
    silentAtEntryShare: user ? c.silentAtEntry / user : 0,
    realRootShare: user ? (c.root + c.silentAtEntry + c.truncatedAtEntry) / user : 0,
    realTruncatedShare: user ? (c.truncated - c.truncatedAtEntry) / user : 0,
    realSilentShare: user ? (c.silent - c.silentAtEntry) / user : 0,
  };
}

function topEntries(map, limit) {
  return [...map.entries()].sort((a, b) => b[1] - a[1]).slice(0, limit);
}

// A group of samples (one process, or all): counts, shares, and for silently cut stacks the
// most common outermost frames and one example stack (root first) each.
class Group {
  constructor(key, extra = {}) {
    this.key = key;
    this.extra = extra;
    this.counts = emptyCounts();
    this.silentOutermost = new Map();
    this.silentExample = new Map();
  }

  add(kind, weight, outermost, describe, atEntry = false) {
    addCounts(this.counts, kind, weight, atEntry);
    if (kind !== 'silent') return;
    this.silentOutermost.set(outermost, (this.silentOutermost.get(outermost) ?? 0) + weight);
    if (!this.silentExample.has(outermost)) this.silentExample.set(outermost, describe());
  }

  result() {
    const top = topEntries(this.silentOutermost, 5);
    return {
      key: this.key, ...this.extra, ...withShares(this.counts),
      silentOutermost: top.map(([name, weight]) => ({ name, weight, example: this.silentExample.get(name) })),
    };
  }
}

function shortStack(names, max = 12) {
  const shown = names.length > max ? [...names.slice(0, 3), '...', ...names.slice(-(max - 4))] : names;
  return shown.join(' > ');
}

// Classifies every sample of a bpfprof processed profile (the parsed JSON). Returns
// { overall, processes: [per process, busiest first], byName: [per process name] }, each
// with root/truncated/silent/kernelOnly/offCpu weights, user (= root+truncated+silent) and
// rootShare/truncatedShare/silentShare.
export function profileStackQuality(profile) {
  const view = profile instanceof ProfileView ? profile : new ProfileView(profile);
  // Per lib index, the file's entry point (library-relative), read once.
  const entries = new Map();
  const atEntry = (frame) => {
    const lib = view.frameTable.lib?.[frame];
    const address = view.frameTable.address?.[frame];
    if (lib === null || lib === undefined || lib < 0 || address === null || address < 0) return false;
    if (!entries.has(lib)) entries.set(lib, elfEntryRelative(view.profile.libs[lib]?.path ?? ''));
    const entry = entries.get(lib);
    return entry !== null && address >= entry && address < entry + ENTRY_CODE_BYTES;
  };
  const overall = new Group('all');
  const processes = new Map();
  const names = new Map();
  for (const thread of view.threads) {
    const key = `${thread.processName} (${thread.pid})`;
    if (!processes.has(key)) processes.set(key, new Group(key, { pid: String(thread.pid), name: thread.processName }));
    if (!names.has(thread.processName)) names.set(thread.processName, new Group(thread.processName, { name: thread.processName }));
    const groups = [overall, processes.get(key), names.get(thread.processName)];
    for (const s of view.samples(thread)) {
      const kind = classifyFrames(s.frames);
      const entry = (kind === 'silent' || kind === 'truncated') && s.frames[0].category === 'User' &&
                    atEntry(s.frames[0].frame);
      const outermost = s.frames[0]?.name ?? '(null stack)';
      const describe = () => shortStack(s.frames.filter((f) => f.category !== 'Kernel').map((f) => f.name));
      for (const g of groups) g.add(kind, s.weight, outermost, describe, entry);
    }
  }
  const sorted = (m) => [...m.values()].map((g) => g.result()).sort((a, b) => b.user - a.user);
  return { overall: overall.result(), processes: sorted(processes), byName: sorted(names) };
}

// The completeness figure bpfprof stores in meta.extra ("User stacks complete", a fraction
// 0..1 written with format 'percentage'), or undefined.
export function storedCompleteness(profile) {
  const section = (profile.meta?.extra ?? []).find((x) => x.label === 'bpfprof');
  const entry = section?.entries?.find((e) => e.label === 'User stacks complete');
  return typeof entry?.value === 'number' ? entry.value : undefined;
}

// The figure bpfprof prints at the end (`user stacks complete: 99.7%`), as a fraction, or
// undefined.
export function printedCompleteness(stderr) {
  const m = /user stacks complete: ([\d.]+)%/.exec(stderr ?? '');
  return m ? Number(m[1]) / 100 : undefined;
}

// A bpfprof entry of meta.extra (label -> value), and a `bpfprof: LABEL: TEXT` line of -v.
function metaEntry(profile, label) {
  const section = (profile.meta?.extra ?? []).find((x) => x.label === 'bpfprof');
  return section?.entries?.find((e) => e.label === label)?.value;
}
function summaryLine(stderr, label) {
  return new RegExp(`^bpfprof: ${label}: (.*)$`, 'm').exec(stderr)?.[1];
}

// The figures of one recording (`rec` of recordWith, with -v), from its -v summary and from the
// profile's meta.extra (the same figures, which the tests compare).
export function recordingFigures(rec) {
  const { profile } = rec;
  const stderr = rec.result.stderr;
  const number = (text, re) => (text === undefined ? undefined : Number(re.exec(String(text))?.[1]));
  const percent = (text) => number(text, /^([\d.]+)%/) / 100;
  return {
    printedComplete: printedCompleteness(stderr),
    storedComplete: storedCompleteness(profile),
    ringBytes: number(summaryLine(stderr, 'Ring-buffer traffic'), /^(\d+) bytes per sample/),
    ringBytesMeta: number(metaEntry(profile, 'Ring-buffer traffic'), /^(\d+) bytes per sample/),
    kernelShare: percent(summaryLine(stderr, 'User stacks unwound in the kernel')),
    kernelShareMeta: percent(metaEntry(profile, 'User stacks unwound in the kernel')),
    offCpuKernelShare: percent(summaryLine(stderr, 'Off-CPU user stacks unwound in the kernel')),
    fellBack: summaryLine(stderr, 'Kernel walks that fell back'),
    copiesByProcess: summaryLine(stderr, 'Stack copies by process'),
    ringBytesBesideCopies: ringBytesBesideCopies(stderr),
  };
}

// Ring-buffer bytes a sample without the stack copies' (the fallback of a walk, some 25 KB
// each): what the kernel's walks cost, apart from how many fell back while tables loaded.
function ringBytesBesideCopies(stderr) {
  const perSample = Number(/^(\d+) bytes per sample/.exec(summaryLine(stderr, 'Ring-buffer traffic') ?? '')?.[1]);
  const samples = Number(/^bpfprof: (\d+) samples \(/m.exec(stderr)?.[1]);
  // On-CPU samples that fell back, and the mean event of a copy (of samples, switch-outs
  // and wakers alike: their stacks are copied alike).
  const fellBack = Number(/\(\d+; (\d+) by fallback/.exec(summaryLine(stderr, 'User stacks unwound in the kernel') ?? '')?.[1] ?? 0);
  const perCopy = Number(/ (\d+) of event \(mean\)/.exec(
    summaryLine(stderr, 'user stacks copied and unwound in userspace') ?? '')?.[1] ?? 0);
  if (!samples || Number.isNaN(perSample)) return undefined;
  const copyBytes = fellBack * perCopy;
  return Math.max(0, Math.round((perSample * samples - copyBytes) / samples));
}

// ---------------------------------------------------------------------------------------
// perf script

// The arguments for `perf script` that parsePerfScript reads: comm, pid/tid and the call
// chain (address, symbol, dso per frame, leaf first), no inline expansion (slow, and not
// needed to find the outermost frame).
export const PERF_SCRIPT_ARGS = ['-F', 'comm,pid,tid,ip,sym,dso', '--no-inline'];

const KERNEL_ADDRESS = /^ffff[89a-f]/i;
// What perf writes where a DWARF unwind stopped early: `ffffffffffffffff [unknown] ([unknown])`.
const PERF_CUT_MARKER = 'ffffffffffffffff';

// Parses `perf script` output (PERF_SCRIPT_ARGS) into [{ comm, pid, tid, frames: [{ address,
// sym, dso, kernel }] leaf first }].
export function parsePerfScript(text) {
  const samples = [];
  let current = null;
  for (const line of text.split('\n')) {
    if (!line.trim()) {
      current = null;
      continue;
    }
    if (!/^\s/.test(line)) {
      const m = /^(.*?)\s+(\d+)\/(\d+)\b/.exec(line);
      current = { comm: m ? m[1].trim() : line.trim(), pid: m ? m[2] : '?', tid: m ? m[3] : '?', frames: [] };
      samples.push(current);
      continue;
    }
    if (!current) continue;
    const m = /^\s*([0-9a-f]+)\s+(.*?)\s+\(([^()]*)\)\s*$/i.exec(line);
    if (!m) continue;
    const address = m[1].padStart(16, '0').toLowerCase();
    current.frames.push({ address: m[1], sym: m[2], dso: m[3],
                          kernel: address !== PERF_CUT_MARKER && KERNEL_ADDRESS.test(address) });
  }
  return samples;
}

// One perf sample -> 'root' | 'truncated' (outermost user frame [unknown], e.g. perf's
// ffffffffffffffff end-of-unwind marker) | 'silent' | 'kernel-only'.
export function classifyPerfSample(sample) {
  const user = sample.frames.filter((f) => !f.kernel);
  if (!user.length) return 'kernel-only';
  const outermost = user[user.length - 1];
  if (bareName(outermost.sym) === '[unknown]') return 'truncated';
  return isRootName(outermost.sym) ? 'root' : 'silent';
}

export const PERF_OWN_COMMS = new Set(['perf-exec', 'perf']);

// True when a perf frame (dso-relative address, as perf script prints it for user frames)
// lies at its file's ELF entry point. entries: a Map cache path -> entry.
function perfFrameAtEntry(frame, entries) {
  if (!frame.dso.startsWith('/')) return false;
  if (!entries.has(frame.dso)) entries.set(frame.dso, elfEntryRelative(frame.dso));
  const entry = entries.get(frame.dso);
  const address = Number.parseInt(frame.address, 16);
  return entry !== null && address >= entry && address < entry + ENTRY_CODE_BYTES;
}

// Like profileStackQuality, for parsed perf script samples (each weighs 1).
export function perfStackQuality(samples) {
  const overall = new Group('all');
  const processes = new Map();
  const names = new Map();
  const entries = new Map();
  for (const s of samples) {
    if (PERF_OWN_COMMS.has(s.comm)) continue;
    const key = `${s.comm} (${s.pid})`;
    if (!processes.has(key)) processes.set(key, new Group(key, { pid: s.pid, name: s.comm }));
    if (!names.has(s.comm)) names.set(s.comm, new Group(s.comm, { name: s.comm }));
    const kind = classifyPerfSample(s);
    const user = s.frames.filter((f) => !f.kernel);
    const outermost = user.length ? bareName(user[user.length - 1].sym) : '(none)';
    const describe = () => shortStack(user.map((f) => bareName(f.sym)).reverse());
    const entry = (kind === 'silent' || kind === 'truncated') && perfFrameAtEntry(user[user.length - 1], entries);
    for (const g of [overall, processes.get(key), names.get(s.comm)]) g.add(kind, 1, outermost, describe, entry);
  }
  const sorted = (m) => [...m.values()].map((g) => g.result()).sort((a, b) => b.user - a.user);
  return { overall: overall.result(), processes: sorted(processes), byName: sorted(names) };
}

// ---------------------------------------------------------------------------------------
// Text for failure messages and diagnostics

function p1(x) {
  return `${(100 * x).toFixed(1)}%`;
}

// 'sqlite3 (1234): 2998 user samples: 91.9% reach a root, 0.0% [truncated], 8.1% cut silently'
export function describeGroup(g) {
  return `${g.key}: ${Math.round(g.user)} user samples: ${p1(g.rootShare)} reach a root, ` +
         `${p1(g.truncatedShare)} [truncated], ${p1(g.silentShare)} cut silently` +
         (g.silentAtEntry ? ` (of which ${p1(g.silentAtEntryShare)} end at their file's entry point, misnamed)` : '') +
         (g.kernelOnly ? ` (+${Math.round(g.kernelOnly)} kernel-only)` : '');
}

// Several lines: overall, each process with at least minSamples user samples (the others
// summed in one line), and the most common outermost frames of silently cut stacks.
export function describeQuality(q, { minSamples = 20, maxProcesses = 12, examples = true } = {}) {
  const lines = [`overall ${describeGroup(q.overall)}`];
  const shown = q.processes.filter((g) => g.user >= minSamples).slice(0, maxProcesses);
  for (const g of shown) lines.push(`  ${describeGroup(g)}`);
  const rest = q.processes.filter((g) => !shown.includes(g));
  if (rest.length) {
    const sum = rest.reduce((s, g) => s + g.user, 0);
    const silent = rest.reduce((s, g) => s + g.silent, 0);
    lines.push(`  (${rest.length} more processes: ${Math.round(sum)} user samples, ${Math.round(silent)} cut silently)`);
  }
  if (examples && q.overall.silentOutermost.length) {
    lines.push('  cut silently, by outermost frame:');
    for (const s of q.overall.silentOutermost)
      lines.push(`    ${s.name}: ${Math.round(s.weight)} samples, e.g. ${s.example}`);
  }
  return lines.join('\n');
}
