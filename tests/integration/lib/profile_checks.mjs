// Checks of a recorded profile on the file as written: CPU time against what the fixture
// measured itself, and the structure the Firefox Profiler's loader does not validate.
import assert from 'node:assert/strict';

import { pct, threadsByTid } from './profile_view.mjs';

// CPU time: the profile's threadCPUDelta against what each fixture thread measured itself.

export const CPU_TOLERANCE = 0.10;
export const CPU_MIN_NS = 200e6;

// For each cputime line with at least 200 ms of CPU: the thread with that tid in the profile
// must exist and its threadCPUDelta must add up to within 10% of the line's ns.
// Returns [{ tid, name, fixtureNs, profileNs, ratio }] and asserts.
export function checkCpuAgainstFixture(t, view, cputimes) {
  const rows = [];
  const failures = [];
  for (const c of cputimes) {
    const matches = threadsByTid(view.profile, c.tid);
    if (c.ns < CPU_MIN_NS) {
      t.diagnostic(`cpu: tid ${c.tid} (${c.name}) used ${(c.ns / 1e6).toFixed(1)} ms < 200 ms, not compared`);
      continue;
    }
    if (matches.length === 0) {
      failures.push(`no thread with tid ${c.tid} (${c.name}) in the profile`);
      continue;
    }
    const profileNs = matches.reduce((sum, th) => sum + view.cpuNs(th), 0);
    const ratio = profileNs / c.ns;
    const row = { tid: c.tid, name: c.name, fixtureNs: c.ns, profileNs, ratio, threads: matches.length };
    rows.push(row);
    const first = matches[0].samples.threadCPUDelta?.[0];
    t.diagnostic(`cpu: tid ${c.tid} (${c.name}): fixture ${(c.ns / 1e6).toFixed(1)} ms, ` +
                 `profile sum(threadCPUDelta) ${(profileNs / 1e6).toFixed(1)} ms ` +
                 `(element 0: ${first === undefined ? '-' : (first / 1e6).toFixed(1)} ms) = ` +
                 `${pct(ratio)} of the fixture's` +
                 (matches.length > 1 ? ` [summed over ${matches.length} threads with that tid]` : ''));
    if (Math.abs(ratio - 1) > CPU_TOLERANCE)
      failures.push(`tid ${c.tid} (${c.name}): profile ${(profileNs / 1e6).toFixed(1)} ms vs ` +
                    `fixture ${(c.ns / 1e6).toFixed(1)} ms (${pct(ratio)}, allowed 90%-110%)`);
  }
  assert.ok(rows.length > 0 || failures.length > 0, 'no fixture thread used >= 200 ms of CPU');
  assert.deepEqual(failures, [], `CPU time disagrees:\n  ${failures.join('\n  ')}`);
  return rows;
}

// Structure: what the Firefox Profiler's loader does not validate itself (see
// shared/docs/processed-profile.md), checked on the file as written.

export function checkProfileStructure(view) {
  const { profile } = view;
  const { meta, shared } = profile;
  const problems = [];
  const check = (ok, msg) => { if (!ok) problems.push(msg); };

  check(meta.preprocessedProfileVersion === 70, `meta.preprocessedProfileVersion is ${meta.preprocessedProfileVersion}, want 70`);
  check(meta.version === 36, `meta.version is ${meta.version}, want 36`);
  check(meta.sampleUnits?.threadCPUDelta === 'ns', `meta.sampleUnits.threadCPUDelta is ${meta.sampleUnits?.threadCPUDelta}, want 'ns'`);
  check(typeof meta.interval === 'number' && meta.interval > 0, `meta.interval ${meta.interval}`);
  check(typeof meta.startTime === 'number', 'meta.startTime is not a number');
  check(view.categoryIndex('Kernel') >= 0 && view.categoryIndex('User') >= 0,
        `meta.categories ${JSON.stringify(view.categories)} lack Kernel or User`);
  check((meta.categories ?? []).some((c) => c.color === 'grey'), 'no grey category');

  const tableLength = (name, table, columns) => {
    check(Number.isInteger(table?.length), `${name}.length missing`);
    for (const c of columns)
      check(Array.isArray(table?.[c]) && table[c].length === table.length,
            `${name}.${c} is not an array of ${name}.length (${table?.length})`);
  };
  tableLength('stackTable', shared.stackTable, ['frame', 'prefixOffset']);
  tableLength('frameTable', shared.frameTable, ['address', 'lib', 'inlineDepth', 'category', 'subcategory', 'func', 'nativeSymbol', 'innerWindowID', 'line', 'column', 'originalLocation']);
  tableLength('funcTable', shared.funcTable, ['name', 'isJS', 'relevantForJS', 'resource', 'source', 'lineNumber', 'columnNumber', 'originalLocation']);
  for (const key of ['resourceTable', 'nativeSymbols', 'sources', 'sourceLocationTable'])
    check(shared[key] && Number.isInteger(shared[key].length), `shared.${key} missing`);

  const { stackTable, frameTable, funcTable, stringArray } = shared;
  for (let i = 0; i < stackTable.length; i++) {
    const off = stackTable.prefixOffset[i];
    if (!(Number.isInteger(off) && off >= 0 && off <= i)) { check(false, `stackTable.prefixOffset[${i}] = ${off}`); break; }
    const f = stackTable.frame[i];
    if (!(f >= 0 && f < frameTable.length)) { check(false, `stackTable.frame[${i}] = ${f}`); break; }
  }
  for (let i = 0; i < frameTable.length; i++) {
    const fn = frameTable.func[i];
    const cat = frameTable.category[i];
    if (!(fn >= 0 && fn < funcTable.length)) { check(false, `frameTable.func[${i}] = ${fn}`); break; }
    if (!(cat === null || (cat >= 0 && cat < view.categories.length))) { check(false, `frameTable.category[${i}] = ${cat}`); break; }
    const lib = frameTable.lib[i];
    if (!(lib === -1 || lib === null || (lib >= 0 && lib < profile.libs.length))) { check(false, `frameTable.lib[${i}] = ${lib}`); break; }
  }
  for (let i = 0; i < funcTable.length; i++) {
    const n = funcTable.name[i];
    if (!(n >= 0 && n < stringArray.length)) { check(false, `funcTable.name[${i}] = ${n}`); break; }
  }

  check(Array.isArray(profile.threads) && profile.threads.length > 0, 'no threads');
  for (const [i, th] of profile.threads.entries()) {
    const where = `threads[${i}] (${th.name})`;
    check(typeof th.pid === 'string', `${where}.pid is ${typeof th.pid}, want a string`);
    check(th.tid !== undefined && th.tid !== null, `${where}.tid missing`);
    check(typeof th.name === 'string' && th.name.length > 0, `${where}.name missing`);
    check(typeof th.processName === 'string', `${where}.processName missing`);
    check(typeof th.isMainThread === 'boolean', `${where}.isMainThread is not a boolean`);
    const s = th.samples;
    check(s && Number.isInteger(s.length), `${where}.samples.length missing`);
    if (!s) continue;
    for (const c of ['stack', 'threadCPUDelta'])
      check(Array.isArray(s[c]) && s[c].length === s.length, `${where}.samples.${c} is not an array of samples.length`);
    check((Array.isArray(s.time) && s.time.length === s.length) ||
          (Array.isArray(s.timeDeltas) && s.timeDeltas.length === s.length), `${where}.samples.time missing`);
    check(s.weight === null || (Array.isArray(s.weight) && s.weight.length === s.length), `${where}.samples.weight`);
    if (Array.isArray(s.stack))
      check(s.stack.every((x) => x === null || (x >= 0 && x < stackTable.length)), `${where}: a sample stack is out of range`);
    if (Array.isArray(s.time))
      check(s.time.every((x, k) => k === 0 || x >= s.time[k - 1]), `${where}: sample times go backwards`);
    if (Array.isArray(s.threadCPUDelta))
      check(s.threadCPUDelta.every((x) => x === null || (Number.isFinite(x) && x >= 0)), `${where}: a threadCPUDelta is negative or not a number`);
    check(th.markers && Number.isInteger(th.markers.length), `${where}.markers missing`);
  }
  assert.deepEqual(problems, [], `profile structure:\n  ${problems.join('\n  ')}`);
  // Not wrong, but worth a note: the same pid/tid in several threads (e.g. split at exec).
  const warnings = [];
  const keys = profile.threads.map((th) => `${th.pid}/${th.tid}`);
  if (new Set(keys).size !== keys.length) warnings.push(`several threads share a pid/tid: ${keys.join(', ')}`);
  return warnings;
}
