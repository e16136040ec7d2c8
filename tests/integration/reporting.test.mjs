// What bpfprof tells its user: lost events counted per CPU and per
// process, shown at the end and stored in the profile (meta.extra and markers at the time
// they happened); a live status line on a terminal only; the end summary.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { describe, it } from 'node:test';

import {
  BPFPROF, RESULTS_DIR, describeOnce, fixturePath, itOnce, recordWith, requireRecorder, saveMetrics,
  withCliSession,
} from './lib/harness.mjs';
import { join } from 'node:path';

function extra(view, label) {
  return view.profile.meta.extra?.[0]?.entries?.find((e) => e.label === label)?.value;
}

describe('lost events', () => {
  itOnce('a ring buffer too small for the rate loses events: counted, per CPU and process, marked in time', async (t) => {
    if (!requireRecorder(t)) return;
    // Two spinning threads sampled at 20 kHz with stack copies (~5 KB each: dwarf-copy; the
    // default's kernel walk sends ~100 bytes, which the reader, woken at a quarter full,
    // could keep up with) through a 64 KB ring buffer: the reader cannot keep up.
    const rec = await recordWith('losses', ['-F', '20000', '--buffer-size', '64K', '--call-graph', 'dwarf-copy',
                                            '--', fixturePath('threads'), '1500']);
    const stderr = rec.result.stderr;
    const total = Number(stderr.match(/; (\d+) events lost/)?.[1]);
    assert.ok(total > 0, `nothing lost?\n${stderr}`);
    assert.match(stderr, new RegExp(`${total} events lost \\(ring buffer full; try a larger --buffer-size or a lower -F\\): CPU \\d`));
    assert.match(stderr, /in threads \(\d+\) \d+/);
    assert.equal(extra(rec.view, 'Lost events'), total);
    assert.match(extra(rec.view, 'Lost events per CPU'), /^CPU \d+: \d+/);
    assert.match(extra(rec.view, 'Lost events by process'), /^threads \(\d+\): \d+/);

    const main = rec.view.threads.find((th) => th.name === 'threads');
    assert.ok(main, 'main thread present');
    // The thread's other markers (its woken waits) are left aside.
    const lossMarkers = [...main.markers.data.keys()].filter((i) => main.markers.data[i]?.type === 'bpfprof-lost');
    assert.ok(lossMarkers.length > 0, 'no loss markers on the main thread');
    const marked = lossMarkers.reduce((s, i) => s + main.markers.data[i].count, 0);
    assert.ok(marked > 0 && marked <= total, `markers count ${marked} of ${total} lost`);
    for (const i of lossMarkers) {
      const start = main.markers.startTime[i];
      assert.ok(start >= 0 && start <= 1500 + 500, `marker at ${start} ms`);
    }
    const schema = rec.view.profile.meta.markerSchema.find((s) => s.name === 'bpfprof-lost');
    assert.ok(schema, 'marker schema');
    await withCliSession(rec.file, async (session) => {
      const list = await session.threadList();
      const entry = list.find((e) => e.name === 'threads');
      const m = await session.json('thread', 'markers', '--thread', entry.threadHandle);
      const lost = m.byType.find((x) => x.markerName === 'Events lost');
      assert.ok(lost, JSON.stringify(m.byType.map((x) => x.markerName)));
      assert.match(lost.topMarkers[0].label, /^[\d,]+ events lost in threads \(\d+\)$/);
    });
    saveMetrics('losses', { lost: total, marked, markers: lossMarkers.length });
  });

  it('at the default size and rate nothing is lost and nothing is marked', async (t) => {
    if (!requireRecorder(t)) return;
    const rec = await recordWith('no-losses', ['--', fixturePath('threads'), '800']);
    assert.match(rec.result.stderr, /; 0 events lost/);
    assert.doesNotMatch(rec.result.stderr, /ring buffer full/);
    assert.equal(extra(rec.view, 'Lost events'), 0);
    for (const th of rec.view.threads) {
      const loss = th.markers.data.filter((d) => d?.type === 'bpfprof-lost');
      assert.equal(loss.length, 0, th.name);
    }
  });

  itOnce('--buffer-size rejects what is not a power of two', () => {
    const r = spawnSync(BPFPROF, ['record', '--buffer-size', '3M', '--', 'true'], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /^bpfprof: --buffer-size must be a power of two from 64K to 1G/);
  });
});

describe('end summary', () => {
  it('names the top processes and functions, the losses, the output and its size', async (t) => {
    if (!requireRecorder(t)) return;
    const rec = await recordWith('summary', ['--', 'sh', '-c', `${fixturePath('threads')} 800 & ${fixturePath('busy')} 400; wait`]);
    const e = rec.result.stderr;
    assert.match(e, /recording ended after [\d.]+ s; writing the profile/);
    assert.match(e, /\d+ samples \((?:cpu-clock|cycles), \d+ Hz\) from \d+ processes and \d+ threads; 0 events lost/);
    const top = e.match(/top processes by CPU time: (.*)/)?.[1] ?? '';
    // 2 threads spinning 0.8 s, then one spinning 0.4 s (less each on a loaded machine).
    const m = top.match(/^threads \(\d+\) ([\d.]+) s, busy \(\d+\) ([\d.]+) s/);
    assert.ok(m && Number(m[1]) > Number(m[2]) && Number(m[2]) > 0.05, top);
    const functions = [...e.matchAll(/^ +([\d.]+)% +(.*)$/gm)].map((m) => [Number(m[1]), m[2]]);
    assert.ok(functions.length >= 3 && functions.length <= 10, e);
    const names = functions.map(([, n]) => n);
    for (const f of ['alpha_spin (threads)', 'beta_spin (threads)', 'inner_spin (busy)'])
      assert.ok(names.slice(0, 4).includes(f), `${f} not among the top functions: ${names.join(' | ')}`);
    const size = statSync(rec.file).size;
    const printed = e.match(/wrote (\S+) \(([\d.]+) (KB|MB)\)/);
    assert.ok(printed, e);
    assert.equal(printed[1], rec.file);
    const bytes = Number(printed[2]) * (printed[3] === 'KB' ? 1024 : 1 << 20);
    assert.ok(Math.abs(bytes - size) <= Math.max(1024, size * 0.06), `printed ${printed[2]} ${printed[3]}, file ${size} bytes`);
    assert.match(e, /open it at https:\/\/profiler\.firefox\.com/);
  });
});

describeOnce('live status line', () => {
  it('is shown, updated every second, on a terminal', async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'status-tty.json.gz');
    // script(1) gives bpfprof a pseudo-terminal as its stderr.
    const r = spawnSync('script', ['-qec', `${BPFPROF} record -o ${file} -d 2.5 -a`, '/dev/null'],
                        { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    const lines = r.stdout.match(/\r\x1b\[Kbpfprof: recording \d+ s, \d+ samples, \d+ lost, \d+ processes, \d+ threads/g) ?? [];
    assert.ok(lines.length >= 2, `status lines: ${JSON.stringify(lines)}\n${JSON.stringify(r.stdout.slice(0, 400))}`);
    assert.match(lines[0], /recording 1 s/);
    assert.match(r.stdout, /\r\x1b\[Kbpfprof: recording ended/);  // cleared before the summary
  });

  it('is not written when stderr is not a terminal', async (t) => {
    if (!requireRecorder(t)) return;
    const rec = await recordWith('status-pipe', ['-d', '1.5', '-a']);
    assert.doesNotMatch(rec.result.stderr, /bpfprof: recording \d+ s/);
    assert.doesNotMatch(rec.result.stderr, /\x1b\[K/);
  });
});

describeOnce('--format collapsed', () => {
  it('writes folded stacks: one line per unique stack, counts summing to the samples', async (t) => {
    if (!requireRecorder(t)) return;
    const file = join(RESULTS_DIR, 'collapsed.folded');
    const r = spawnSync(BPFPROF, ['record', '--format', 'collapsed', '--no-off-cpu', '-o', file, '--',
                                  fixturePath('busy'), '800'], { encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /folded stacks for flamegraph\.pl/);
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    const seen = new Set();
    let total = 0;
    let hot = 0;
    for (const line of lines) {
      const m = line.match(/^(.+) (\d+)$/);
      assert.ok(m, `not a folded line: ${JSON.stringify(line)}`);
      assert.ok(!seen.has(m[1]), `stack twice: ${m[1]}`);
      seen.add(m[1]);
      const frames = m[1].split(';');
      assert.match(frames[0], /^busy \(\d+\)$/);
      assert.equal(frames[1], 'busy');
      total += Number(m[2]);
      if (m[1].includes(';main;outer;inner_spin')) hot += Number(m[2]);
    }
    const samples = Number(r.stderr.match(/(\d+) samples \(/)[1]);
    // The summary also counts the few samples of bpfprof's own child before it execs the
    // command, which no output shows.
    assert.ok(total <= samples && samples - total <= Math.max(5, samples * 0.01), `counts ${total} vs ${samples} samples`);
    assert.ok(hot / total > 0.9, `main;outer;inner_spin ${hot} of ${total}`);
  });
});

// A plain record says what matters in a few lines, as perf and samply do: what was recorded,
// problems only when there are any, the top functions, where the profile is. The rest is -v's.
describeOnce('the end-of-run summary', () => {
  const record = (args) => spawnSync(BPFPROF, ['record', '-o', join(RESULTS_DIR, 'summary.json.gz'), ...args],
                                     { encoding: 'utf8', timeout: 120_000 });
  const linesOf = (stderr) => stderr.split('\n').filter((l) => l.trim() !== '');

  it('fits in 8 lines by default, with the top functions on one of them', async (t) => {
    if (!requireRecorder(t)) return;
    const r = record(['--', fixturePath('threads'), '600']);
    assert.equal(r.status, 0, r.stderr);
    const lines = linesOf(r.stderr);
    t.diagnostic(`\n${lines.join('\n')}`);
    assert.ok(lines.length <= 8, `${lines.length} lines:\n${r.stderr}`);
    assert.match(r.stderr, /^bpfprof: \d+ samples \(.*\) from \d+ processes and \d+ threads; 0 events lost$/m);
    assert.match(r.stderr, /^bpfprof: top functions \(self time on CPU\): .*spin.* \d+\.\d%/m);
    assert.match(r.stderr, /^bpfprof: wrote .*summary\.json\.gz/m);
    assert.doesNotMatch(r.stderr, /start-up:|own CPU time|Unwind tables|unwinding/);
  });

  it('prints every figure with -v', async (t) => {
    if (!requireRecorder(t)) return;
    const r = record(['-v', '--', fixturePath('threads'), '600']);
    assert.equal(r.status, 0, r.stderr);
    // A launched command is sampled first by walkers without the costliest runtimes' readers,
    // then by the full ones.
    for (const pattern of [/start-up: sampling after/, /BPF load: minimal BTF \d+ ms, main object \d+ ms, .*on_sample \d+.*; with the runtimes' readers after \d+ ms$/m,
                           /its own CPU time/, /user stacks complete/,
                           /User stacks unwound in the kernel/, /top functions by on-CPU samples \(self\):\n +\d/])
      assert.match(r.stderr, pattern);
  });

  it('never prints a heading without its list', async (t) => {
    if (!requireRecorder(t)) return;
    // A command over before much is sampled, and code that nothing names (JIT code without
    // a perf map).
    for (const command of [['true'], [fixturePath('jit'), '300', '--no-perf-map']]) {
      for (const verbose of [[], ['-v']]) {
        const r = record([...verbose, '--', ...command]);
        assert.equal(r.status, 0, r.stderr);
        const lines = linesOf(r.stderr);
        lines.forEach((line, i) => {
          if (line.endsWith(':')) assert.match(lines[i + 1] ?? '', /^ +\d/, `an empty heading: ${line}\n${r.stderr}`);
        });
      }
    }
  });
});
