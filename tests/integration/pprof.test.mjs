// pprof output (--format pprof, bpfprof convert) read by Go's own pprof (`go tool pprof`,
// Debian's golang-go): -top, -traces and -tags must show the fixtures' functions, chains,
// weights and labels. The hand-made session of tests/support (write_demo_profile) needs no
// root; the recordings do. Runs once: the format does not depend on the unwinding mode.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { goAvailable, parseTop, parseTraces, pprof } from './lib/go_pprof.mjs';
import {
  BPFPROF, FREQUENCY_HZ, IS_CI, RESULTS_DIR, fixturePath, parseCputimeLines, readProfile, requireRecorder, run,
} from './lib/harness.mjs';

const WRITE_DEMO_PROFILE = process.env.WRITE_DEMO_PROFILE;

describe('pprof of the hand-made session (no root)', () => {
  it('go tool pprof shows its functions, chains, weights and labels', (t) => {
    if (!goAvailable(t)) return;
    assert.ok(WRITE_DEMO_PROFILE && existsSync(WRITE_DEMO_PROFILE), 'write_demo_profile is built');
    const file = join(RESULTS_DIR, 'demo.pb.gz');
    rmSync(file, { force: true });
    const w = spawnSync(WRITE_DEMO_PROFILE, [file, 'pprof'], { encoding: 'utf8' });
    assert.equal(w.status, 0, w.stderr);

    const top = parseTop(pprof(['-top', '-sample_index=samples'], file));
    assert.equal(top.get('compute_hash')?.flat, '4', `-top:\n${[...top]}`);
    assert.equal(top.get('main')?.flat, '2');
    assert.equal(top.get('main')?.cum, '6');
    assert.equal(top.get('worker_loop')?.flat, '2');

    const traces = parseTraces(pprof(['-traces', '-sample_index=samples'], file));
    const compute = traces.find((tr) => tr.frames[0] === 'compute_hash');
    assert.deepEqual(compute?.frames, ['compute_hash', 'main', '_start'], JSON.stringify(traces));
    assert.match(compute.labels, /thread_name:\s+\[?demo\]?/);
    assert.match(compute.labels, /process_name:\s+\[?demo\]?/);

    const tags = pprof(['-tags', '-sample_index=samples'], file);
    assert.match(tags, /thread_name.*\n(.*\n)*.*worker/, tags);
    assert.match(tags, /tid.*\n(.*\n)*.*4243/, tags);
  });
});

describe('pprof of recordings', () => {
  it('--format pprof: on-CPU and off-CPU chains, CPU time and thread labels', async (t) => {
    if (!requireRecorder(t) || !goAvailable(t)) return;
    const file = join(RESULTS_DIR, 'sleepy.pb.gz');
    rmSync(file, { force: true });
    const result = await run(BPFPROF, ['record', '-F', String(FREQUENCY_HZ), '--format', 'pprof',
                                       '-o', file, '--', fixturePath('sleepy'), '1500']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /wrote .*sleepy\.pb\.gz .*pprof/);

    // On CPU: the sleeper's spin_phase under its thread function, in timer samples.
    const traces = parseTraces(pprof(['-traces', '-sample_index=samples'], file));
    const spin = traces.filter((tr) => tr.frames.includes('spin_phase'));
    assert.ok(spin.length > 0, `no spin_phase trace:\n${JSON.stringify(traces.slice(0, 5))}`);
    assert.ok(spin.some((tr) => tr.labels.includes('sleeper')), 'spin_phase is the sleeper\'s');

    // Off CPU: sleep_phase waits in [sleeping], weighted by the time waited (~750 ms).
    const offTop = parseTop(pprof(['-top', '-sample_index=off-cpu', '-unit=ms'], file));
    const sleeping = offTop.get('[sleeping]');
    assert.ok(sleeping, `no [sleeping] in the off-CPU view:\n${[...offTop.keys()]}`);
    assert.ok(parseFloat(sleeping.flat) > 500, `[sleeping] ${sleeping.flat}`);
    const offTraces = parseTraces(pprof(['-traces', '-sample_index=off-cpu'], file));
    assert.ok(offTraces.some((tr) => tr.frames[0] === '[sleeping]' && tr.frames.includes('sleep_phase') &&
                                     /off_cpu_state:\s+\[?sleeping\]?/.test(tr.labels)),
              JSON.stringify(offTraces.slice(0, 3)));

    // CPU time: the sleeper's cpu/nanoseconds against its own CPU clock, within 10%.
    const sleeper = parseCputimeLines(result.stdout).find((c) => c.name === 'sleeper');
    assert.ok(sleeper, result.stdout);
    const cpu = pprof(['-top', '-sample_index=cpu', '-unit=ms', `-tagfocus=tid=${sleeper.tid}`], file);
    const total = Number(cpu.match(/of ([\d.]+)ms total/)?.[1]);
    assert.ok(Math.abs(total - sleeper.ns / 1e6) < 0.1 * sleeper.ns / 1e6,
              `pprof ${total} ms, the thread's clock ${sleeper.ns / 1e6} ms:\n${cpu}`);
  });

  it('bpfprof convert: the recorded Firefox profile as pprof, inline frames in one location',
     async (t) => {
       if (!requireRecorder(t) || !goAvailable(t)) return;
       const json = join(RESULTS_DIR, 'inline_hot.json.gz');
       const out = join(RESULTS_DIR, 'inline_hot.pb.gz');
       rmSync(json, { force: true });
       rmSync(out, { force: true });
       const rec = await run(BPFPROF, ['record', '-F', String(FREQUENCY_HZ), '-o', json, '--',
                                       fixturePath('inline_hot'), '800']);
       assert.equal(rec.code, 0, rec.stderr);
       const conv = await run(BPFPROF, ['convert', json, '-o', out]);
       assert.equal(conv.code, 0, conv.stderr);

       // The same weights as the Firefox profile's samples: on CPU (timer samples) and off CPU
       // (waits, whose leaf frame is of category Idle or Waiting for CPU).
       const profile = readProfile(json);
       const { stackTable, frameTable } = profile.shared;
       let onCpu = 0;
       let offCpu = 0;
       for (const th of profile.threads) {
         const w = th.samples.weight;
         for (let i = 0; i < th.samples.length; i++) {
           const stack = th.samples.stack[i];
           const category = stack === null ? 0 : frameTable.category[stackTable.frame[stack]];
           if (category === 3 || category === 4) offCpu += w ? w[i] : 1;
           else onCpu += w ? w[i] : 1;
         }
       }
       const top = pprof(['-top', '-sample_index=samples'], out);
       const total = Number(top.match(/of (\d+) total/)?.[1]);
       assert.ok(Math.abs(total - onCpu) <= 1, `pprof total ${total}, on-CPU weight ${onCpu}`);
       const offTop = pprof(['-top', '-sample_index=off-cpu', '-unit=ms'], out);
       const offMs = Number(offTop.match(/of ([\d.]+)ms total/)?.[1] ?? 0);
       assert.ok(Math.abs(offMs - offCpu) <= 1, `pprof off-CPU ${offMs} ms, off-CPU weight ${offCpu}`);

       // helper is inlined into hot_loop: pprof prints it with "(inline)" at the same address.
       const traces = parseTraces(pprof(['-traces', '-sample_index=samples'], out));
       const hot = traces.filter((tr) => tr.frames.some((f) => f.startsWith('helper')));
       assert.ok(hot.length > 0, JSON.stringify(traces.slice(0, 3)));
       const frames = hot[0].frames;
       const h = frames.findIndex((f) => f.startsWith('helper'));
       assert.match(frames[h], /\(inline\)/, frames.join(' | '));
       assert.equal(frames[h + 1], 'hot_loop', frames.join(' | '));
       assert.equal(frames[h + 2], 'main', frames.join(' | '));
     });

  it('convert refuses what is not a profile in one line', async (t) => {
    if (!existsSync(BPFPROF)) {
      if (IS_CI) assert.fail('no bpfprof');
      t.skip('no bpfprof');
      return;
    }
    const out = join(RESULTS_DIR, 'not-a-profile.pb.gz');
    rmSync(out, { force: true });
    const r = await run(BPFPROF, ['convert', fixturePath('sleepy'), '-o', out]);
    assert.equal(r.code, 2);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.ok(!existsSync(out));
  });
});
