// Crafted ELF files mapped executable by another user's process. bpfprof runs as
// root and reads every file a profiled process maps: it builds the file's unwind table from
// its CFI, reads its symbols and DWARF and unwinds through it. Any user can build such a file,
// so none may crash or hang the recorder. A process of nobody (map_exec) maps copies of
// libunwind_plt_lib.so and of libc, each corrupted one way and owned by nobody, and calls the
// library copy's lib_spin; for each way `record -- CMD`, and once `record -p` with every copy
// mapped, must end in time with a profile that loads, in which the process's own functions are
// named and their stacks reach the thread's root. A library whose CFI would take hours to read
// must be skipped at the table builder's time bound, and said.
import assert from 'node:assert/strict';
import { chmodSync, chownSync, copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

import {
  BPFPROF, FREQUENCY_HZ, ProfileView, RESULTS_DIR, checkProfileStructure, fixturePath,
  hasUserChainAtLeaf, readProfile, requireRecorder, run, sleep, startBackground,
} from './lib/harness.mjs';
import { classifyFrames } from './lib/stack_quality.mjs';
import { lcg } from './lib/workloads.mjs';

const NOBODY = 65534;
const AS_NOBODY = ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups'];
const DURATION_MS = 1500;
// Start-up, two tables (each bounded at 5 s of the builder's CPU time), the recording and
// writing the profile, on a loaded 2-CPU machine; a hang ends here.
const TIMEOUT_MS = 60_000;
const LIBRARY = fixturePath('libunwind_plt_lib.so');
const LIBC = '/lib/x86_64-linux-gnu/libc.so.6';
const OWN_CHAIN = ['main', 'spin_between_calls', 'map_exec_spin'];
// map_exec spends ~3/4 of its time in map_exec_spin (the rest in the copy's lib_spin).
const MIN_OWN_SHARE = 0.5;
const MIN_OWN_ROOT_SHARE = 0.95;

// ---------------------------------------------------------------------------------------
// Reading and corrupting ELF files (64-bit, little-endian)

function cString(bytes, at) {
  const end = bytes.indexOf(0, at);
  return bytes.toString('latin1', at, end < 0 ? bytes.length : end);
}

// Section headers (by name and by index) and load segments.
function elfLayout(bytes) {
  assert.equal(bytes.readUInt32BE(0), 0x7f454c46, 'not an ELF file');
  assert.ok(bytes[4] === 2 && bytes[5] === 1, 'not a 64-bit little-endian ELF file');
  const phoff = Number(bytes.readBigUInt64LE(0x20));
  const shoff = Number(bytes.readBigUInt64LE(0x28));
  const phentsize = bytes.readUInt16LE(0x36);
  const phnum = bytes.readUInt16LE(0x38);
  const shentsize = bytes.readUInt16LE(0x3a);
  const shnum = bytes.readUInt16LE(0x3c);
  const shstrndx = bytes.readUInt16LE(0x3e);
  const byIndex = [];
  for (let i = 0; i < shnum; i++) {
    const at = shoff + i * shentsize;
    byIndex.push({
      header: at, nameOffset: bytes.readUInt32LE(at), type: bytes.readUInt32LE(at + 4),
      offset: Number(bytes.readBigUInt64LE(at + 0x18)), size: Number(bytes.readBigUInt64LE(at + 0x20)),
      link: bytes.readUInt32LE(at + 0x28),
    });
  }
  const names = byIndex[shstrndx];
  const sections = new Map();
  for (const s of byIndex) sections.set(s.name = cString(bytes, names.offset + s.nameOffset), s);
  const segments = [];
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    segments.push({
      type: bytes.readUInt32LE(at), offset: Number(bytes.readBigUInt64LE(at + 8)),
      vaddr: Number(bytes.readBigUInt64LE(at + 0x10)), filesz: Number(bytes.readBigUInt64LE(at + 0x20)),
    });
  }
  return { phoff, phentsize, phnum, shoff, shentsize, shnum, sections, byIndex, segments };
}

// The file offset of function `name` (from .symtab, else .dynsym), or null.
function symbolFileOffset(bytes, layout, name) {
  for (const table of ['.symtab', '.dynsym']) {
    const section = layout.sections.get(table);
    if (!section) continue;
    const strings = layout.byIndex[section.link];
    for (let at = section.offset; at + 24 <= section.offset + section.size; at += 24) {
      if (cString(bytes, strings.offset + bytes.readUInt32LE(at)) !== name) continue;
      const vaddr = Number(bytes.readBigUInt64LE(at + 8));
      const load = layout.segments.find((s) => s.type === 1 && vaddr >= s.vaddr && vaddr < s.vaddr + s.filesz);
      return load ? vaddr - load.vaddr + load.offset : null;
    }
  }
  return null;
}

// Flips about one byte in 16 of [start, end) (at least 8), each XORed with a non-zero byte.
function flipBytes(bytes, start, end, rnd) {
  const flips = Math.max(8, Math.floor((end - start) / 16));
  for (let i = 0; i < flips; i++) bytes[start + rnd(end - start)] ^= 1 + rnd(255);
}

function flipSection(name) {
  return (bytes, layout, rnd) => {
    const section = layout.sections.get(name);
    if (!section) return null;
    flipBytes(bytes, section.offset, section.offset + section.size, rnd);
    return bytes;
  };
}

// Each copy gets a build-id of its own: bpfprof caches unwind tables by build-id, and a copy
// with the original's would be served the original's table instead of having its CFI read.
function changeBuildId(bytes, layout, salt) {
  const note = layout.sections.get('.note.gnu.build-id');
  if (!note) return;
  const descAt = note.offset + 16;  // namesz, descsz, type, "GNU\0"
  for (let i = 0; i < 4; i++) bytes[descAt + i] ^= (salt >> (8 * i)) & 0xff || 0x5a;
}

// How a file is corrupted: its bytes changed (or cut), or null where it has no such part.
const CRAFTS = {
  'flipped bytes in .eh_frame': flipSection('.eh_frame'),
  'flipped bytes in .eh_frame_hdr': flipSection('.eh_frame_hdr'),
  'flipped bytes in .symtab': flipSection('.symtab'),
  'flipped bytes in .dynsym': flipSection('.dynsym'),
  // The library's DWARF, read for lib_spin's frames (inline chains, lines).
  'flipped bytes in .debug_info': flipSection('.debug_info'),
  'flipped bytes in .debug_line': flipSection('.debug_line'),
  'flipped bytes in .debug_abbrev': flipSection('.debug_abbrev'),
  'flipped bytes in the program headers': (bytes, layout, rnd) => {
    flipBytes(bytes, layout.phoff, layout.phoff + layout.phnum * layout.phentsize, rnd);
    return bytes;
  },
  'build-id note claiming 4 GiB': (bytes, layout) => {
    const note = layout.sections.get('.note.gnu.build-id');
    if (!note) return null;
    bytes.writeUInt32LE(0xffffffff, note.offset + 4);  // descsz
    return bytes;
  },
  'flipped bytes in the section headers': (bytes, layout, rnd) => {
    flipBytes(bytes, layout.shoff, layout.shoff + layout.shnum * layout.shentsize, rnd);
    return bytes;
  },
  // Without its section headers (at the end): only the program headers are left.
  'truncated to 60%': (bytes) => bytes.subarray(0, Math.floor(bytes.length * 0.6)),
  '.eh_frame section header pointing outside the file': (bytes, layout) => {
    const section = layout.sections.get('.eh_frame');
    bytes.writeBigUInt64LE(BigInt(bytes.length + 0x100000), section.header + 0x18);  // sh_offset
    bytes.writeBigUInt64LE(0x40000000n, section.header + 0x20);  // sh_size: 1 GiB
    return bytes;
  },
  // e_shnum 0xfeff: section headers far past the end of the file.
  'section count 65,279': (bytes) => {
    bytes.writeUInt16LE(0xfeff, 0x3c);
    return bytes;
  },
  // Extended numbering: e_shnum 0, the count in section 0's sh_size.
  'section count 2^32 - 1': (bytes, layout) => {
    bytes.writeUInt16LE(0, 0x3c);
    bytes.writeBigUInt64LE(0xffffffffn, layout.shoff + 0x20);
    return bytes;
  },
};

function slug(label) {
  return label.replace(/[^a-z0-9]+/gi, '-').replace(/^-|-$/g, '');
}

// ---------------------------------------------------------------------------------------
// The crafted files, made once: a directory of nobody's with map_exec and, per craft, the
// library copy (to call at `@offset`) and the libc copy (mapped only).

let prepared = null;
function prepare() {
  if (prepared) return prepared;
  const dir = mkdtempSync(join(tmpdir(), 'bpfprof-untrusted-elf-'));
  chmodSync(dir, 0o755);
  const owned = (path, mode) => {
    chownSync(path, NOBODY, NOBODY);
    chmodSync(path, mode);
    return path;
  };
  // The build tree may be private: nobody runs its own copy.
  const mapExec = join(dir, 'map_exec');
  copyFileSync(fixturePath('map_exec'), mapExec);
  owned(mapExec, 0o755);
  const library = readFileSync(LIBRARY);
  const offset = symbolFileOffset(library, elfLayout(library), 'lib_spin');
  assert.ok(offset > 0, `no lib_spin in ${LIBRARY}`);
  const crafts = new Map();
  let salt = 0x1000;
  for (const [label, craft] of Object.entries(CRAFTS)) {
    const files = [];
    for (const [source, call] of [[LIBRARY, true], [LIBC, false]]) {
      const bytes = Buffer.from(readFileSync(source));
      const layout = elfLayout(bytes);
      changeBuildId(bytes, layout, ++salt);
      const crafted = craft(bytes, layout, lcg(salt));
      if (!crafted) continue;
      const path = join(dir, `${slug(label)}-${source === LIBC ? 'libc.so.6' : 'lib.so'}`);
      writeFileSync(path, crafted);
      owned(path, 0o644);
      files.push(call ? `${path}@0x${offset.toString(16)}` : path);
    }
    crafts.set(label, files);
  }
  // A cache of our own: the copies' tables (kept by their made-up build-ids) stay out of the
  // machine's cache.
  const cache = join(dir, 'cache');
  prepared = { dir, mapExec, crafts, env: { ...process.env, BPFPROF_CACHE_DIR: cache } };
  return prepared;
}

after(() => {
  if (prepared) rmSync(prepared.dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------
// Checks

function summaryLine(stderr, label) {
  return stderr.split('\n').find((l) => l.startsWith(`bpfprof: ${label}`)) ?? `(no '${label}' line)`;
}

// The profile loads; map_exec's own functions are named (main > spin_between_calls >
// map_exec_spin at the leaf) in most of its on-CPU samples, and those stacks reach the root.
function checkOwnStacks(t, label, file, result, expectCode = 0) {
  const describeRun = `${label}\nexit ${result.code} signal ${result.signal} in ${result.ms} ms\n` +
                      `stderr:\n${result.stderr}`;
  assert.equal(result.code, expectCode, `recording failed: ${describeRun}`);
  const view = new ProfileView(readProfile(file));
  checkProfileStructure(view);
  const threads = view.threads.filter((th) => th.processName === 'map_exec');
  assert.ok(threads.length > 0, `no map_exec thread in the profile: ${describeRun}`);
  let user = 0;
  let own = 0;
  let ownRoot = 0;
  const elsewhere = { root: 0, truncated: 0, silent: 0 };
  for (const thread of threads) {
    for (const s of view.samples(thread)) {
      const kind = classifyFrames(s.frames);
      if (!['root', 'truncated', 'silent'].includes(kind)) continue;
      user += s.weight;
      if (hasUserChainAtLeaf(s.frames, OWN_CHAIN)) {
        own += s.weight;
        if (kind === 'root') ownRoot += s.weight;
      } else {
        elsewhere[kind] += s.weight;
      }
    }
  }
  const pct = (x, of) => `${(100 * x / Math.max(of, 1)).toFixed(1)}%`;
  t.diagnostic(`${label}: exit ${result.code} in ${result.ms} ms; ${user} on-CPU user samples, ` +
               `own functions ${pct(own, user)} (reaching the root: ${pct(ownRoot, own)}); the rest ` +
               `(lib_spin in the copy, start-up): ${JSON.stringify(elsewhere)}`);
  t.diagnostic(summaryLine(result.stderr, 'Unwind tables:'));
  t.diagnostic(summaryLine(result.stderr, 'User stacks unwound in the kernel'));
  assert.ok(user >= 200, `only ${user} on-CPU user samples of map_exec: ${describeRun}`);
  assert.ok(own / user >= MIN_OWN_SHARE,
            `map_exec's own functions in ${pct(own, user)} of its samples (want ${pct(MIN_OWN_SHARE, 1)}): ` +
            `top stacks ${JSON.stringify(threads.flatMap((th) => view.topStacks(th)))}`);
  assert.ok(ownRoot / own >= MIN_OWN_ROOT_SHARE,
            `${pct(ownRoot, own)} of map_exec's own stacks reach the root (want ${pct(MIN_OWN_ROOT_SHARE, 1)})`);
}

// Until map_exec (startBackground) has mapped `path`.
async function untilMapped(target, path) {
  for (let waited = 0; !readFileSync(`/proc/${target.pid}/maps`, 'utf8').includes(path); waited += 20) {
    assert.ok(waited < 10_000 && !target.exited(), `map_exec did not map ${path}: ${target.stderrSoFar()}`);
    await sleep(20);
  }
}

describe('crafted ELF files mapped executable by another user\'s process', () => {
  for (const label of Object.keys(CRAFTS)) {
    it(`${label}: record -- CMD ends in time; own stacks named and whole`, async (t) => {
      if (!requireRecorder(t)) return;
      const { mapExec, crafts, env } = prepare();
      const file = join(RESULTS_DIR, `untrusted-elf-${slug(label)}.json.gz`);
      rmSync(file, { force: true });
      const result = await run(BPFPROF, [
        'record', '-v', '-F', String(FREQUENCY_HZ), '-o', file, '--',
        ...AS_NOBODY, mapExec, String(DURATION_MS), ...crafts.get(label),
      ], { timeoutMs: TIMEOUT_MS, env });
      checkOwnStacks(t, label, file, result);
    });
  }

  // A library of one function whose FDE holds `rows` rows, as another user could build and map
  // it; `record -p` of map_exec mapping it, for -d 3.
  async function recordCfiBomb(t, name, rows, writeSource) {
    const { dir, mapExec, env } = prepare();
    const source = join(dir, `${name}.S`);
    writeFileSync(source, writeSource(rows));
    const bomb = join(dir, `lib${name}.so`);
    const built = await run('cc', ['-shared', '-o', bomb, source], { timeoutMs: TIMEOUT_MS });
    assert.equal(built.code, 0, built.stderr);
    chownSync(bomb, NOBODY, NOBODY);
    const target = startBackground(AS_NOBODY[0], [...AS_NOBODY.slice(1), mapExec, '60000', bomb]);
    try {
      await untilMapped(target, bomb);
      const file = join(RESULTS_DIR, `untrusted-elf-${name}.json.gz`);
      rmSync(file, { force: true });
      const started = Date.now();
      const result = await run(BPFPROF, ['record', '-v', '-F', String(FREQUENCY_HZ), '-p', String(target.pid),
                                         '-d', '3', '-o', file], { timeoutMs: TIMEOUT_MS, env });
      result.ms = Date.now() - started;
      checkOwnStacks(t, name, file, result);
      return { bomb, file, result };
    } finally {
      target.child.kill('SIGKILL');
      await target.done;
    }
  }

  // One FDE of 500,000 rows: a reader that runs an FDE's program from its start for each row
  // (libdw's dwarf_cfi_addrframe, which built the tables before) would take hours on it, and the
  // builder gave up at its time bound (5 s). Read in one pass, it is a table like any other.
  it('CFI quadratic for a row-by-row reader: built in one pass, well within the time bound', async (t) => {
    if (!requireRecorder(t)) return;
    const { result } = await recordCfiBomb(t, 'cfi_quadratic', 500_000, (rows) => {
      const lines = ['.section .note.GNU-stack,"",@progbits', '.text', '.globl cfi_bomb',
                     '.type cfi_bomb,@function', 'cfi_bomb:', '.cfi_startproc'];
      for (let i = 0; i < rows; i++) lines.push('nop', `.cfi_adjust_cfa_offset ${i % 2 ? -8 : 8}`);
      lines.push('ret', '.cfi_endproc', '.size cfi_bomb,.-cfi_bomb', '');
      return lines.join('\n');
    });
    const tables = /^bpfprof: Unwind tables: (\d+) built, (\d+) from cache, \d+ unreadable \(([\d.]+) ms of CPU\)/m.exec(result.stderr);
    assert.ok(tables, result.stderr);
    t.diagnostic(`${tables[1]} tables built, ${tables[2]} from the cache, in ${tables[3]} ms`);
    assert.doesNotMatch(result.stderr, /Unwind tables skipped/);
    assert.ok(Number(tables[3]) < 3000, `tables took ${tables[3]} ms (the time bound is 5 s)`);
  });

  // Past the row bound (8,000,000 CFI rows, one byte of code each): skipped, and said, within
  // the recording, whatever the CFI reader's speed.
  it('CFI past the row bound: the table is skipped, and said', async (t) => {
    if (!requireRecorder(t)) return;
    const rows = 8_000_001;
    const { bomb, file, result } = await recordCfiBomb(t, 'cfi_rows', rows, (n) => [
      '.section .note.GNU-stack,"",@progbits', '.text', '.globl cfi_rows', '.type cfi_rows,@function',
      'cfi_rows:', '.cfi_startproc', `.rept ${n}`, '.cfi_escape 0x41', '.endr',  // advance_loc 1
      `.fill ${n + 1}, 1, 0x90`, 'ret', '.cfi_endproc', '.size cfi_rows,.-cfi_rows', ''].join('\n'));
    const escaped = bomb.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const said = `1 \\(past 8,000,000 rows\\): ${escaped}`;
    assert.match(result.stderr, new RegExp(`^bpfprof: Unwind tables skipped: ${said}`, 'm'));
    const extra = (readProfile(file).meta.extra ?? []).flatMap((group) => group.entries ?? [group]);
    assert.match(extra.find((e) => e.label === 'Unwind tables skipped')?.value ?? '', new RegExp(`^${said}`));
  });

  it('every crafted file at once, record -p: ends at -d; own stacks named and whole', async (t) => {
    if (!requireRecorder(t)) return;
    const { mapExec, crafts, env } = prepare();
    const files = [...crafts.values()].flat();
    const target = startBackground(AS_NOBODY[0], [...AS_NOBODY.slice(1), mapExec, '60000', ...files]);
    try {
      await untilMapped(target, files[files.length - 1].replace(/@.*$/, ''));
      const file = join(RESULTS_DIR, 'untrusted-elf-attach.json.gz');
      rmSync(file, { force: true });
      const result = await run(BPFPROF, [
        'record', '-v', '-F', String(FREQUENCY_HZ), '-d', '2', '-p', String(target.pid), '-o', file,
      ], { timeoutMs: TIMEOUT_MS, env });
      checkOwnStacks(t, `-p with ${files.length} crafted files`, file, result);
      assert.ok(!target.exited(), `map_exec ended under the recording: ${target.stderrSoFar()}`);
    } finally {
      target.child.kill('SIGKILL');
      await target.done;
    }
  });
});
