// bpfprof serve as the Firefox Profiler's symbol server: a profile of inline_hot
// (-O2 -g: helper() inlined into hot_loop()) served with POST /symbolicate/v5, /source/v1 and
// /asm/v1 under the served path's unguessable prefix, the from-url link carrying
// ?symbolServer=; then the Firefox Profiler's own source and assembly fetching
// (profiler-cli function annotate) against it; and record --embed-sources, the source text in
// the profile itself.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  BPFPROF, FIXTURES, IS_CI, REPO_DIR, RESULTS_DIR, ProfileView, frameDetails, lastIndexOfName, recordFixture,
  recordWith, sleep, startBackground,
  recorderUnavailableReason, requireRecorder, withCliSession,
} from './lib/harness.mjs';

const SOURCE = join(REPO_DIR, 'tests', 'fixtures', 'inline_hot.c');

function markedLines(name) {
  const lines = readFileSync(SOURCE, 'utf8').split('\n');
  return {
    begin: lines.findIndex((l) => l.includes(`/* ${name}-begin */`)) + 1,
    end: lines.findIndex((l) => l.includes(`/* ${name}-end */`)) + 1,
  };
}

// Starts `bpfprof serve FILE`; resolves { child, url, link, symbolServer } once it printed them.
function startServe(file, env = process.env) {
  const child = spawn(BPFPROF, ['serve', file, '--no-browser'], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve printed no link:\n${out}${err}`)), 15_000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/at (http:\/\/127\.0\.0\.1:\d+\/\S+) .*\n(https:\/\/profiler\.firefox\.com\/from-url\/\S+)\n.*symbol server .* at (\S+)\n/);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1], link: m[2], symbolServer: m[3], stderr: () => err });
      }
    });
  });
}

async function post(server, endpoint, body) {
  const r = await fetch(server + endpoint, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await r.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    assert.fail(`${endpoint} answered ${r.status} with no JSON: ${text.slice(0, 200)}`);
  }
  return { status: r.status, json };
}

const hex = (n) => `0x${n.toString(16)}`;

describe('bpfprof serve: the symbol server of a profile', () => {
  const body = markedLines('helper-body');
  let rec;
  let serve;
  let helper;  // frameDetails of a sampled helper frame (inlined into hot_loop)
  let hotLoop;

  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordFixture('inline_hot', 1000, { label: 'serve_symbols_inline_hot' });
    rec.view = new ProfileView(rec.profile);
    for (const thread of rec.view.threads) {
      for (const s of rec.view.samples(thread)) {
        const i = lastIndexOfName(s.frames, 'helper');
        if (i > 0 && s.frames[i - 1].name === 'hot_loop') {
          helper = frameDetails(rec.view, s.frames[i]);
          hotLoop = frameDetails(rec.view, s.frames[i - 1]);
          break;
        }
      }
      if (helper) break;
    }
    serve = await startServe(rec.file);
  });
  after(() => serve?.child.kill('SIGINT'));

  it('prints a from-url link that carries the symbol server; both under one unguessable prefix', (t) => {
    if (!requireRecorder(t)) return;
    const m = serve.link.match(/^https:\/\/profiler\.firefox\.com\/from-url\/([^/]+)\/\?symbolServer=(\S+)$/);
    assert.ok(m, serve.link);
    assert.equal(decodeURIComponent(m[1]), serve.url);
    assert.equal(decodeURIComponent(m[2]), serve.symbolServer);
    const prefix = new URL(serve.symbolServer).pathname;
    assert.match(prefix, /^\/[0-9a-f]{32}$/);
    assert.ok(new URL(serve.url).pathname.startsWith(prefix + '/'));
  });

  it('POST /symbolicate/v5: hot_loop at a sampled address, helper inlined at a line of its body', async (t) => {
    if (!requireRecorder(t)) return;
    assert.ok(helper, 'no sample of hot_loop > helper in the profile');
    const { lib } = helper;
    const r = await post(serve.symbolServer, '/symbolicate/v5', {
      jobs: [{ memoryMap: [[lib.debugName, lib.breakpadId]], stacks: [[[0, helper.address]]] }],
    });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const result = r.json.results[0];
    assert.equal(result.found_modules[`${lib.debugName}/${lib.breakpadId}`], true);
    const frame = result.stacks[0][0];
    t.diagnostic(JSON.stringify(frame));
    assert.equal(frame.function, 'hot_loop');
    assert.equal(frame.module_offset, hex(helper.address));
    assert.equal(frame.file, hotLoop.file);
    assert.equal(frame.line, hotLoop.line);
    assert.equal(frame.inlines.length, 1);
    assert.equal(frame.inlines[0].function, 'helper');
    assert.equal(frame.inlines[0].file, SOURCE);
    assert.equal(frame.inlines[0].line, helper.line);
    assert.ok(helper.line > body.begin && helper.line < body.end, `line ${helper.line}`);
  });

  it('POST /symbolicate/v5 names every sampled address as the profile does (the program, libc with its debug file, the kernel)', async (t) => {
    if (!requireRecorder(t)) return;
    const { view, profile } = rec;
    const byLib = new Map();
    for (let f = 0; f < view.frameTable.length; f++) {
      const lib = view.frameTable.lib[f];
      if (lib === null || lib < 0 || (view.frameTable.inlineDepth?.[f] ?? 0) !== 0) continue;
      if (!byLib.has(lib)) byLib.set(lib, []);
      byLib.get(lib).push(f);
    }
    const libs = [...byLib.keys()];
    const r = await post(serve.symbolServer, '/symbolicate/v5', {
      jobs: [{
        memoryMap: libs.map((l) => [profile.libs[l].debugName, profile.libs[l].breakpadId]),
        stacks: [libs.flatMap((l, i) => byLib.get(l).map((f) => [i, view.frameTable.address[f]]))],
      }],
    });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const { stacks: [frames], found_modules: found } = r.json.results[0];
    const expected = libs.flatMap((l) => byLib.get(l).map((f) => ({
      lib: profile.libs[l],
      name: view.strings[view.funcTable.name[view.frameTable.func[f]]],
    })));
    const named = new Map();
    const mismatches = [];
    frames.forEach((frame, i) => {
      const { lib, name } = expected[i];
      // BPF programs are not served (another run has other ones).
      if (!found[`${lib.debugName}/${lib.breakpadId}`]) return;
      // Code without a name is named by its address in the profile, not by the server.
      if (name.startsWith('0x') || name.includes('+0x')) return;
      if (frame.function !== name) mismatches.push(`${lib.name} ${frame.module_offset}: ${frame.function} != ${name}`);
      named.set(lib.name, (named.get(lib.name) ?? 0) + 1);
    });
    t.diagnostic(`addresses named per library: ${JSON.stringify(Object.fromEntries(named))}`);
    assert.deepEqual(mismatches, []);
    for (const lib of ['inline_hot', 'libc.so.6', '[kernel.kallsyms]'])
      assert.ok(named.has(lib), `no address of ${lib} named: ${JSON.stringify([...named.keys()])}`);
  });

  it('POST /source/v1: the fixture\'s source, as DWARF names it; /etc/shadow and unknown libraries refused', async (t) => {
    if (!requireRecorder(t)) return;
    const { lib } = helper;
    const request = { debugName: lib.debugName, debugId: lib.breakpadId, moduleOffset: hex(helper.address), file: helper.file };
    const r = await post(serve.symbolServer, '/source/v1', request);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.file, SOURCE);
    assert.equal(r.json.source, readFileSync(SOURCE, 'utf8'));
    const shadow = await post(serve.symbolServer, '/source/v1', { ...request, file: '/etc/shadow' });
    assert.equal(shadow.status, 404);
    assert.equal(shadow.json.source, undefined);
    assert.match(shadow.json.error, /does not name \/etc\/shadow/);
    const traversal = await post(serve.symbolServer, '/source/v1', { ...request, file: SOURCE + '/../../../../etc/shadow' });
    assert.equal(traversal.status, 404);
    const unknown = await post(serve.symbolServer, '/source/v1', { ...request, debugId: 'F'.repeat(33) });
    assert.equal(unknown.status, 404);
    assert.match(unknown.json.error, /no library/);
  });

  it('POST /asm/v1: hot_loop disassembled from the binary, the sampled address an instruction of it', async (t) => {
    if (!requireRecorder(t)) return;
    const { lib } = helper;
    const symbol = rec.view.frameTable.nativeSymbol[helper.frame];
    const nativeSymbols = rec.profile.shared.nativeSymbols;
    const start = nativeSymbols.address[symbol];
    const size = nativeSymbols.functionSize[symbol];
    assert.equal(rec.view.strings[nativeSymbols.name[symbol]], 'hot_loop');
    const r = await post(serve.symbolServer, '/asm/v1', { name: lib.name, codeId: lib.codeId, startAddress: hex(start), size: hex(size) });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.startAddress, hex(start));
    assert.equal(r.json.arch, 'x86_64');
    const offsets = r.json.instructions.map(([offset]) => offset);
    t.diagnostic(`${offsets.length} instructions, e.g. ${r.json.instructions.slice(0, 3).map((i) => i[1]).join('; ')}`);
    assert.ok(offsets.includes(helper.address - start), `sampled ${hex(helper.address)} is no instruction start`);
    assert.ok(r.json.instructions.some(([, text]) => /^call /.test(text)), 'no call (to fixture_now_ns)');
  });

  it('POST /asm/v1 on libc: a sampled libc function disassembled from libc\'s own bytes', async (t) => {
    if (!requireRecorder(t)) return;
    const nativeSymbols = rec.profile.shared.nativeSymbols;
    let frame;
    for (const thread of rec.view.threads) {
      for (const s of rec.view.samples(thread)) {
        frame = s.frames.map((f) => frameDetails(rec.view, f)).find((d) => d.lib?.name === 'libc.so.6' &&
          rec.view.frameTable.nativeSymbol[d.frame] !== null && nativeSymbols.functionSize[rec.view.frameTable.nativeSymbol[d.frame]] > 0);
        if (frame) break;
      }
      if (frame) break;
    }
    assert.ok(frame, 'no sampled libc frame with a symbol');
    const symbol = rec.view.frameTable.nativeSymbol[frame.frame];
    const start = nativeSymbols.address[symbol];
    const size = nativeSymbols.functionSize[symbol];
    const { lib } = frame;
    const r = await post(serve.symbolServer, '/asm/v1', { name: lib.name, codeId: lib.codeId, startAddress: hex(start), size: hex(size) });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.arch, 'x86_64');
    const offsets = r.json.instructions.map(([offset]) => offset);
    t.diagnostic(`libc ${rec.view.strings[nativeSymbols.name[symbol]]}: ${offsets.length} instructions, e.g. ` +
                 r.json.instructions.slice(0, 3).map((i) => i[1]).join('; '));
    assert.ok(offsets.length > 0 && offsets[0] === 0, `instructions start at ${offsets[0]}`);
    assert.ok(offsets.every((o, i) => i === 0 || o > offsets[i - 1]) && offsets.at(-1) < size,
              'offsets do not rise within the function');
    // The sampled address lies within one of its instructions.
    const at = frame.address - start;
    assert.ok(at >= 0 && at < size && offsets.some((o, i) => o <= at && at < (offsets[i + 1] ?? size)),
              `sampled ${hex(frame.address)} is not in ${hex(start)}+${hex(size)}`);
  });

  it('the kernel: names from kallsyms, no source or assembly', async (t) => {
    if (!requireRecorder(t)) return;
    const kernel = rec.profile.libs.find((l) => l.name === '[kernel.kallsyms]');
    assert.ok(kernel, 'no kernel library in the profile');
    const source = await post(serve.symbolServer, '/source/v1', {
      debugName: kernel.debugName, debugId: kernel.breakpadId, moduleOffset: '0x100', file: '/etc/shadow',
    });
    assert.equal(source.status, 404);
    assert.match(source.json.error, /no source files for the kernel/);
    const asm = await post(serve.symbolServer, '/asm/v1', {
      name: kernel.name, codeId: kernel.codeId, startAddress: '0x100', size: '0x10',
    });
    assert.equal(asm.status, 404);
  });

  it('malformed requests get 400 (the server keeps serving); other paths 404', async (t) => {
    if (!requireRecorder(t)) return;
    for (const body of ['{', 'null', '{"jobs": 1}', '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]']) {
      const r = await post(serve.symbolServer, '/symbolicate/v5', body);
      assert.equal(r.status, 400, body);
      assert.ok(r.json.error);
    }
    // A large request sent as form data (curl's default) is read whole, not cut at 8 KiB.
    const { lib } = helper;
    const big = JSON.stringify({
      jobs: [{ memoryMap: [[lib.debugName, lib.breakpadId]], stacks: [Array(3000).fill([0, helper.address])] }],
    });
    const form = await fetch(serve.symbolServer + '/symbolicate/v5', {
      method: 'POST', body: big, headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(form.status, 200);
    assert.equal((await form.json()).results[0].stacks[0].length, 3000);
    const origin = new URL(serve.symbolServer).origin;
    assert.equal((await fetch(`${origin}/symbolicate/v5`, { method: 'POST', body: '{}' })).status, 404);
    assert.equal((await fetch(serve.url)).status, 200);
  });

  it('the Firefox Profiler\'s own source and assembly fetching works against it (profiler-cli function annotate)', async (t) => {
    if (!requireRecorder(t)) return;
    await withCliSession(rec.file, async (session) => {
      const list = await session.json('thread', 'functions', '--search', 'helper');
      const fn = list.functions.find((f) => f.name === 'helper');
      assert.ok(fn, `no function helper: ${JSON.stringify(list).slice(0, 400)}`);
      const handle = fn.functionHandle;
      const annotated = await session.json('function', 'annotate', handle, '--mode', 'all', '--symbol-server', serve.symbolServer);
      assert.deepEqual(annotated.warnings, []);
      // The source view: inline_hot.c's own lines, with samples on lines of helper's body.
      const src = annotated.srcAnnotation;
      assert.equal(src.filename, SOURCE);
      const fileLines = readFileSync(SOURCE, 'utf8').split('\n');
      assert.equal(src.totalFileLines, fileLines.length);
      for (const line of src.lines) assert.equal(line.sourceText, fileLines[line.lineNumber - 1]);
      const hot = src.lines.filter((l) => l.selfSamples > 0);
      t.diagnostic(`source view: samples on lines ${hot.map((l) => `${l.lineNumber} (${l.selfSamples})`).join(', ')}`);
      // An instruction at the inlined body's edge can carry the call site's line in the line
      // table while its scope is helper's (one sample of ~900 in a CI run): nearly all, not all.
      const inBody = (l) => l.lineNumber > body.begin && l.lineNumber < body.end;
      const samplesOn = (lines) => lines.reduce((n, l) => n + l.selfSamples, 0);
      assert.ok(hot.length > 0 && samplesOn(hot.filter(inBody)) >= 0.99 * samplesOn(hot),
                `helper's samples outside its body: ${samplesOn(hot.filter((l) => !inBody(l)))}`);
      // The assembly view: hot_loop's instructions, with the samples on some of them.
      const [asm] = annotated.asmAnnotations;
      assert.equal(asm.symbolName, 'hot_loop');
      assert.equal(asm.fetchError, null);
      const sampled = asm.instructions.filter((i) => i.selfSamples > 0);
      t.diagnostic(`assembly view: ${asm.instructions.length} instructions, ${sampled.length} sampled`);
      assert.ok(asm.instructions.length > 10 && sampled.length > 0);
    });
  });
});

describe('record --embed-sources: the source view without a server', () => {
  let rec;
  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordFixture('inline_hot', 800, { label: 'embed_sources_inline_hot', recordArgs: ['--embed-sources'] });
  });

  it('puts the sampled source files\' text into sources.content and says so in the summary', (t) => {
    if (!requireRecorder(t)) return;
    const { sources, stringArray } = rec.profile.shared;
    const index = sources.filename.findIndex((s) => stringArray[s] === SOURCE);
    assert.ok(index >= 0, 'inline_hot.c is not in the sources table');
    assert.equal(sources.content[index], readFileSync(SOURCE, 'utf8'));
    const embedded = sources.content.filter((c) => c !== null);
    const bytes = embedded.reduce((n, c) => n + Buffer.byteLength(c), 0);
    assert.ok(bytes <= 4 << 20, `${bytes} bytes embedded`);
    const line = (rec.result.stdout + rec.result.stderr).match(/bpfprof: embedded (\d+) source files \((\d+) KB\)[^\n]*/);
    assert.ok(line, 'the summary does not say what was embedded');
    t.diagnostic(line[0]);
    assert.equal(Number(line[1]), embedded.length);
  });

  it('the Firefox Profiler shows the source from the file alone (profiler-cli annotate, no symbol server)', async (t) => {
    if (!requireRecorder(t)) return;
    await withCliSession(rec.file, async (session) => {
      const list = await session.json('thread', 'functions', '--search', 'helper');
      const fn = list.functions.find((f) => f.name === 'helper');
      assert.ok(fn, 'no function helper');
      const annotated = await session.json('function', 'annotate', fn.functionHandle, '--mode', 'src');
      assert.deepEqual(annotated.warnings, []);
      const fileLines = readFileSync(SOURCE, 'utf8').split('\n');
      assert.equal(annotated.srcAnnotation.totalFileLines, fileLines.length);
      for (const line of annotated.srcAnnotation.lines) assert.equal(line.sourceText, fileLines[line.lineNumber - 1]);
    });
  });
});

// A library that is gone from the disk by the time the profile is served, and was stripped
// besides: serve fetches it and its debug file by build-id from the debuginfod servers of
// $DEBUGINFOD_URLS (here a local debuginfod indexing a directory), so that the functions,
// their lines and their instructions are there.
describe('bpfprof serve: libraries from debuginfod', () => {
  const dir = join(RESULTS_DIR, 'debuginfod');
  const binary = join(dir, 'run', 'gone_stripped');
  let server;
  let urls;
  let rec;
  let leaf;  // frameDetails of the most sampled frame in the gone binary

  function debuginfodAvailable(t) {
    if (!requireRecorder(t)) return false;
    if (server) return true;
    if (IS_CI) assert.fail('no debuginfod (scripts/install-deps.sh installs it)');
    t.skip('no debuginfod server binary');
    return false;
  }

  before(async () => {
    if (recorderUnavailableReason() || !existsSync('/usr/bin/debuginfod')) return;
    rmSync(dir, { recursive: true, force: true });
    for (const sub of ['run', 'served', 'cache']) mkdirSync(join(dir, sub), { recursive: true });
    const id = /Build ID: ([0-9a-f]+)/.exec((await import('node:child_process'))
      .execFileSync('readelf', ['-n', join(FIXTURES, 'stripped_buildid')], { encoding: 'utf8' }))[1];
    copyFileSync(join(FIXTURES, 'stripped_buildid'), binary);
    copyFileSync(join(FIXTURES, 'stripped_buildid'), join(dir, 'served', 'stripped_buildid'));
    copyFileSync(join(FIXTURES, 'symdir', '.build-id', id.slice(0, 2), `${id.slice(2)}.debug`),
                 join(dir, 'served', 'stripped_buildid.debug'));
    for (let attempt = 0; attempt < 5 && !urls; attempt++) {
      const port = 20000 + Math.floor(Math.random() * 20000);
      server = startBackground('/usr/bin/debuginfod', ['-F', join(dir, 'served'), '-p', String(port),
                                                        '-d', join(dir, `index-${port}.sqlite`)]);
      for (let i = 0; i < 50 && !urls; i++) {
        await sleep(200);
        try {
          const r = await fetch(`http://127.0.0.1:${port}/buildid/${id}/debuginfo`);
          if (r.status === 200) urls = `http://127.0.0.1:${port}`;
        } catch { /* not listening yet */ }
      }
      if (!urls) server.child.kill();
    }
    assert.ok(urls, 'the local debuginfod never served the debug file');
    rec = await recordWith('debuginfod_gone', ['--', binary, '800']);
    const best = new Map();
    for (const thread of rec.view.threads) {
      for (const s of rec.view.samples(thread)) {
        const f = s.frames.map((x) => frameDetails(rec.view, x)).findLast((d) => d.lib?.name === 'gone_stripped');
        if (f) best.set(f.address, { f, n: (best.get(f.address)?.n ?? 0) + s.weight });
      }
    }
    leaf = [...best.values()].sort((a, b) => b.n - a.n)[0]?.f;
    rmSync(binary);  // gone: only debuginfod has it now
  });
  after(() => server?.child.kill());

  async function symbolicate(env) {
    const serve = await startServe(rec.file, env);
    try {
      const { lib } = leaf;
      const r = await post(serve.symbolServer, '/symbolicate/v5', {
        jobs: [{ memoryMap: [[lib.debugName, lib.breakpadId]], stacks: [[[0, leaf.address]]] }],
      });
      return { r, serve, lib };
    } finally {
      serve.child.kill('SIGINT');
    }
  }

  it('without $DEBUGINFOD_URLS the gone library is not found', async (t) => {
    if (!debuginfodAvailable(t)) return;
    assert.ok(leaf, 'no sample in the stripped binary');
    const env = { ...process.env };
    delete env.DEBUGINFOD_URLS;
    const { r, lib } = await symbolicate(env);
    assert.equal(r.json.results[0].found_modules[`${lib.debugName}/${lib.breakpadId}`], false);
  });

  it('with it: function, file and line from the fetched debug file; instructions from the fetched binary', async (t) => {
    if (!debuginfodAvailable(t)) return;
    const env = { ...process.env, DEBUGINFOD_URLS: urls, DEBUGINFOD_CACHE_PATH: join(dir, 'cache') };
    const serve = await startServe(rec.file, env);
    try {
      const { lib } = leaf;
      const r = await post(serve.symbolServer, '/symbolicate/v5', {
        jobs: [{ memoryMap: [[lib.debugName, lib.breakpadId]], stacks: [[[0, leaf.address]]] }],
      });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      const frame = r.json.results[0].stacks[0][0];
      t.diagnostic(JSON.stringify(frame));
      assert.equal(frame.function, 'buildid_spin');
      assert.ok(frame.file?.endsWith('stripped_buildid.c'), frame.file);
      assert.ok(frame.line > 0);
      const start = leaf.address - parseInt(frame.function_offset, 16);
      const asm = await post(serve.symbolServer, '/asm/v1', {
        name: lib.name, codeId: lib.codeId, startAddress: hex(start), size: frame.function_size,
      });
      assert.equal(asm.status, 200, JSON.stringify(asm.json));
      const offsets = asm.json.instructions.map(([offset]) => offset);
      const at = leaf.address - start;
      const size = parseInt(frame.function_size, 16);
      assert.ok(offsets[0] === 0 && offsets.some((o, i) => o <= at && at < (offsets[i + 1] ?? size)),
                `sampled ${hex(leaf.address)} is in none of the ${offsets.length} instructions`);
      t.diagnostic(`${offsets.length} instructions of buildid_spin from debuginfod's copy`);
    } finally {
      serve.child.kill('SIGINT');
    }
  });
});
