// Reading a processed profile (.json.gz) directly and walking its stacks: frames, their
// kernel and user parts, and the symbolization of each frame.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

export function readProfile(file) {
  const bytes = readFileSync(file);
  const text = bytes[0] === 0x1f && bytes[1] === 0x8b ? gunzipSync(bytes).toString('utf8')
                                                     : bytes.toString('utf8');
  return JSON.parse(text);
}

// A view over one processed profile (shared tables, version 70 layout) that turns sample
// stacks into lists of frames.
// The category of a label set's frame (bpf/runtime_list.h's GOLABELS).
export const LABELS_CATEGORY = 'Go labels';

export class ProfileView {
  constructor(profile) {
    this.profile = profile;
    const { shared, meta } = profile;
    assert.ok(shared, 'profile.shared is missing');
    for (const key of ['stringArray', 'stackTable', 'frameTable', 'funcTable'])
      assert.ok(shared[key], `profile.shared.${key} is missing`);
    this.strings = shared.stringArray;
    this.stackTable = shared.stackTable;
    this.frameTable = shared.frameTable;
    this.funcTable = shared.funcTable;
    this.categories = (meta.categories ?? []).map((c) => c.name);
    this.stackCache = new Map();
  }

  get threads() {
    return this.profile.threads;
  }

  categoryIndex(name) {
    return this.categories.indexOf(name);
  }

  funcName(func) {
    return this.strings[this.funcTable.name[func]];
  }

  // [{ func, name, category (name), frame }] from the root to the leaf; [] for a null stack.
  frames(stackIndex) {
    if (stackIndex === null || stackIndex === undefined) return [];
    let cached = this.stackCache.get(stackIndex);
    if (cached) return cached;
    const { frame, prefixOffset, length } = this.stackTable;
    assert.ok(stackIndex >= 0 && stackIndex < length, `stack index ${stackIndex} out of range`);
    const offset = prefixOffset[stackIndex];
    let prefix = [];
    if (offset !== 0) {
      const parent = stackIndex - offset;
      assert.ok(offset > 0 && parent >= 0,
                `stack ${stackIndex}: prefixOffset ${offset} does not point to an earlier stack`);
      prefix = this.frames(parent);
    }
    const f = frame[stackIndex];
    const func = this.frameTable.func[f];
    const category = this.frameTable.category[f];
    cached = [...prefix, {
      frame: f, func, name: this.funcName(func),
      category: category === null || category === undefined ? null : this.categories[category],
      inlineDepth: this.frameTable.inlineDepth ? this.frameTable.inlineDepth[f] : 0,
    }];
    this.stackCache.set(stackIndex, cached);
    return cached;
  }

  // [{ frames, labels, weight, cpuDelta, time }] of one thread. A label set's frame at the root
  // (Go's goroutine labels, "[labels] k=v, ...") is the sample's `labels` (its name), not one of
  // its frames: where a stack begins is what comes after it.
  samples(thread) {
    const s = thread.samples;
    const n = s.length ?? s.stack.length;
    const out = [];
    let time = 0;
    for (let i = 0; i < n; i++) {
      time = s.time ? s.time[i] : time + (s.timeDeltas ? s.timeDeltas[i] : 0);
      let frames = this.frames(s.stack[i]);
      let labels = null;
      if (frames[0]?.category === LABELS_CATEGORY) {
        labels = frames[0].name;
        frames = frames.slice(1);
      }
      out.push({
        frames,
        labels,
        weight: s.weight ? s.weight[i] : 1,
        cpuDelta: s.threadCPUDelta ? s.threadCPUDelta[i] : null,
        time,
      });
    }
    return out;
  }

  // [{ frames, bytes, time }] of a thread's nativeAllocations (record --memory); [] without.
  allocations(thread) {
    const a = thread.nativeAllocations;
    if (!a) return [];
    assert.equal(a.weightType, 'bytes');
    const out = [];
    for (let i = 0; i < a.length; i++)
      out.push({ frames: this.frames(a.stack[i]), bytes: a.weight[i], time: a.time[i],
                 address: a.memoryAddress?.[i], threadId: a.threadId?.[i] });
    return out;
  }

  // [{ call, change, sampledBytes, address, frames, time }] of a thread's address-space markers
  // (record --memory's sampled mmap, munmap, brk and mremap calls).
  addressSpaceChanges(thread) {
    const m = thread.markers;
    const out = [];
    for (let i = 0; i < m.length; i++) {
      const d = m.data[i];
      if (d?.type !== 'bpfprof-address-space') continue;
      out.push({ call: d.call, change: d.change, sampledBytes: d.sampledBytes, address: d.address,
                 frames: this.frames(d.cause?.stack), time: m.startTime[i] });
    }
    return out;
  }

  // Weighted share of a thread's samples for which pred(frames) holds.
  share(thread, pred) {
    return this.weightedShare(this.samples(thread), pred);
  }

  weightedShare(samples, pred) {
    let total = 0;
    let hit = 0;
    for (const s of samples) {
      total += s.weight;
      if (pred(s.frames)) hit += s.weight;
    }
    return { total, hit, share: total ? hit / total : 0 };
  }

  // The same over the samples taken while the thread ran: off-CPU samples weigh their time,
  // and the time a thread waits for the CPU grows with the machine's load.
  onCpuShare(thread, pred) {
    const running = this.samples(thread).filter((s) => !STATE_FRAMES.has(s.frames.at(-1)?.name));
    return this.weightedShare(running, pred);
  }

  // The most common stacks (as 'a > b > c' strings, root first) among samples matching pred.
  topStacks(thread, pred = () => true, limit = 5) {
    const counts = new Map();
    for (const s of this.samples(thread)) {
      if (!pred(s.frames)) continue;
      const key = formatFrames(s.frames);
      counts.set(key, (counts.get(key) ?? 0) + s.weight);
    }
    return [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, limit);
  }

  // Sum of threadCPUDelta, in ns, over all samples (element 0 included: by bpfprof's
  // contract it is the CPU time the thread used before its first sample).
  cpuNs(thread) {
    const deltas = thread.samples.threadCPUDelta;
    assert.ok(Array.isArray(deltas), `thread ${thread.tid} has no samples.threadCPUDelta`);
    const unit = this.profile.meta.sampleUnits?.threadCPUDelta;
    const scale = { ns: 1, 'µs': 1000 }[unit];
    assert.ok(scale, `meta.sampleUnits.threadCPUDelta is '${unit}', want 'ns' (or 'µs')`);
    return deltas.reduce((sum, d) => sum + (d ?? 0), 0) * scale;
  }
}

// 'a > b > [k]c' (root first, [k] marks Kernel frames); runs of one frame are collapsed.
export function formatFrames(frames) {
  if (!frames.length) return '(null stack)';
  const parts = [];
  for (let i = 0; i < frames.length;) {
    let j = i;
    while (j + 1 < frames.length && frames[j + 1].frame === frames[i].frame) j++;
    const f = frames[i];
    const name = f.category === 'Kernel' ? `[k]${f.name}` : f.name;
    parts.push(j > i ? `${name} (x${j - i + 1})` : name);
    i = j + 1;
  }
  return parts.join(' > ');
}

// Index of the first frame from the leaf end that matches name, or -1.
export function lastIndexOfName(frames, name) {
  for (let i = frames.length - 1; i >= 0; i--) if (frames[i].name === name) return i;
  return -1;
}

// True when `chain` (callers first, e.g. ['main', 'outer', 'inner_spin']) appears in frames
// as consecutive frames, all User, with nothing but Kernel frames below its last element.
// Anything may sit above the chain (_start, __libc_start_call_main, start_thread, ...).
export function hasUserChainAtLeaf(frames, chain) {
  const leafName = chain[chain.length - 1];
  const i = lastIndexOfName(frames, leafName);
  if (i < chain.length - 1) return false;
  for (let k = 0; k < chain.length; k++) {
    const f = frames[i - (chain.length - 1) + k];
    if (f.name !== chain[k] || f.category !== 'User') return false;
  }
  // Below it: functions the compiler inlined into it (inline depth > 0, at its address),
  // kernel frames, and for an off-CPU sample a state frame at the leaf.
  const below = frames.slice(i + 1);
  const inlined = below.findIndex((f) => !(f.category === 'User' && f.inlineDepth > 0));
  const rest = inlined < 0 ? [] : below.slice(inlined);
  return rest.every((f, k) => f.category === 'Kernel' || (k === rest.length - 1 && STATE_FRAMES.has(f.name)));
}

// The kernel frames right under the last `fn` frame.
function kernelUnder(frames, fn) {
  const i = lastIndexOfName(frames, fn);
  if (i < 0) return [];
  const below = frames.slice(i + 1);
  const end = below.findIndex((f) => f.category !== 'Kernel');
  return end < 0 ? below : below.slice(0, end);
}

// For a function that makes no system calls, kernel frames under it are an interrupt or
// exception the thread took (how many depends on the host: a busy hypervisor or softirq work
// stretches them) and must start at its entry. Returns { share: of samples with kernel
// frames under `fn`, stray: [[stack, weight]] of those that do not start at an entry }.
export function kernelUnderLeaf(view, thread, fn) {
  const entered = view.share(thread, (f) => kernelUnder(f, fn).length > 0);
  const stray = view.topStacks(thread, (f) => {
    const kernel = kernelUnder(f, fn);
    return kernel.length > 0 && !/^asm_(sysvec_|common_interrupt|exc_)/.test(kernel[0].name);
  }, 3);
  return { share: entered.share, stray };
}

export const STATE_FRAMES = new Set(['[sleeping]', '[I/O wait]', '[waiting for CPU]']);

// Checks the kernel/user layout of one stack: some User frames from the root, then
// Kernel frames to the leaf, never a User frame below a Kernel one.
// Returns { kernel: number of Kernel frames, ordered: bool, user: the User frames }.
export function splitUserKernel(allFrames) {
  // An off-CPU sample ends in a state pseudo-frame ([sleeping], [I/O wait], [waiting for CPU]).
  // A user stack the unwinder could not complete starts with a [truncated] pseudo-frame.
  const start = allFrames.length && allFrames[0].name === '[truncated]' ? 1 : 0;
  const frames = allFrames.length && STATE_FRAMES.has(allFrames[allFrames.length - 1].name)
    ? allFrames.slice(start, -1) : allFrames.slice(start);
  const firstKernel = frames.findIndex((f) => f.category === 'Kernel');
  if (firstKernel < 0) return { kernel: 0, ordered: true, user: frames };
  const below = frames.slice(firstKernel);
  const ordered = firstKernel > 0 && below.every((f) => f.category === 'Kernel') &&
                  frames.slice(0, firstKernel).every((f) => f.category === 'User');
  return { kernel: below.length, ordered, user: frames.slice(0, firstKernel) };
}

// Threads of the profile whose tid is `tid` (tids may be numbers or strings in the file).
export function threadsByTid(profile, tid) {
  return profile.threads.filter((t) => String(t.tid) === String(tid));
}

export function pct(x) {
  return `${(100 * x).toFixed(1)}%`;
}

// ---------------------------------------------------------------------------------------
// Symbolization details of frames (symbols.test.mjs): inline depth, source line and file,
// library. An inlined function is an extra frame with frameTable.inlineDepth 1, 2, ... that
// shares frameTable.address with the depth-0 frame of the real function around it.

// The source file path of a function (funcTable.source -> shared.sources.filename ->
// stringArray), or null.
export function funcSourceFile(view, func) {
  const source = view.funcTable.source?.[func];
  if (source === null || source === undefined) return null;
  const sources = view.profile.shared.sources;
  const name = sources?.filename?.[source];
  return name === null || name === undefined ? null : view.strings[name];
}

// The summed weight of the samples `pred` accepts.
export const weightOf = (samples, pred = () => true) =>
  samples.filter(pred).reduce((sum, s) => sum + s.weight, 0);

// Whether `chain` (names, root first) appears as consecutive frames of `names`.
export function hasConsecutive(names, chain) {
  for (let i = 0; i + chain.length <= names.length; i++)
    if (chain.every((n, k) => names[i + k] === n)) return true;
  return false;
}

// Whether each of `chain` appears after the one before it (other frames may sit between).
export function inOrder(names, chain) {
  let at = -1;
  for (const name of chain) {
    at = names.indexOf(name, at + 1);
    if (at < 0) return false;
  }
  return true;
}

// The profile.libs entry of a frame, or null (no lib).
export function frameLib(view, frame) {
  const lib = view.frameTable.lib?.[frame];
  return lib === null || lib === undefined || lib < 0 ? null : view.profile.libs[lib] ?? null;
}

// One frame of view.frames() with its symbolization: { ...frame, inlineDepth, line,
// address, file, lib } (lib: the profile.libs entry or null).
export function frameDetails(view, f) {
  const ft = view.frameTable;
  return {
    ...f,
    inlineDepth: ft.inlineDepth?.[f.frame] ?? 0,
    line: ft.line?.[f.frame] ?? null,
    address: ft.address?.[f.frame] ?? null,
    file: funcSourceFile(view, f.func),
    lib: frameLib(view, f.frame),
  };
}

// Like formatFrames, each frame with its inline depth (when not 0) and line:
// 'main:31 > hot_loop:31 > helper[i1]:17'.
export function formatDetailedFrames(view, frames) {
  if (!frames.length) return '(null stack)';
  return frames.map((f) => {
    const d = f.inlineDepth === undefined ? frameDetails(view, f) : f;
    const name = d.category === 'Kernel' ? `[k]${d.name}` : d.name;
    return `${name}${d.inlineDepth ? `[i${d.inlineDepth}]` : ''}${d.line !== null ? `:${d.line}` : ''}`;
  }).join(' > ');
}

// The most common stacks of a thread, with inline depths and lines, among samples matching
// pred(frames): [[formatted, weight], ...].
export function topDetailedStacks(view, thread, pred = () => true, limit = 5) {
  const counts = new Map();
  for (const s of view.samples(thread)) {
    if (!pred(s.frames)) continue;
    const key = formatDetailedFrames(view, s.frames);
    counts.set(key, (counts.get(key) ?? 0) + s.weight);
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, limit);
}
