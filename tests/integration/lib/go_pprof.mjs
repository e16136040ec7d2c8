// Go's own pprof (`go tool pprof`, Debian's golang-go) run on a profile bpfprof wrote, and its
// text output read back: what a user of go tool pprof sees.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

import { IS_CI, RESULTS_DIR } from './environment.mjs';

// go tool pprof's text output for `args`, failing the test when pprof cannot read the file.
export function pprof(args, file) {
  const r = spawnSync('go', ['tool', 'pprof', ...args, file], {
    encoding: 'utf8', env: { ...process.env, PPROF_TMPDIR: RESULTS_DIR, HOME: RESULTS_DIR },
  });
  assert.equal(r.status, 0, `go tool pprof ${args.join(' ')} ${file} failed:\n${r.stderr}`);
  return r.stdout;
}

export function goAvailable(t) {
  if (spawnSync('go', ['version']).status === 0) return true;
  if (IS_CI) assert.fail('go (golang-go) is missing: scripts/install-deps.sh installs it');
  t.skip('no go (golang-go)');
  return false;
}

// `-traces` output as traces: { frames (leaf first, inline frames as pprof prints them),
// value (the first column, in pprof's unit), labels (text) }. Each trace is its labels
// ("  thread_name:  sleeper"), then the value and the leaf, then one caller per line.
export function parseTraces(text) {
  const traces = [];
  const isLabel = (l) => /^\s*[\w-]+:\s+\S/.test(l) && !/^\s*\d/.test(l);
  for (const block of text.split(/^-{5,}.*$/m).slice(1)) {
    const lines = block.split('\n').filter((l) => l.trim() !== '');
    const labels = lines.filter(isLabel).join('\n');
    const body = lines.filter((l) => !isLabel(l));
    if (body.length === 0) continue;
    const [value, ...leaf] = body[0].trim().split(/\s+/);
    traces.push({ value, frames: [leaf.join(' '), ...body.slice(1).map((l) => l.trim())], labels });
  }
  return traces;
}

// The flat (self) values of -top by function name, in pprof's printed unit.
export function parseTop(text) {
  const rows = new Map();
  for (const line of text.split('\n')) {
    const m = line.match(/^\s*(\S+)\s+\S+%\s+\S+%\s+(\S+)\s+\S+%\s+(.+)$/);
    if (m) rows.set(m[3].trim(), { flat: m[1], cum: m[2] });
  }
  return rows;
}
