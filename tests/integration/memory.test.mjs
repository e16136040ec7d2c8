// memory: `record --memory` gives each process a memory track (the processed format's counter of
// category Memory) from the kernel's own resident-memory counters. tests/fixtures/memory_grow
// grows to 240 MB, frees it, and holds 80 MB to the end, then prints the kernel's VmHWM and
// VmRSS: the track must peak where the kernel says, fall where the program freed, and end where
// it ended; the summary says the peak; -p gives an attached process its level from the start;
// the real front end's loader (profiler-cli) takes the profile; without --memory there is none.
// Where memory grows: the threads' nativeAllocations (page faults, one in 64 sampled with its
// stack) put the 320 MB memory_grow touches under touch_block, called from
// grow_heap, as the summary and go tool pprof's alloc_space say too; -p and -a find it too.
// --allocations: alloc_leak's leak is the memory still held at the end, under leak_one, in the
// front end's retained memory, the summary and pprof's inuse_space.
// Where the address space grows: memory_grow's mmaps, munmaps and brks as markers with their
// stacks, in the summary and in pprof's mapped_space; memory_edges' sparse 1 TiB reservation and
// its children that exit while they are read leave the recorder bounded and the growth whole,
// with tracefs mounted or not.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { goAvailable, parseTop, pprof } from './lib/go_pprof.mjs';
import {
  BPFPROF, ProfileView, RESULTS_DIR, checkWithProfilerCli, fixturePath, readProfile, recordFixture,
  requireRecorder, run, saveMetrics, sleep, startBackground,
} from './lib/harness.mjs';
import { inOrder } from './lib/profile_view.mjs';

const MB = 1e6;

// The memory counter of a process (by OS pid) and its absolute values over time (the counter's
// samples are changes since the previous one).
function memorySeries(profile, pid) {
  const counter = (profile.counters ?? []).find((c) => c.category === 'Memory' && String(c.pid).split('.')[0] === String(pid));
  if (!counter) return null;
  const { time, count, length } = counter.samples;
  let level = 0;
  const points = [];
  for (let i = 0; i < length; i++) {
    level += count[i];
    points.push({ ms: time[i], bytes: level });
  }
  return { counter, points };
}

const fixturePid = (profile) => profile.threads.find((t) => t.processName === 'memory_grow')?.pid.split('.')[0];

function kernelFigures(stdout) {
  const m = /memory hwm_kb=(\d+) rss_kb=(\d+)/.exec(stdout);
  assert.ok(m, `memory_grow printed no memory line:\n${stdout}`);
  return { hwm: Number(m[1]) * 1024, rss: Number(m[2]) * 1024 };
}

// memory_grow's blocks: 30 + 10 of 8 MiB, each touched page by page in touch_block.
const TOUCHED = 40 * 8 * 1024 * 1024;

function checkGrowth(t, rec) {
  const view = new ProfileView(rec.profile);
  const pid = fixturePid(rec.profile);
  const rows = view.threads.filter((th) => th.pid.split('.')[0] === pid).flatMap((th) => view.allocations(th));
  const total = rows.reduce((sum, r) => sum + r.bytes, 0);
  const names = (r) => r.frames.map((f) => f.name);
  const inTouch = rows.filter((r) => names(r).at(-1) === 'touch_block');
  const nested = inTouch.filter((r) => inOrder(names(r), ['main', 'grow_heap', 'touch_block']));
  const touchBytes = inTouch.reduce((sum, r) => sum + r.bytes, 0);
  const nestedBytes = nested.reduce((sum, r) => sum + r.bytes, 0);
  const metrics = { rows: rows.length, totalMB: total / MB, touchBlockMB: touchBytes / MB, touchedMB: TOUCHED / MB };
  saveMetrics('memory_growth', metrics);
  t.diagnostic(`nativeAllocations: ${rows.length} rows, ${metrics.totalMB.toFixed(1)} MB; touch_block innermost ` +
               `${metrics.touchBlockMB.toFixed(1)} MB (it touched ${metrics.touchedMB.toFixed(1)} MB), ` +
               `${(100 * nestedBytes / (touchBytes || 1)).toFixed(1)}% of it under main > grow_heap`);
  assert.ok(rows.every((r) => r.bytes > 0 && r.frames.length > 0), 'a row without bytes or stack');
  // One fault in 64 sampled: some 1,300 samples, within 10% of what it touched.
  assert.ok(Math.abs(touchBytes - TOUCHED) <= 0.1 * TOUCHED,
            `touch_block: ${metrics.touchBlockMB} MB against the ${metrics.touchedMB} MB it touched`);
  assert.ok(touchBytes >= 0.95 * total, `touch_block has ${(100 * touchBytes / total).toFixed(1)}% of the bytes`);
  assert.ok(nestedBytes >= 0.99 * touchBytes, 'touch_block not under main > grow_heap');
  const line = rec.result.stderr.split('\n').find((l) => l.includes('memory brought in'));
  assert.ok(line && /most at touch_block < grow_heap < main \d+\.\d MB/.test(line), `summary: ${line}`);
}

// memory_grow's address space: its 30 blocks of 8 MiB are malloc's own mappings (mmap, then
// munmap in free_heap); the 10 it keeps come from the heap (brk), malloc's threshold having
// risen past 8 MiB when the first were freed. Each call is sampled by bytes (one per MiB on
// average): a call of 8 MiB all but always, standing for its size.
const BLOCK_MAPPING = 8 * 1024 * 1024 + 4096;

function checkAddressSpace(t, rec) {
  const view = new ProfileView(rec.profile);
  const pid = fixturePid(rec.profile);
  const changes = view.threads.filter((th) => th.pid.split('.')[0] === pid).flatMap((th) => view.addressSpaceChanges(th));
  // glibc's malloc and free as its symbols name them (__GI___libc_malloc).
  const names = (c) => c.frames.map((f) => f.name.replace(/^__GI___libc_/, ''));
  const sum = (list) => list.reduce((s, c) => s + c.sampledBytes, 0);
  const blocks = changes.filter((c) => c.call === 'mmap' && c.change === BLOCK_MAPPING);
  const blocksUnderGrow = blocks.filter((c) => inOrder(names(c), ['main', 'grow_heap', 'malloc']));
  const unmapped = changes.filter((c) => c.call === 'munmap' && inOrder(names(c), ['main', 'free_heap', 'free']));
  const heap = changes.filter((c) => c.call === 'brk' && c.change > 0 && inOrder(names(c), ['main', 'grow_heap', 'malloc']));
  const metrics = {
    markers: changes.length, blockMmaps: blocks.length, underGrowHeap: blocksUnderGrow.length,
    unmappedMB: -sum(unmapped) / MB, heapGrownMB: sum(heap) / MB,
  };
  saveMetrics('memory_address_space', metrics);
  t.diagnostic(`address-space markers: ${changes.length}; ${blocks.length} mmaps of a block (` +
               `${blocksUnderGrow.length} under main > grow_heap > malloc), munmap under free_heap ` +
               `${metrics.unmappedMB.toFixed(1)} MB, brk under grow_heap ${metrics.heapGrownMB.toFixed(1)} MB`);
  assert.ok(changes.every((c) => c.frames.length > 0 && c.sampledBytes !== 0 && Math.sign(c.change) === Math.sign(c.sampledBytes)),
            'an address-space marker without a stack, or with a sign that disagrees');
  // P(an 8 MiB call unsampled) = e^-8: all 30, or 29 at worst.
  assert.ok(blocks.length >= 29 && blocks.length <= 30, `${blocks.length} block mmaps sampled`);
  assert.equal(blocksUnderGrow.length, blocks.length, 'a block\'s mmap not under main > grow_heap > malloc');
  const freed = 30 * BLOCK_MAPPING;
  assert.ok(Math.abs(-sum(unmapped) - freed) <= 0.05 * freed, `munmap under free_heap: ${metrics.unmappedMB} MB`);
  const kept = 10 * 8 * 1024 * 1024;
  assert.ok(Math.abs(sum(heap) - kept) <= 0.1 * kept, `brk under grow_heap: ${metrics.heapGrownMB} MB`);
  const line = rec.result.stderr.split('\n').find((l) => l.includes('address space ('));
  assert.ok(line && /grew \d+\.\d MB, shrank \d+\.\d MB \(\d+ calls sampled\); most at grow_heap < main/.test(line),
            `summary: ${line}`);
}

describe('record --memory', () => {
  it('draws each process\'s resident memory, peaking where the kernel says', async (t) => {
    if (!requireRecorder(t)) return;
    const rec = await recordFixture('memory_grow', 1500, { recordArgs: ['--memory'] });
    const kernel = kernelFigures(rec.result.stdout);
    const series = memorySeries(rec.profile, fixturePid(rec.profile));
    assert.ok(series, 'no memory counter for memory_grow');
    assert.equal(series.counter.display?.label, 'Memory');
    const { points } = series;
    const peak = points.reduce((a, b) => (b.bytes > a.bytes ? b : a));
    const afterPeak = points.filter((p) => p.ms > peak.ms);
    const low = afterPeak.reduce((a, b) => (b.bytes < a.bytes ? b : a), peak);
    const last = points.at(-1);
    const metrics = {
      samples: points.length, peakMB: peak.bytes / MB, hwmMB: kernel.hwm / MB, lowAfterPeakMB: low.bytes / MB,
      lastMB: last.bytes / MB, rssMB: kernel.rss / MB,
    };
    t.diagnostic(`${points.length} memory samples; peak ${metrics.peakMB.toFixed(1)} MB at ${peak.ms.toFixed(0)} ms ` +
                 `(VmHWM ${metrics.hwmMB.toFixed(1)} MB), then down to ${metrics.lowAfterPeakMB.toFixed(1)} MB, ` +
                 `last ${metrics.lastMB.toFixed(1)} MB (VmRSS ${metrics.rssMB.toFixed(1)} MB)`);
    saveMetrics('memory', metrics);
    // Within a step of the kernel's counters (256 KB) and their per-CPU batching.
    assert.ok(Math.abs(peak.bytes - kernel.hwm) <= Math.max(2 * MB, 0.01 * kernel.hwm),
              `peak ${metrics.peakMB} MB against VmHWM ${metrics.hwmMB} MB`);
    assert.ok(peak.bytes - low.bytes >= 200 * MB, `fell by only ${(peak.bytes - low.bytes) / MB} MB after the peak`);
    assert.ok(Math.abs(last.bytes - kernel.rss) <= 4 * MB, `last ${metrics.lastMB} MB against VmRSS ${metrics.rssMB} MB`);
    // In time order, within the recording.
    assert.ok(points.every((p, i) => i === 0 || p.ms >= points[i - 1].ms), 'samples out of time order');
    const line = rec.result.stderr.split('\n').find((l) => l.includes('peak resident memory:'));
    assert.ok(line && /memory_grow \(\d+\) \d+\.\d MB at/.test(line), `summary: ${line}`);
    await checkWithProfilerCli(t, rec.file, new ProfileView(rec.profile));
    checkGrowth(t, rec);
    checkAddressSpace(t, rec);
  });

  it('writes the memory touched as pprof\'s alloc_space, for go tool pprof', async (t) => {
    if (!requireRecorder(t) || !goAvailable(t)) return;
    const file = join(RESULTS_DIR, 'memory.pb.gz');
    const result = await run(BPFPROF, ['record', '--memory', '--format', 'pprof', '-o', file, '--',
                                       fixturePath('memory_grow'), '800']);
    assert.equal(result.code, 0, result.stderr);
    const top = parseTop(pprof(['-top', '-sample_index=alloc_space', '-unit=B'], file));
    const touch = parseFloat(top.get('touch_block')?.flat ?? '0');
    t.diagnostic(`go tool pprof -sample_index=alloc_space: touch_block ${touch} bytes flat`);
    assert.ok(Math.abs(touch - TOUCHED) <= 0.1 * TOUCHED, `touch_block ${touch} B in alloc_space:\n${[...top]}`);
    // The address space grown under grow_heap: its 30 mappings and 10 blocks from the heap.
    const mapped = parseTop(pprof(['-top', '-sample_index=mapped_space', '-unit=B'], file));
    const grown = parseFloat(mapped.get('grow_heap')?.cum ?? '0');
    const expected = 30 * BLOCK_MAPPING + 10 * 8 * 1024 * 1024;
    t.diagnostic(`go tool pprof -sample_index=mapped_space: grow_heap ${grown} bytes cumulative`);
    assert.ok(Math.abs(grown - expected) <= 0.1 * expected, `grow_heap ${grown} B in mapped_space:\n${[...mapped]}`);
  });

  it('gives a process attached with -p its level from the start', async (t) => {
    if (!requireRecorder(t)) return;
    // memory_grow 8000 grows 240 MB over its first 3.2 s: attached at 1 s, it holds 75 MB or
    // more and keeps growing, however long the attach takes on a busy machine.
    const target = startBackground(fixturePath('memory_grow'), ['8000']);
    await sleep(1000);
    const file = join(RESULTS_DIR, 'memory_attach.json.gz');
    const result = await run(BPFPROF, ['record', '--memory', '-p', String(target.pid), '-d', '1', '-o', file]);
    target.child.kill('SIGKILL');
    await target.done;
    assert.equal(result.code, 0, result.stderr);
    const series = memorySeries(readProfile(file), target.pid);
    assert.ok(series, 'no memory counter for the attached process');
    const first = series.points[0];
    const peak = Math.max(...series.points.map((p) => p.bytes));
    t.diagnostic(`${series.points.length} samples; first ${(first.bytes / MB).toFixed(1)} MB at ${first.ms.toFixed(0)} ms, ` +
                 `peak ${(peak / MB).toFixed(1)} MB`);
    assert.ok(first.bytes >= 70 * MB && first.ms < 100, 'the attached process\'s level is not there from the start');
    assert.ok(peak >= first.bytes + 8 * MB, `its growth while recorded is not on the track: peak ${peak / MB} MB`);
  });

  // memory_grow 8000 grows 240 MB over its first 3.2 s, frees it, sleeps to 4.0 s, then grows
  // its 80 MB (10 blocks) by 4.8 s: attached at 3.3 s, the recording sees those 10 blocks
  // touched, with 700 ms for the attach to start sampling and 1 s to spare at the end.
  for (const [how, args] of [['-p', (pid) => ['-p', String(pid)]], ['-a', () => ['-a']]]) {
    it(`attributes an attached process's growth to its stack with ${how}`, async (t) => {
      if (!requireRecorder(t)) return;
      const target = startBackground(fixturePath('memory_grow'), ['8000']);
      await sleep(3300);
      const file = join(RESULTS_DIR, `memory_growth${how}.json.gz`);
      const result = await run(BPFPROF, ['record', '--memory', ...args(target.pid), '-d', '2.5', '-o', file]);
      target.child.kill('SIGKILL');
      await target.done;
      assert.equal(result.code, 0, result.stderr);
      const view = new ProfileView(readProfile(file));
      const rows = view.threads.filter((th) => th.pid.split('.')[0] === String(target.pid))
        .flatMap((th) => view.allocations(th));
      const names = (r) => r.frames.map((f) => f.name);
      const sum = (list) => list.reduce((total, r) => total + r.bytes, 0);
      const touch = rows.filter((r) => inOrder(names(r), ['main', 'grow_heap', 'touch_block']));
      const kept = 10 * 8 * 1024 * 1024;
      t.diagnostic(`${how}: ${rows.length} rows, ${(sum(rows) / MB).toFixed(1)} MB; main > grow_heap > ` +
                   `touch_block ${(sum(touch) / MB).toFixed(1)} MB (it touched ${(kept / MB).toFixed(1)} MB)`);
      assert.ok(Math.abs(sum(touch) - kept) <= 0.1 * kept, `touch_block ${sum(touch) / MB} MB`);
      assert.ok(sum(touch) >= 0.95 * sum(rows), `touch_block has ${sum(touch)} of ${sum(rows)} bytes`);
      // The heap it grew for those blocks (brk, malloc's threshold having risen at 3.2 s).
      const heap = view.threads.filter((th) => th.pid.split('.')[0] === String(target.pid))
        .flatMap((th) => view.addressSpaceChanges(th))
        .filter((c) => c.call === 'brk' && c.frames.some((f) => f.name === 'grow_heap'));
      const heapBytes = heap.reduce((total, c) => total + c.sampledBytes, 0);
      t.diagnostic(`${how}: brk under grow_heap ${(heapBytes / MB).toFixed(1)} MB in ${heap.length} calls`);
      assert.ok(Math.abs(heapBytes - kept) <= 0.1 * kept, `brk under grow_heap: ${heapBytes / MB} MB`);
    });
  }

  // alloc_leak leaks 48 blocks of 1 MiB from leak_one, holds 32 MiB in keep_then_free for half
  // its run, and churns blocks of 1-64 KiB; one call sampled per 64 KiB samples every 1 MiB
  // block (chance 1 - e^-16).
  it('--allocations: the blocks still held at the end are the leak, where it was allocated', async (t) => {
    if (!requireRecorder(t)) return;
    const rec = await recordFixture('alloc_leak', 1500,
                                    { recordArgs: ['--allocations', '--allocation-interval', '65536'] });
    const leaked = Number(/leaked bytes=(\d+)/.exec(rec.result.stdout)?.[1]);
    const aligned = Number(/ aligned=(\d+)/.exec(rec.result.stdout)?.[1]);
    const view = new ProfileView(rec.profile);
    const pid = rec.profile.threads.find((th) => th.processName === 'alloc_leak')?.pid;
    const tables = view.threads.filter((th) => th.pid === pid).map((th) => ({ th, rows: view.allocations(th) }));
    const rows = tables.flatMap((table) => table.rows);
    assert.ok(rows.length > 100 && rows.every((r) => r.address > 0 && r.threadId > 0), 'rows without blocks');
    // Retained memory as the front end finds it: within each thread's table, in its order, a free
    // ends the last block allocated at its address. keep_then_free's blocks are allocated on the
    // keeper thread and freed by main: their frees must be in the keeper's table, by main.
    const held = [];
    for (const { rows: tableRows } of tables) {
      const live = new Map();
      for (const r of tableRows) (r.bytes > 0 ? live.set(r.address, r) : live.delete(r.address));
      held.push(...live.values());
    }
    const keeper = tables.find((table) => table.th.name === 'keeper');
    const mainTid = tables.find((table) => table.th.isMainThread)?.th.tid;
    const keeperFrees = keeper?.rows.filter((r) => r.bytes < 0) ?? [];
    assert.ok(keeperFrees.length >= 30 && keeperFrees.every((r) => r.threadId === mainTid &&
                                                              r.frames.some((f) => f.name === 'keep_then_free')),
              `the keeper's blocks: ${keeperFrees.length} frees in its table, by ${[...new Set(keeperFrees.map((r) => r.threadId))]} (main ${mainTid})`);
    const sum = (list) => list.reduce((total, r) => total + r.bytes, 0);
    const inLeak = held.filter((r) => inOrder(r.frames.map((f) => f.name), ['main', 'leak_one']));
    // posix_memalign's, aligned_alloc's and memalign's blocks (memalign's through malloc, counted once).
    const inAligned = held.filter((r) => inOrder(r.frames.map((f) => f.name), ['main', 'leak_aligned']));
    const kept = rows.filter((r) => r.bytes > 0 && r.frames.some((f) => f.name === 'keep_then_free'));
    const freedRows = rows.filter((r) => r.bytes < 0).length;
    const stackless = /(\d+) without a stack/.exec(rec.result.stderr)?.[1] ?? '0';
    t.diagnostic(`${rows.length} rows (${freedRows} frees, ${stackless} calls without a stack); held at the end ` +
                 `${(sum(held) / MB).toFixed(1)} MB, under main > leak_one ${(sum(inLeak) / MB).toFixed(1)} MB, ` +
                 `under leak_aligned ${(sum(inAligned) / MB).toFixed(1)} MB (of ${(aligned / MB).toFixed(1)}) ` +
                 `(it leaked ${(leaked / MB).toFixed(1)} MB); keep_then_free allocated ${(sum(kept) / MB).toFixed(1)} MB, all freed`);
    assert.ok(Math.abs(sum(inLeak) - leaked) <= 0.02 * leaked, `leak_one holds ${sum(inLeak)} of ${leaked}`);
    assert.ok(Math.abs(sum(inAligned) - aligned) <= 0.02 * aligned, `leak_aligned holds ${sum(inAligned)} of ${aligned}`);
    assert.ok(sum(held) - sum(inLeak) - sum(inAligned) <= 0.02 * leaked,
              `${sum(held) - sum(inLeak) - sum(inAligned)} bytes held elsewhere`);
    assert.ok(Math.abs(sum(kept) - 32 * 1024 * 1024) <= 0.02 * 32 * 1024 * 1024, `keep_then_free ${sum(kept)}`);
    const line = rec.result.stderr.split('\n').find((l) => l.includes('still held at the end'));
    assert.ok(line && /most at leak_one < main/.test(line), `summary: ${line}`);
    await checkWithProfilerCli(t, rec.file, view);
  });

  it('--allocations: pprof\'s inuse_space is the leak, alloc_space the churn', async (t) => {
    if (!requireRecorder(t) || !goAvailable(t)) return;
    const file = join(RESULTS_DIR, 'allocations.pb.gz');
    const result = await run(BPFPROF, ['record', '--allocations', '--allocation-interval', '65536', '--format',
                                       'pprof', '-o', file, '--', fixturePath('alloc_leak'), '800']);
    assert.equal(result.code, 0, result.stderr);
    const leaked = Number(/leaked bytes=(\d+)/.exec(result.stdout)?.[1]);
    const inuse = parseTop(pprof(['-top', '-sample_index=inuse_space', '-unit=B'], file));
    const alloc = parseTop(pprof(['-top', '-sample_index=alloc_space', '-unit=B'], file));
    const leak = parseFloat(inuse.get('leak_one')?.flat ?? '0');
    const churn = parseFloat(alloc.get('churn')?.flat ?? '0');
    t.diagnostic(`go tool pprof: inuse_space leak_one ${leak} B (leaked ${leaked}), alloc_space churn ${churn} B`);
    assert.ok(Math.abs(leak - leaked) <= 0.02 * leaked, `leak_one ${leak} B in inuse_space:\n${[...inuse]}`);
    assert.ok(!inuse.get('churn') || parseFloat(inuse.get('churn').flat) < 0.02 * leaked, 'churn in inuse_space');
    assert.ok(churn > leaked, `churn ${churn} B in alloc_space`);
  });

  // Bad input: the command is killed by its cgroup's OOM killer halfway through its growth. The
  // profile keeps what it grew, up to the kill; bpfprof exits as the command did (SIGKILL: 137).
  it('keeps an OOM-killed command\'s growth up to its kill', async (t) => {
    if (!requireRecorder(t)) return;
    const v1 = '/sys/fs/cgroup/memory';
    const root = existsSync(`${v1}/memory.limit_in_bytes`) ? v1 : '/sys/fs/cgroup';
    const group = join(root, `bpfprof-oom-${process.pid}`);
    mkdirSync(group, { recursive: true });
    try {
      writeFileSync(join(group, root === v1 ? 'memory.limit_in_bytes' : 'memory.max'), String(100 << 20));
      const file = join(RESULTS_DIR, 'memory_oom.json.gz');
      const result = await run(BPFPROF, ['record', '--memory', '-o', file, '--', 'sh', '-c',
                                         `echo $$ > ${group}/cgroup.procs; exec "$0" 1500`, fixturePath('memory_grow')]);
      t.diagnostic(result.stderr.split('\n').filter((l) => /peak|brought|killed|signal|exit/.test(l)).join('\n'));
      assert.equal(result.signal, null);
      const profile = readProfile(file);
      const pid = fixturePid(profile);
      const peak = Math.max(...memorySeries(profile, pid).points.map((p) => p.bytes));
      const view = new ProfileView(profile);
      const grown = view.threads.filter((th) => th.pid.split('.')[0] === pid).flatMap((th) => view.allocations(th))
        .filter((r) => r.frames.some((f) => f.name === 'touch_block')).reduce((sum, r) => sum + r.bytes, 0);
      t.diagnostic(`killed at its limit: peak ${(peak / MB).toFixed(1)} MB, ${(grown / MB).toFixed(1)} MB under touch_block`);
      assert.ok(peak >= 90 * MB && peak <= 110 * MB, `peak ${peak / MB} MB under a 104.9 MB limit`);
      assert.ok(grown >= 0.8 * peak, `only ${grown / MB} MB of growth kept`);
      assert.equal(result.code, 128 + 9, 'the command\'s SIGKILL');
    } finally {
      rmdirSync(group);
    }
  });

  // A 1 TiB reservation touched once a GiB, and children that exit as soon as they have grown:
  // the recorder's memory stays bounded, the reservation is one mapping of 1 TiB in the address
  // space but 4 MiB of growth, and the children's growth is all there though they are gone
  // before their events are read.
  it('is not sunk by a sparse 1 TiB mapping nor by processes exiting mid-read', async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'memory_edges.json.gz');
    const result = await run('/usr/bin/time', ['-f', 'maxrss_kb=%M', BPFPROF, 'record', '--memory', '-o', file, '--',
                                               fixturePath('memory_edges'), '1500']);
    assert.equal(result.code, 0, result.stderr);
    const m = /sparse reserved=(\d+) touched=(\d+) children=(\d+) hwm_kb=(\d+)/.exec(result.stdout);
    assert.ok(m, `memory_edges printed no summary:\n${result.stdout}`);
    const [reserved, touched, children] = [Number(m[1]), Number(m[2]), Number(m[3])];
    const recorderMB = Number(/maxrss_kb=(\d+)/.exec(result.stderr)?.[1]) / 1024;
    const profile = readProfile(file);
    const view = new ProfileView(profile);
    const edges = view.threads.filter((th) => th.processName === 'memory_edges');
    const main = edges.filter((th) => th.isMainThread && view.addressSpaceChanges(th).some((c) => c.change >= reserved));
    assert.equal(main.length, 1, 'no process with the 1 TiB mapping');
    const changes = view.addressSpaceChanges(main[0]);
    const names = (r) => r.frames.map((f) => f.name);
    const reservation = changes.filter((c) => c.call === 'mmap' && c.change === reserved && names(c).includes('map_sparse'));
    const release = changes.filter((c) => c.call === 'munmap' && c.change === -reserved && names(c).includes('main'));
    const sum = (rows) => rows.reduce((total, r) => total + r.bytes, 0);
    const sparseBytes = sum(view.allocations(main[0]).filter((r) => names(r).includes('map_sparse')));
    const childBytes = sum(edges.flatMap((th) => view.allocations(th)).filter((r) => names(r).includes('child_grow')));
    const expectedChildBytes = children * 4 * 1024 * 1024;
    const peak = memorySeries(profile, main[0].pid.split('.')[0]).points.reduce((a, p) => Math.max(a, p.bytes), 0);
    t.diagnostic(`recorder max RSS ${recorderMB.toFixed(1)} MB; ${edges.length} memory_edges processes ` +
                 `(${children} children); map_sparse touched ${(sparseBytes / MB).toFixed(1)} MB of ` +
                 `${(touched / MB).toFixed(1)}; child_grow ${(childBytes / MB).toFixed(1)} MB of ` +
                 `${(expectedChildBytes / MB).toFixed(1)}; main's peak ${(peak / MB).toFixed(1)} MB (VmHWM ` +
                 `${(Number(m[4]) / 1024).toFixed(1)} MB)`);
    assert.equal(reservation.length, 1, 'the 1 TiB mmap not under map_sparse');
    assert.equal(release.length, 1, 'the 1 TiB munmap not under main');
    assert.ok(sparseBytes > 0 && sparseBytes <= 4 * touched, `map_sparse grew ${sparseBytes} B, it touched ${touched}`);
    assert.ok(Math.abs(childBytes - expectedChildBytes) <= 0.2 * expectedChildBytes, `child_grow ${childBytes} B`);
    assert.ok(edges.length >= 0.9 * children, `${edges.length} processes for ${children} children`);
    assert.ok(peak < 64 * MB, `main's memory track peaks at ${peak / MB} MB`);
    assert.ok(recorderMB > 0 && recorderMB < 160, `the recorder grew to ${recorderMB} MB`);
    assert.match(result.stderr, /address space \(.*grew 1099\.\d GB.*most at map_sparse < main/);
    await checkWithProfilerCli(t, file, view);
  });

  // A freshly booted machine may have no tracefs mounted: --memory's programs must not need it.
  it('records the address space without tracefs mounted', async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'memory_no_tracefs.json.gz');
    const result = await run('unshare', [
      '-m', '--propagation', 'private', 'sh', '-c',
      'umount -l /sys/kernel/tracing 2>/dev/null; umount -l /sys/kernel/debug 2>/dev/null; ' +
      '! grep -q tracefs /proc/self/mounts || exit 99; exec "$@"', 'sh',
      BPFPROF, 'record', '--memory', '-o', file, '--', fixturePath('memory_grow'), '600']);
    assert.equal(result.code, 0, result.stderr);
    checkAddressSpace(t, { profile: readProfile(file), result });
  });

  it('writes no memory track without --memory', async (t) => {
    if (!requireRecorder(t)) return;
    const rec = await recordFixture('memory_grow', 300, { label: 'memory_off' });
    assert.equal(rec.profile.counters, undefined);
  });
});
