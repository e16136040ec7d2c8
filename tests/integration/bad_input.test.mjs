// Odd files mapped executable: code run from a file that is not ELF, a
// truncated ELF and a corrupt ELF is recorded without a crash, its frames named by offset
// in the file, and the profile loads in profiler-cli.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { checkWithProfilerCli, fixturePath, pct, recordWith, requireRecorder } from './lib/harness.mjs';

const FILES = ['bad_non_elf.bin', 'bad_truncated_elf.so', 'bad_corrupt_elf.so'];

for (const callGraph of ['dwarf', 'fp']) {
  describe(`odd executable mappings (${callGraph})`, () => {
    it('frames named by offset in each file, no crash, the profile loads', async (t) => {
      if (!requireRecorder(t)) return;
      const dir = mkdtempSync(join(tmpdir(), 'bpfprof-bad-'));
      const rec = await recordWith(`bad-mappings-${callGraph}`,
        ['--call-graph', callGraph, '--', fixturePath('bad_mappings'), '900', dir]);
      const th = rec.view.threads.find((x) => x.name === 'bad_mappings');
      assert.ok(th, 'the fixture thread is there');
      for (const file of FILES) {
        const r = rec.view.onCpuShare(th, (frames) => {
          const leaf = frames[frames.length - 1];
          return leaf && new RegExp(`^${file.replace('.', '\\.')}\\+0x[0-9a-f]+$`).test(leaf.name);
        });
        t.diagnostic(`${file}: ${pct(r.share)} of samples with a leaf named ${file}+0x...`);
        assert.ok(r.share > 0.25, `${file}: only ${pct(r.share)}`);
      }
      assert.match(rec.result.stderr, /of on-CPU samples are in code without a symbol .*bad_/);
      await checkWithProfilerCli(t, rec.file, rec.view);
    });
  });
}
