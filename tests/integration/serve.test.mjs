// bpfprof serve: the profile on 127.0.0.1 with CORS for profiler.firefox.com's
// from-url, its link printed; nothing but that one file is served (and, as the symbol
// server: serve_symbols.test.mjs). Needs no root, but for opening the browser as another user.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';

import { BPFPROF, RESULTS_DIR, requireRecorder, sleep } from './lib/harness.mjs';

function rawRequest(port, text) {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let data = '';
    socket.on('data', (d) => { data += d; });
    socket.on('end', () => resolve(data));
    socket.on('error', reject);
  });
}

describe('bpfprof serve', () => {
  const file = join(RESULTS_DIR, 'serve me.json.gz');
  const bytes = gzipSync(Buffer.from('{"meta":{"version":36},"threads":[]}'));
  let child;
  let url;
  let link;

  before(async () => {
    writeFileSync(file, bytes);
    child = spawn(BPFPROF, ['serve', file, '--no-browser'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no link printed: ${out}`)), 10_000);
      child.stdout.on('data', (d) => {
        out += d;
        const m = out.match(/at (http:\/\/127\.0\.0\.1:\d+\/\S+) .*\n(https:\/\/profiler\.firefox\.com\/from-url\/\S+)\n/);
        if (m) {
          [, url, link] = m;
          clearTimeout(timer);
          resolve();
        }
      });
    });
  });

  after(() => child?.kill('SIGINT'));

  it('prints the from-url link of the served URL, under an unguessable prefix', () => {
    const encoded = link.slice('https://profiler.firefox.com/from-url/'.length).split('/?symbolServer=')[0];
    assert.equal(decodeURIComponent(encoded), url);
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/[0-9a-f]{32}\/serve%20me\.json\.gz$/);
  });

  it('serves the file as it is, with CORS', async () => {
    const r = await fetch(url);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('access-control-allow-origin'), '*');
    assert.deepEqual(Buffer.from(await r.arrayBuffer()), readFileSync(file));
    const pre = await fetch(url, { method: 'OPTIONS' });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), '*');
  });

  it('serves nothing else: other paths and traversal get 404', async () => {
    const port = Number(new URL(url).port);
    assert.equal((await fetch(`http://127.0.0.1:${port}/`)).status, 404);
    assert.equal((await fetch(`http://127.0.0.1:${port}/other.json.gz`)).status, 404);
    assert.equal((await fetch(`http://127.0.0.1:${port}/serve%20me.json.gz`)).status, 404);  // no prefix
    const raw = await rawRequest(port, 'GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.match(raw, /^HTTP\/1\.1 404/);
    // The profile's path is no endpoint of the symbol server; a POST without a length is refused.
    const post = await rawRequest(port, `POST ${new URL(url).pathname} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}`);
    assert.match(post, /^HTTP\/1\.1 404/);
    const noLength = await rawRequest(port, `POST ${new URL(url).pathname} HTTP/1.1\r\nHost: x\r\n\r\n`);
    assert.match(noLength, /^HTTP\/1\.1 4\d\d/);
  });

  it('a file that cannot be read: one line, exit 2', async () => {
    const r = await new Promise((resolve) => {
      const c = spawn(BPFPROF, ['serve', join(RESULTS_DIR, 'missing.json.gz')], { stdio: ['ignore', 'pipe', 'pipe'] });
      let err = '';
      c.stderr.on('data', (d) => { err += d; });
      c.on('close', (code) => resolve({ code, err }));
    });
    assert.equal(r.code, 2);
    assert.match(r.err, /^bpfprof: cannot read .*missing\.json\.gz: No such file or directory\n$/);
  });

  // Under sudo the browser runs as the user who ran sudo, never as root: $BROWSER
  // here is a script that writes who it runs as and the link it was given.
  it('opens the link with $BROWSER as the invoking user, not root', async (t) => {
    if (!requireRecorder(t)) return;  // becoming another user needs root
    const dir = mkdtempSync(join(RESULTS_DIR, 'browser-'));
    chmodSync(dir, 0o777);
    const browser = join(dir, 'browser.sh');
    const seen = join(dir, 'seen');
    writeFileSync(browser, `#!/bin/sh\necho "$(id -u) $(id -g) $1" > ${seen}\n`, { mode: 0o755 });
    const c = spawn(BPFPROF, ['serve', file], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, BROWSER: browser, SUDO_UID: '65534', SUDO_GID: '65534', SUDO_USER: 'nobody' },
    });
    let out = '';
    c.stdout.on('data', (d) => { out += d; });
    try {
      for (let i = 0; i < 100 && !existsSync(seen); i++) await sleep(100);
      const [uid, gid, opened] = readFileSync(seen, 'utf8').trim().split(' ');
      assert.equal(uid, '65534');
      assert.equal(gid, '65534');
      assert.match(opened, /^https:\/\/profiler\.firefox\.com\/from-url\//);
      assert.ok(out.includes(opened), `the printed link is the one opened:\n${out}`);
    } finally {
      c.kill('SIGINT');
    }
  });
});
