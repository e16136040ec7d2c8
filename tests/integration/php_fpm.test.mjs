// php_fpm: Debian's php-fpm8.2 with two workers (Debian's php.ini and opcache, its own pool on
// a socket in the results), started before the recordings, serving fixtures/php/app.php through
// FastCGI (libfcgi-bin's cgi-fcgi) one request after another meanwhile; recorded with `-p` of
// its master (its workers are its children) and with `-a`. The script's functions must sit in
// the workers' stacks under the PHP frames that call them, in order.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';

import {
  BPFPROF, FREQUENCY_HZ, ProfileView, REPO_DIR, RESULTS_DIR, callGraphArgs, readProfile,
  recorderUnavailableReason, run, sleep, startBackground, untilSampling,
} from './lib/harness.mjs';
import { chainCounts, checkChains, phpReady, phpThreads } from './lib/php.mjs';

const FPM = '/usr/sbin/php-fpm8.2';
const CGI_FCGI = '/usr/bin/cgi-fcgi';
const APP = join(REPO_DIR, 'tests', 'fixtures', 'php', 'app.php');
const APP_CHAINS = {
  format_row: ['{main}', 'render_page', 'build_rows', 'format_row'],
  checksum: ['{main}', 'render_page', 'checksum'],
};

describe('php_fpm', () => {
  const dir = join(RESULTS_DIR, 'php-fpm');
  const socket = join(dir, 'fpm.sock');
  let fpm;
  let requests = 0;
  let sending = false;
  const recs = {};

  async function sendRequests() {
    const env = { ...process.env, SCRIPT_FILENAME: APP, REQUEST_METHOD: 'GET', QUERY_STRING: 'rows=2000' };
    while (sending) {
      const r = await run(CGI_FCGI, ['-bind', '-connect', socket], { env, timeoutMs: 10_000 });
      assert.equal(r.code, 0, `cgi-fcgi: ${r.stderr}`);
      requests += 1;
    }
  }
  async function recordWhileServing(label, args) {
    const file = join(RESULTS_DIR, `${label}.json.gz`);
    rmSync(file, { force: true });
    const recorder = startBackground(BPFPROF, ['record', '-v', '-F', String(FREQUENCY_HZ), '-o', file,
      ...callGraphArgs([]), ...args]);
    await untilSampling(recorder, { target: fpm });
    sending = true;
    const client = sendRequests();
    const result = await recorder.done;
    sending = false;
    await client;
    assert.equal(result.code, 0, `bpfprof failed: ${result.stderr}`);
    return { view: new ProfileView(readProfile(file)), result };
  }

  before(async () => {
    if (recorderUnavailableReason() || ![FPM, CGI_FCGI].every(existsSync)) return;
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const conf = join(dir, 'php-fpm.conf');
    writeFileSync(conf, `[global]\nerror_log = ${dir}/fpm.log\ndaemonize = no\n` +
      `[app]\nlisten = ${socket}\npm = static\npm.max_children = 2\n`);
    fpm = startBackground(FPM, ['-F', '-R', '-y', conf, '-p', dir]);
    for (let i = 0; i < 500 && !existsSync(socket); i++) await sleep(10);
    assert.ok(existsSync(socket), `php-fpm did not listen: ${fpm.stderrSoFar()}`);
    try {
      recs.attached = await recordWhileServing('php_fpm_p', ['-p', String(fpm.pid), '-d', '1.5']);
      recs.system = await recordWhileServing('php_fpm_a', ['-a', '-d', '1.5']);
    } finally {
      fpm.child.kill('SIGTERM');
      await fpm.done;
    }
  });

  for (const [key, how] of [['attached', '-p of the master'], ['system', '-a']]) {
    it(`names the script's functions in the workers started before the recording (${how})`, (t) => {
      if (!phpReady(t, [FPM, CGI_FCGI])) return;
      t.diagnostic(`${requests} requests served`);
      const workers = phpThreads(recs[key].view, /^php-fpm/);
      assert.ok(workers.length >= 2, `php-fpm threads: ${workers.map((w) => w.name).join(', ')}`);
      checkChains(t, chainCounts(recs[key].view, workers, APP_CHAINS), APP_CHAINS, { minPhp: 0, minSamples: 30 });
    });
  }
});
