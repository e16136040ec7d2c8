// --upload URL: each profile written (every --switch-output period, and the last) goes as
// pprof to a Pyroscope-compatible /ingest endpoint. A small HTTP receiver here checks the
// requests and reads their bodies with go tool pprof; receivers that are down, slow (10 s)
// or answer 500 must not lose the recording or hold up its end. Runs once (not about
// unwinding).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import {
  BPFPROF, FREQUENCY_HZ, IS_CI, RESULTS_DIR, fixturePath, readProfile, requireRecorder, run,
} from './lib/harness.mjs';

const RUN_MS = 2500;

// A receiver that answers each request with `respond(req, res)`; resolves { url, requests, close }.
function startReceiver(respond) {
  const requests = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      requests.push({ method: req.method, url: new URL(req.url, 'http://x'), body: Buffer.concat(chunks) });
      respond(req, res);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const url = `http://127.0.0.1:${server.address().port}`;
      resolve({
        url, requests,
        close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
      });
    });
  });
}

function freshDir(name) {
  const dir = join(RESULTS_DIR, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

// Records busy for RUN_MS with 1 s periods, uploading to `url`; returns the run, its files
// and how long it took.
async function recordUploading(dir, url) {
  const started = Date.now();
  const result = await run(BPFPROF, ['record', '-F', String(FREQUENCY_HZ), '--no-off-cpu',
                                     '--switch-output', '1s', '--upload', url,
                                     '-o', join(dir, 'up.json.gz'), '--', fixturePath('busy'), String(RUN_MS)]);
  const files = readdirSync(dir).filter((f) => /^up\.\d{8}T\d{6}Z(-\d+)?\.json\.gz$/.test(f));
  return { result, files, ms: Date.now() - started };
}

function goPprofTop(file) {
  const r = spawnSync('go', ['tool', 'pprof', '-top', '-sample_index=samples', file], {
    encoding: 'utf8', env: { ...process.env, HOME: RESULTS_DIR },
  });
  assert.equal(r.status, 0, `go tool pprof -top ${file}:\n${r.stderr}`);
  return r.stdout;
}

describe('--upload', () => {
  it('sends every profile to /ingest as pprof that go tool pprof reads', async (t) => {
    if (!requireRecorder(t)) return;
    if (spawnSync('go', ['version']).status !== 0) {
      if (IS_CI) assert.fail('go (golang-go) is missing');
      t.skip('no go');
      return;
    }
    const receiver = await startReceiver((req, res) => res.writeHead(200).end());
    const dir = freshDir('upload-ok');
    const { result, files } = await recordUploading(dir, receiver.url);
    await receiver.close();
    assert.equal(result.code, 0, result.stderr);
    assert.equal(receiver.requests.length, files.length, `${receiver.requests.length} requests for ${files.length} files\n${result.stderr}`);
    let samples = 0;
    receiver.requests.forEach((r, i) => {
      assert.equal(r.method, 'POST');
      assert.equal(r.url.pathname, '/ingest');
      const q = r.url.searchParams;
      assert.match(q.get('name'), /^bpfprof\.cpu\{host=[^}]+\}$/);
      assert.equal(q.get('format'), 'pprof');
      assert.equal(q.get('sampleRate'), String(FREQUENCY_HZ));
      assert.ok(Number(q.get('from')) > 1.6e9 && Number(q.get('from')) <= Number(q.get('until')), r.url.search);
      const body = join(dir, `request${i}.pb`);
      writeFileSync(body, r.body);
      const top = goPprofTop(body);
      samples += Number(top.match(/of (\d+) total/)?.[1] ?? 0);
      if (/inner_spin/.test(top)) r.hasSpin = true;
    });
    assert.ok(receiver.requests.some((r) => r.hasSpin), 'busy\'s inner_spin is in the uploads');
    // The uploads hold what the files hold (each file's count rounded once).
    let inFiles = 0;
    for (const f of files) {
      for (const th of readProfile(join(dir, f)).threads)
        for (let i = 0; i < th.samples.length; i++) inFiles += th.samples.weight ? th.samples.weight[i] : 1;
    }
    t.diagnostic(`${receiver.requests.length} uploads, ${samples} samples; the files ${inFiles}`);
    assert.ok(samples > 0 && Math.abs(samples - inFiles) <= files.length, `${samples} uploaded, ${inFiles} in the files`);
  });

  for (const [label, respond, down] of [
    ['down', null, true],
    ['slow (10 s)', (req, res) => setTimeout(() => res.writeHead(200).end(), 10_000), false],
    ['answering 500', (req, res) => res.writeHead(500).end('no'), false],
  ]) {
    it(`a backend ${label} loses no profile and does not hold up the end`, async (t) => {
      if (!requireRecorder(t)) return;
      let receiver = await startReceiver(respond ?? ((req, res) => res.end()));
      const { url, requests } = receiver;
      if (down) {
        await receiver.close();
        receiver = null;
      }
      const dir = freshDir(`upload-${label.split(' ')[0]}`);
      const { result, files, ms } = await recordUploading(dir, url);
      await receiver?.close();
      assert.equal(result.code, 0, result.stderr);
      assert.ok(files.length >= 2, `${files.join(' ')}\n${result.stderr}`);
      // The recording, its writing, and at most the uploader's 5 s wait at the end.
      assert.ok(ms < RUN_MS + 12_000, `took ${ms} ms\n${result.stderr}`);
      assert.match(result.stderr, /uploaded \d+ profiles .*(failed|dropped)/, result.stderr);
      if (label.startsWith('answering')) {
        // A 5xx answer is retried: more requests than profiles.
        const profiles = new Set(requests.map((r) => r.url.search));
        assert.ok(requests.length > profiles.size, `${requests.length} requests, ${profiles.size} profiles`);
      }
    });
  }
});
