// Builds small processed profiles (Firefox Profiler format, version 70) by hand, shaped like
// the ones bpfprof writes. Used by harness.test.mjs to check the harness itself (the
// analysis helpers and the profiler-cli wrapper) without root or a recorder.
import { gzipSync } from 'node:zlib';
import { writeFileSync } from 'node:fs';

const KERNEL = 0;
const USER = 1;
const OTHER = 2;

// The shared tables of a profile, each string, function, frame and stack added once.
class SharedTables {
  constructor() {
    this.stringArray = [];
    this.strings = new Map();
    this.funcTable = { name: [], isJS: [], relevantForJS: [], resource: [], source: [], lineNumber: [], columnNumber: [], originalLocation: [], length: 0 };
    this.funcs = new Map();
    this.frameTable = { address: [], lib: [], inlineDepth: [], category: [], subcategory: [], func: [], nativeSymbol: [], innerWindowID: [], line: [], column: [], originalLocation: [], length: 0 };
    this.frames = new Map();
    this.stackTable = { frame: [], prefixOffset: [], length: 0 };
    this.stacks = new Map();
  }

  str(s) {
    if (!this.strings.has(s)) {
      this.strings.set(s, this.stringArray.length);
      this.stringArray.push(s);
    }
    return this.strings.get(s);
  }

  funcIndex(name) {
    const t = this.funcTable;
    if (!this.funcs.has(name)) {
      this.funcs.set(name, t.length);
      t.name.push(this.str(name));
      t.isJS.push(false);
      t.relevantForJS.push(false);
      t.resource.push(-1);
      for (const column of [t.source, t.lineNumber, t.columnNumber, t.originalLocation]) column.push(null);
      t.length++;
    }
    return this.funcs.get(name);
  }

  frameIndex(name, kind) {
    const t = this.frameTable;
    const key = `${kind}:${name}`;
    if (!this.frames.has(key)) {
      this.frames.set(key, t.length);
      t.address.push(-1);
      t.lib.push(-1);
      t.inlineDepth.push(0);
      t.category.push({ K: KERNEL, O: OTHER }[kind] ?? USER);
      t.subcategory.push(0);
      t.func.push(this.funcIndex(name));
      for (const column of [t.nativeSymbol, t.innerWindowID, t.line, t.column, t.originalLocation]) column.push(null);
      t.length++;
    }
    return this.frames.get(key);
  }

  stackIndex(path) {
    const t = this.stackTable;
    let prefix = null;
    for (const [name, kind] of path) {
      const frame = this.frameIndex(name, kind);
      const key = `${prefix}:${frame}`;
      if (!this.stacks.has(key)) {
        const index = t.length;
        this.stacks.set(key, index);
        t.frame.push(frame);
        t.prefixOffset.push(prefix === null ? 0 : index - prefix);
        t.length++;
      }
      prefix = this.stacks.get(key);
    }
    return prefix;
  }

  toJSON() {
    return {
      stringArray: this.stringArray,
      stackTable: this.stackTable,
      frameTable: this.frameTable,
      funcTable: this.funcTable,
      resourceTable: { name: [], host: [], type: [], lib: [], length: 0 },
      nativeSymbols: { libIndex: [], address: [], name: [], functionSize: [], length: 0 },
      sources: { id: [], filename: [], startLine: [], startColumn: [], sourceMapURL: [], content: [], length: 0 },
      sourceLocationTable: { source: [], line: [], column: [], length: 0 },
    };
  }
}

function makeThread(t, intervalMs, tables) {
  const weighted = t.samples.some((s) => s.weight !== undefined);
  const samples = { stack: [], time: [], weight: weighted ? [] : null, weightType: 'samples', threadCPUDelta: [], length: 0 };
  t.samples.forEach((s, i) => {
    samples.stack.push(s.stack.length ? tables.stackIndex(s.stack) : null);
    if (weighted) samples.weight.push(s.weight ?? 1);
    samples.time.push(i * intervalMs);
    samples.threadCPUDelta.push(s.cpuNs);
    samples.length++;
  });
  const end = t.samples.length * intervalMs;
  return {
    processType: 'default',
    processStartupTime: 0,
    processShutdownTime: end,
    registerTime: 0,
    unregisterTime: end,
    pausedRanges: [],
    name: t.name,
    isMainThread: t.isMainThread,
    pid: String(t.pid),
    tid: t.tid,
    processName: t.processName,
    samples,
    markers: { data: [], name: [], startTime: [], endTime: [], phase: [], category: [], length: 0 },
  };
}

function makeMeta(intervalMs, endTime) {
  return {
    interval: intervalMs,
    startTime: Date.now(),
    processType: 0,
    product: 'bpfprof (synthetic)',
    stackwalk: 1,
    version: 36,
    preprocessedProfileVersion: 70,
    markerSchema: [],
    categories: [
      { name: 'Kernel', color: 'orange', subcategories: ['Other'] },
      { name: 'User', color: 'yellow', subcategories: ['Other'] },
      { name: 'Other', color: 'grey', subcategories: ['Other'] },
    ],
    sampleUnits: { time: 'ms', eventDelay: 'ms', threadCPUDelta: 'ns' },
    symbolicated: true,
    platform: 'Linux',
    profilingStartTime: 0,
    profilingEndTime: endTime,
  };
}

// threads: [{ pid, tid, name, processName, isMainThread,
//             samples: [{ stack: [[funcName, 'K' | 'U' | 'O'], ...] (root first), cpuNs,
//                         weight (optional: then samples.weight is written, 1 by default) }] }]
// 'O' is the Other category (bpfprof's [truncated] and [waiting for CPU] frames).
export function makeProfile(threads, { intervalMs = 1 } = {}) {
  const tables = new SharedTables();
  const outThreads = threads.map((t) => makeThread(t, intervalMs, tables));
  const endTime = Math.max(...outThreads.map((t) => t.processShutdownTime));
  return { meta: makeMeta(intervalMs, endTime), libs: [], shared: tables.toJSON(), threads: outThreads };
}

export function writeProfile(path, profile) {
  writeFileSync(path, gzipSync(JSON.stringify(profile)));
}

