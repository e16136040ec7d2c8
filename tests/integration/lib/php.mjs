// What the PHP tests share (php_stacks, php_fpm): which threads and frames are PHP's, and the
// check that each PHP function's samples sit under the PHP frames its caller chain gives.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';

import { IS_CI, STATE_FRAMES, funcSourceFile, pct, requireRecorder } from './harness.mjs';

export const phpThreads = (view, name = /^php/) => view.threads.filter((th) => name.test(th.processName));
export const onCpu = (s) => !STATE_FRAMES.has(s.frames.at(-1)?.name);
export const phpFrames = (s) => s.frames.filter((f) => f.category === 'PHP');
// A user function's frame has its source file; an internal function's (hash, usort) has none.
export const userFrames = (view, s) => phpFrames(s).filter((f) => funcSourceFile(view, f.func));

// Samples of `threads` by the user function at their leaf: how many, and how many under the
// frames `chains` says, in order from the root.
export function chainCounts(view, threads, chains) {
  const counts = Object.fromEntries(Object.keys(chains).map((k) => [k, { all: 0, ordered: 0, other: new Map() }]));
  let withPhp = 0, onCpuTotal = 0, execLeft = 0;
  const noPhp = new Map();
  for (const th of threads) {
    for (const s of view.samples(th).filter(onCpu)) {
      onCpuTotal += s.weight;
      const names = phpFrames(s).map((f) => f.name);
      if (names.length) withPhp += s.weight;
      else {
        const stack = s.frames.slice(-4).map((f) => f.name).join(' > ');
        noPhp.set(stack, (noPhp.get(stack) ?? 0) + s.weight);
      }
      // An execute_ex with PHP frames after it is one the merge left (a sample taken as a call
      // is entered or left keeps that call's execute_ex at its leaf: no PHP frame is its yet).
      const exec = s.frames.findIndex((f) => f.name === 'execute_ex');
      if (exec >= 0 && s.frames.slice(exec).some((f) => f.category === 'PHP')) execLeft += s.weight;
      const c = counts[userFrames(view, s).at(-1)?.name];
      if (!c) continue;
      c.all += s.weight;
      const chain = chains[userFrames(view, s).at(-1).name];
      if (chain.every((n, i) => names[i] === n)) c.ordered += s.weight;
      else c.other.set(names.join(' > '), (c.other.get(names.join(' > ')) ?? 0) + s.weight);
    }
  }
  return { counts, withPhp, onCpuTotal, execLeft, noPhp };
}

export function checkChains(t, { counts, withPhp, onCpuTotal, execLeft, noPhp }, chains, { minPhp, minSamples }) {
  t.diagnostic(`${onCpuTotal} on-CPU samples: ${pct(withPhp / onCpuTotal)} with PHP frames, ` +
               `${execLeft} with an execute_ex left between PHP frames`);
  for (const [leaf, c] of Object.entries(counts)) {
    t.diagnostic(`${leaf}: ${c.all} samples, ${pct(c.ordered / (c.all || 1))} under ${chains[leaf].join(' > ')}`);
    for (const [stack, n] of [...c.other].sort((a, b) => b[1] - a[1]).slice(0, 2)) t.diagnostic(`  other x${n}: ${stack}`);
  }
  for (const [leaf, c] of Object.entries(counts)) {
    assert.ok(c.all >= minSamples, `${leaf}: ${c.all} samples`);
    assert.ok(c.ordered / c.all >= 0.95, `${leaf}: ${pct(c.ordered / c.all)} in order`);
  }
  const withoutPhp = [...noPhp].sort((a, b) => b[1] - a[1]).slice(0, 5).map(([k, n]) => `x${n}: ... > ${k}`);
  assert.ok(withPhp / onCpuTotal >= minPhp,
            `${pct(withPhp / onCpuTotal)} with PHP frames; without, innermost four frames:\n${withoutPhp.join('\n')}`);
  assert.equal(execLeft, 0, 'execute_ex frames left between PHP frames');
}


// Whether the test can run: a recorder, and the PHP binaries (under CI=true missing ones fail).
export const phpReady = (t, binaries) => {
  if (!requireRecorder(t)) return false;
  const missing = binaries.filter((b) => !existsSync(b));
  if (!missing.length) return true;
  if (IS_CI) assert.fail(`${missing.join(', ')} missing (php8.2-cli, php8.2-fpm, libfcgi-bin: scripts/install-deps.sh)`);
  t.skip(`${missing.join(', ')} missing`);
  return false;
};

