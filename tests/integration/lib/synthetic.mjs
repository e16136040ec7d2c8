// Builds small processed profiles (Firefox Profiler format, version 70) by hand, shaped like
// the ones bpfprof writes. Used by harness.test.mjs to check the harness itself (the
// analysis helpers and the profiler-cli wrapper) without root or a recorder.
import { gzipSync } from 'node:zlib';
import { writeFileSync } from 'node:fs';

const KERNEL = 0;
const USER = 1;
const OTHER = 2;

// threads: [{ pid, tid, name, processName, isMainThread,
//             samples: [{ stack: [[funcName, 'K' | 'U' | 'O'], ...] (root first), cpuNs,
//                         weight (optional: then samples.weight is written, 1 by default) }] }]
// 'O' is the Other category (bpfprof's [truncated] and [waiting for CPU] frames).
export function makeProfile(threads, { intervalMs = 1 } = {}) {
  const stringArray = [];
  const strings = new Map();
  const str = (s) => {
    if (!strings.has(s)) {
      strings.set(s, stringArray.length);
      stringArray.push(s);
    }
    return strings.get(s);
  };
  const funcTable = { name: [], isJS: [], relevantForJS: [], resource: [], source: [], lineNumber: [], columnNumber: [], originalLocation: [], length: 0 };
  const funcs = new Map();
  const frameTable = { address: [], lib: [], inlineDepth: [], category: [], subcategory: [], func: [], nativeSymbol: [], innerWindowID: [], line: [], column: [], originalLocation: [], length: 0 };
  const frames = new Map();
  const stackTable = { frame: [], prefixOffset: [], length: 0 };
  const stacks = new Map();

  const funcIndex = (name) => {
    if (!funcs.has(name)) {
      funcs.set(name, funcTable.length);
      funcTable.name.push(str(name));
      funcTable.isJS.push(false);
      funcTable.relevantForJS.push(false);
      funcTable.resource.push(-1);
      funcTable.source.push(null);
      funcTable.lineNumber.push(null);
      funcTable.columnNumber.push(null);
      funcTable.originalLocation.push(null);
      funcTable.length++;
    }
    return funcs.get(name);
  };
  const frameIndex = (name, kind) => {
    const key = `${kind}:${name}`;
    if (!frames.has(key)) {
      frames.set(key, frameTable.length);
      frameTable.address.push(-1);
      frameTable.lib.push(-1);
      frameTable.inlineDepth.push(0);
      frameTable.category.push({ K: KERNEL, O: OTHER }[kind] ?? USER);
      frameTable.subcategory.push(0);
      frameTable.func.push(funcIndex(name));
      frameTable.nativeSymbol.push(null);
      frameTable.innerWindowID.push(null);
      frameTable.line.push(null);
      frameTable.column.push(null);
      frameTable.originalLocation.push(null);
      frameTable.length++;
    }
    return frames.get(key);
  };
  const stackIndex = (path) => {
    let prefix = null;
    for (const [name, kind] of path) {
      const frame = frameIndex(name, kind);
      const key = `${prefix}:${frame}`;
      if (!stacks.has(key)) {
        const index = stackTable.length;
        stacks.set(key, index);
        stackTable.frame.push(frame);
        stackTable.prefixOffset.push(prefix === null ? 0 : index - prefix);
        stackTable.length++;
      }
      prefix = stacks.get(key);
    }
    return prefix;
  };

  const startTime = Date.now();
  const outThreads = threads.map((t) => {
    const weighted = t.samples.some((s) => s.weight !== undefined);
    const samples = { stack: [], time: [], weight: weighted ? [] : null, weightType: 'samples', threadCPUDelta: [], length: 0 };
    t.samples.forEach((s, i) => {
      samples.stack.push(s.stack.length ? stackIndex(s.stack) : null);
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
  });

  return {
    meta: {
      interval: intervalMs,
      startTime,
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
      profilingEndTime: Math.max(...outThreads.map((t) => t.processShutdownTime)),
    },
    libs: [],
    shared: {
      stringArray,
      stackTable,
      frameTable,
      funcTable,
      resourceTable: { name: [], host: [], type: [], lib: [], length: 0 },
      nativeSymbols: { libIndex: [], address: [], name: [], functionSize: [], length: 0 },
      sources: { id: [], filename: [], startLine: [], startColumn: [], sourceMapURL: [], content: [], length: 0 },
      sourceLocationTable: { source: [], line: [], column: [], length: 0 },
    },
    threads: outThreads,
  };
}

export function writeProfile(path, profile) {
  writeFileSync(path, gzipSync(JSON.stringify(profile)));
}

