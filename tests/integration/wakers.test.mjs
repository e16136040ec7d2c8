// Who woke me: every wait of at least --wake-threshold (default one interval) that
// something ended gets an interval marker on the waiting thread, from the switch-out to the
// waking, of type bpfprof-woken: data.state, data.duration, data.waker ("comm (tid)", or the
// interrupt context and the kernel function that woke it), data.wakerThread, data.wakerTid,
// data.wakerProcess, and data.cause = {stack, time}: the waker's stack when it woke the thread.
//
// Fixture (tests/fixtures/wakers.c), five scenarios at once:
//   acc-consumer waits on a condition variable that acc-producer signals in hand_over();
//   ping (a thread) and pong (a child process) write to each other through pipes, each 2 ms
//     after the other's byte came;
//   sleeper sleeps 3 ms at a time in nanosleep (a timer ends each wait);
//   pipe-reader reads what pipe-writer (another child process) writes every 100 ms;
//   udp-reader receives the datagrams udp-writer sends over loopback every 5 ms (the network's
//     softirq, run on the interrupt stack at the end of the send, delivers and wakes).
// It prints `waits name=<thread> tid=<tid> count=<n>` and `process name=<n> pid=<pid>`.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import {
  CliSession, FREQUENCY_HZ, ProfileView, checkProfileStructure, fixturePath, pct, recordFixture,
  recordWith, recorderUnavailableReason, requireRecorder, saveMetrics, sleep, startBackground,
} from './lib/harness.mjs';

const RUN_MS = 1500;
const WOKEN_TYPE = 'bpfprof-woken';

const metrics = { frequencyHz: FREQUENCY_HZ };
after(() => {
  if (Object.keys(metrics).length > 1) saveMetrics('wakers', metrics);
});

function parseFixture(stdout) {
  const waits = new Map();
  for (const m of stdout.matchAll(/^waits name=(\S+) tid=(\d+) count=(\d+)$/gm))
    waits.set(m[1], { tid: Number(m[2]), count: Number(m[3]) });
  const processes = new Map();
  for (const m of stdout.matchAll(/^process name=(\S+) pid=(\d+)$/gm)) processes.set(m[1], Number(m[2]));
  for (const name of ['acc-consumer', 'ping', 'sleeper', 'pipe-reader', 'udp-reader'])
    assert.ok(waits.has(name), `the fixture printed no waits line for ${name}:\n${stdout}`);
  for (const name of ['pong', 'pipe-writer'])
    assert.ok(processes.has(name), `the fixture printed no process line for ${name}:\n${stdout}`);
  return { waits, processes };
}

// The woken markers of a thread: [{ start, end, data, causeFrames }].
function wokenMarkers(view, thread) {
  const m = thread.markers;
  const out = [];
  for (let i = 0; i < m.length; i++) {
    const data = m.data[i];
    if (!data || data.type !== WOKEN_TYPE) continue;
    out.push({ name: view.strings[m.name[i]], start: m.startTime[i], end: m.endTime[i], phase: m.phase[i],
               data, causeFrames: data.cause ? view.frames(data.cause.stack) : [] });
  }
  return out;
}

function threadNamed(view, tid, name) {
  const found = view.threads.filter((t) => String(t.tid) === String(tid));
  assert.equal(found.length, 1, `want one thread with tid ${tid} (${name}), found ${found.length}`);
  assert.equal(found[0].name, name);
  return found[0];
}

function summary(markers, limit = 3) {
  return markers.slice(0, limit).map((k) => `${k.name} ${k.data.duration.toFixed(2)} ms ` +
    `[${k.causeFrames.slice(-6).map((f) => f.name).join(' > ')}]`).join('\n  ');
}

// Records `args` (-p or -a, 1.5 s) while the fixture runs, started 300 ms before: { rec,
// fixture }. The fixture outlives the recording by seconds: a loaded machine (CI's) can take
// two seconds to load the recorder's BPF programs, and the attach must find it running.
async function recordRunningFixture(label, args, env = process.env) {
  const target = startBackground(fixturePath('wakers'), ['3500'], { env });
  await sleep(300);
  const rec = await recordWith(label, typeof args === 'function' ? args(target.pid) : args);
  const done = await target.done;
  assert.equal(done.code, 0, `the fixture failed:\n${done.stderr}`);
  return { rec, fixture: parseFixture(done.stdout) };
}

// The consumer's woken markers, and those that name acc-producer through hand_over.
function consumerMarkers(view, fixture) {
  const markers = wokenMarkers(view, threadNamed(view, fixture.waits.get('acc-consumer').tid, 'acc-consumer'));
  const named = markers.filter((k) => k.data.wakerThread === 'acc-producer' &&
                                      k.causeFrames.some((f) => f.name === 'hand_over'));
  return { markers, named };
}

describe('wakers: who woke each wait', () => {
  let rec;
  let view;
  let fixture;
  const m = (metrics.wakers = {});

  before(async () => {
    if (recorderUnavailableReason()) return;
    rec = await recordFixture('wakers', RUN_MS, { label: 'wakers' });
    view = new ProfileView(rec.profile);
    fixture = parseFixture(rec.result.stdout);
  });

  it('declares the marker schema and writes interval markers with a cause', (t) => {
    if (!requireRecorder(t)) return;
    for (const w of checkProfileStructure(view)) t.diagnostic(`note: ${w}`);
    const schema = rec.profile.meta.markerSchema.find((s) => s.name === WOKEN_TYPE);
    assert.ok(schema, `no ${WOKEN_TYPE} schema in meta.markerSchema`);
    const keys = schema.fields.map((f) => f.key);
    for (const key of ['state', 'duration', 'waker', 'wakerThread', 'wakerTid', 'wakerProcess'])
      assert.ok(keys.includes(key), `schema lacks ${key}: ${JSON.stringify(keys)}`);
    const consumer = threadNamed(view, fixture.waits.get('acc-consumer').tid, 'acc-consumer');
    const markers = wokenMarkers(view, consumer);
    assert.ok(markers.length > 0, 'acc-consumer has no woken markers');
    for (const k of markers) {
      assert.equal(k.phase, 1, 'a woken marker is not an interval');
      assert.ok(k.end >= k.start, `marker ends (${k.end}) before it starts (${k.start})`);
      assert.ok(Math.abs(k.end - k.start - k.data.duration) < 0.01, 'duration is not end - start');
      assert.ok(k.data.duration >= 1000 / FREQUENCY_HZ, `a ${k.data.duration} ms wait is below the threshold`);
      assert.ok(['sleeping', 'I/O wait'].includes(k.data.state), `state ${k.data.state}`);
    }
    const stderr = rec.result.stderr;
    assert.match(stderr, /wakeups of profiled threads; waker stacks \d+ taken, \d+ reused/);
    assert.match(stderr, /top wakers of wakers \(\d+\): .*acc-producer/);
    assert.match(stderr, /top wakers of wakers \(\d+\): .*interrupt: hrtimer_wakeup \d/);
  });

  it("the consumer's waits name the producer, with hand_over in the cause stack (>= 90%)", (t) => {
    if (!requireRecorder(t)) return;
    const waits = fixture.waits.get('acc-consumer');
    const producer = rec.result.stdout.match(/^cputime tid=(\d+) name=acc-producer /m);
    assert.ok(producer, 'no cputime line for acc-producer');
    const producerTid = Number(producer[1]);
    const markers = wokenMarkers(view, threadNamed(view, waits.tid, 'acc-consumer'));
    const good = markers.filter((k) => k.data.wakerTid === producerTid && k.data.wakerThread === 'acc-producer' &&
                                       k.causeFrames.some((f) => f.name === 'hand_over'));
    const share = good.length / waits.count;
    Object.assign(m, { consumerWaits: waits.count, consumerMarkers: markers.length, consumerNamed: good.length });
    t.diagnostic(`acc-consumer: ${waits.count} waits, ${markers.length} woken markers, ${good.length} by ` +
                 `acc-producer (${producerTid}) through hand_over = ${pct(share)}\n  ${summary(markers)}`);
    const other = markers.filter((k) => !good.includes(k));
    if (other.length) t.diagnostic(`others:\n  ${summary(other, 5)}`);
    assert.ok(share >= 0.9, `only ${pct(share)} of the consumer's ${waits.count} waits name the producer with hand_over`);
  });

  it('ping and pong, two processes, name each other', (t) => {
    if (!requireRecorder(t)) return;
    const ping = fixture.waits.get('ping');
    const pongPid = fixture.processes.get('pong');
    const pingThread = threadNamed(view, ping.tid, 'ping');
    const byPong = wokenMarkers(view, pingThread).filter(
      (k) => k.data.wakerThread === 'pong' && k.data.wakerTid === pongPid &&
             k.data.wakerProcess.endsWith(`(${pongPid})`) &&
             k.causeFrames.some((f) => f.name === 'send_byte'));
    const pongThread = threadNamed(view, pongPid, 'pong');
    const byPing = wokenMarkers(view, pongThread).filter(
      (k) => k.data.wakerThread === 'ping' && k.data.wakerTid === ping.tid &&
             k.data.wakerProcess.endsWith(`(${pingThread.pid})`) &&
             k.causeFrames.some((f) => f.name === 'send_byte'));
    Object.assign(m, { pingWaits: ping.count, pingByPong: byPong.length, pongByPing: byPing.length });
    t.diagnostic(`ping: ${ping.count} round trips; ${byPong.length} of its waits woken by pong ` +
                 `(${pongPid}) from send_byte; pong: ${byPing.length} woken by ping`);
    assert.ok(byPong.length >= 0.9 * ping.count, `ping: ${byPong.length} of ${ping.count} waits name pong`);
    assert.ok(byPing.length >= 0.9 * ping.count, `pong: ${byPing.length} of ${ping.count} waits name ping`);
  });

  it('a timer wakeup names the interrupt and the timer, not a thread', (t) => {
    if (!requireRecorder(t)) return;
    const sleeper = fixture.waits.get('sleeper');
    const markers = wokenMarkers(view, threadNamed(view, sleeper.tid, 'sleeper'));
    const byTimer = markers.filter((k) => k.data.wakerTid === undefined && !k.data.wakerProcess &&
                                          /^interrupt: hrtimer_wakeup$/.test(k.data.waker));
    const byThread = markers.filter((k) => k.data.wakerTid !== undefined);
    Object.assign(m, { sleeperWaits: sleeper.count, sleeperMarkers: markers.length, sleeperByTimer: byTimer.length });
    t.diagnostic(`sleeper: ${sleeper.count} nanosleeps, ${markers.length} woken markers, ${byTimer.length} by ` +
                 `the timer, ${byThread.length} by a thread\n  ${summary(markers)}`);
    assert.ok(byTimer.length >= 0.9 * sleeper.count, `only ${byTimer.length} of ${sleeper.count} sleeps name the timer`);
    assert.ok(byThread.length <= 0.02 * sleeper.count, `${byThread.length} of the sleeper's waits name a thread`);
  });

  it('a datagram over loopback names the softirq that delivered it, not a thread', (t) => {
    if (!requireRecorder(t)) return;
    const reader = fixture.waits.get('udp-reader');
    const markers = wokenMarkers(view, threadNamed(view, reader.tid, 'udp-reader'));
    const bySoftirq = markers.filter((k) => k.data.waker === 'softirq: sock_def_readable' &&
                                            k.data.wakerTid === undefined &&
                                            k.causeFrames.some((f) => f.name === 'net_rx_action'));
    const byThread = markers.filter((k) => k.data.wakerTid !== undefined);
    Object.assign(m, { udpWaits: reader.count, udpMarkers: markers.length, udpBySoftirq: bySoftirq.length });
    t.diagnostic(`udp-reader: ${reader.count} datagrams, ${markers.length} woken markers, ${bySoftirq.length} ` +
                 `by the softirq through net_rx_action, ${byThread.length} by a thread\n  ${summary(markers)}`);
    assert.ok(bySoftirq.length >= 0.9 * reader.count,
              `only ${bySoftirq.length} of ${reader.count} waits name the softirq`);
    assert.ok(byThread.length <= 0.02 * reader.count, `${byThread.length} of the reader's waits name a thread`);
  });

  it('the pipe reader names the writer process', (t) => {
    if (!requireRecorder(t)) return;
    const reader = fixture.waits.get('pipe-reader');
    const writerPid = fixture.processes.get('pipe-writer');
    const markers = wokenMarkers(view, threadNamed(view, reader.tid, 'pipe-reader'));
    const byWriter = markers.filter((k) => k.data.wakerThread === 'pipe-writer' && k.data.wakerTid === writerPid &&
                                           k.data.wakerProcess.endsWith(`(${writerPid})`) &&
                                           k.causeFrames.some((f) => f.name === 'writer_main'));
    Object.assign(m, { readerWaits: reader.count, readerByWriter: byWriter.length });
    t.diagnostic(`pipe-reader: ${reader.count} reads, ${byWriter.length} woken by pipe-writer (${writerPid})\n  ` +
                 summary(byWriter));
    assert.ok(reader.count >= 5, `the reader got only ${reader.count} bytes`);
    assert.ok(byWriter.length >= reader.count - 1, `${byWriter.length} of ${reader.count} reads name the writer`);
    for (const k of byWriter)
      assert.ok(k.data.duration > 50, `a wait for the writer took ${k.data.duration} ms, want ~100`);
  });

  it('profiler-cli loads it, lists the markers and shows the cause stack', async (t) => {
    if (!requireRecorder(t)) return;
    const session = await CliSession.load(rec.file);
    try {
      const list = await session.threadList();
      const consumer = list.find((e) => e.name === 'acc-consumer');
      assert.ok(consumer, 'profiler-cli lists no acc-consumer thread');
      const markers = await session.json('thread', 'markers', '--thread', consumer.threadHandle, '--list',
                                         '--limit', '0');
      const text = JSON.stringify(markers);
      const listed = (text.match(/Woken by acc-producer/g) ?? []).length;
      t.diagnostic(`profiler-cli: ${listed} "Woken by acc-producer" markers on ${consumer.threadHandle}`);
      const expected = wokenMarkers(view, view.threads[consumer.threadIndex])
        .filter((k) => k.name.startsWith('Woken by acc-producer')).length;
      assert.ok(listed >= expected && expected > 0, `profiler-cli lists ${listed} markers, the file has ${expected}`);
      const handle = text.match(/"(m-\d+)"/)?.[1];
      assert.ok(handle, `no marker handle in ${text.slice(0, 400)}`);
      const stack = await session.json('marker', 'stack', handle);
      const stackText = JSON.stringify(stack);
      t.diagnostic(`profiler-cli marker stack ${handle}: ${stackText.slice(0, 300)}`);
      assert.match(stackText, /hand_over/, 'profiler-cli shows no hand_over in the cause stack');
    } finally {
      await session.stop();
    }
  });
});

// -p takes the fixture's children forked before the attach (pipe-writer), but not pong, started
// here so that it is not the fixture's child (as a process another program started): pong is
// still named as a waker, by thread name, tid and pid, with its kernel stack only.
describe('wakers with -p', () => {
  let rec;
  let fixture;
  const m = (metrics.attach = {});

  before(async () => {
    if (recorderUnavailableReason()) return;
    ({ rec, fixture } = await recordRunningFixture('wakers_attach', (pid) => ['-p', String(pid), '-d', '1.5'],
                                                   { ...process.env, WAKERS_DETACHED_PONG: '1' }));
  });

  it("names the producer with hand_over, and the unprofiled pong by its pid with a kernel stack", (t) => {
    if (!requireRecorder(t)) return;
    const { markers, named } = consumerMarkers(rec.view, fixture);
    const pongPid = fixture.processes.get('pong');
    // ping also sleeps 2 ms before each byte it sends: the timer ends those waits.
    const ping = wokenMarkers(rec.view, threadNamed(rec.view, fixture.waits.get('ping').tid, 'ping'))
      .filter((k) => k.data.wakerTid !== undefined);
    const byPong = ping.filter((k) => k.data.wakerTid === pongPid && k.data.wakerProcess === `pid ${pongPid}` &&
                                      k.causeFrames.length > 0 &&
                                      k.causeFrames.every((f) => f.category === 'Kernel'));
    Object.assign(m, { consumerMarkers: markers.length, consumerNamed: named.length, pingMarkers: ping.length,
                       pingByPong: byPong.length });
    t.diagnostic(`-p: acc-consumer ${named.length} of ${markers.length} markers by acc-producer through ` +
                 `hand_over; ping ${byPong.length} of ${ping.length} by pong (pid ${pongPid}, kernel stack)`);
    assert.ok(markers.length >= 300, `only ${markers.length} woken markers on acc-consumer in 1.5 s`);
    assert.ok(named.length >= 0.9 * markers.length, `${named.length} of ${markers.length} name acc-producer`);
    assert.ok(byPong.length >= 0.9 * ping.length && ping.length > 100,
              `${byPong.length} of ${ping.length} of ping's markers name pong by pid with a kernel stack`);
    assert.match(rec.result.stderr, /[1-9]\d* kernel-only \(waker not profiled\)/);
    // pipe-writer, the fixture's child forked before the attach, is recorded.
    const writerPid = String(fixture.processes.get('pipe-writer'));
    assert.ok(rec.view.threads.some((th) => String(th.pid).split('.')[0] === writerPid),
              `pipe-writer (${writerPid}) is not in the profile`);
    // The summary's top wakers, as when the command is launched: pong by its pid.
    assert.match(rec.result.stderr, /top wakers of wakers \(\d+\): .*acc-producer \(\d+\) [\d.]+ ms/);
    assert.match(rec.result.stderr, new RegExp(`top wakers of wakers \\(\\d+\\): .*pong \\(${pongPid}\\)`));
  });
});


// -a (with --off-cpu, which -a leaves off by default): every process is profiled, so pong,
// forked before the recording started, is named with its user stack too.
describe('wakers with -a', () => {
  let rec;
  let fixture;
  before(async () => {
    if (recorderUnavailableReason()) return;
    ({ rec, fixture } = await recordRunningFixture('wakers_system', ['-a', '--off-cpu', '-d', '1.5']));
  });

  it('names the producer with hand_over, and pong with its user stack', (t) => {
    if (!requireRecorder(t)) return;
    const { markers, named } = consumerMarkers(rec.view, fixture);
    const pongPid = fixture.processes.get('pong');
    const ping = wokenMarkers(rec.view, threadNamed(rec.view, fixture.waits.get('ping').tid, 'ping'))
      .filter((k) => k.data.wakerTid === pongPid);
    const withUser = ping.filter((k) => k.causeFrames.some((f) => f.category === 'User'));
    t.diagnostic(`-a: acc-consumer ${named.length} of ${markers.length} markers by acc-producer through ` +
                 `hand_over; ${withUser.length} of ${ping.length} of ping's markers by pong carry pong's user stack`);
    assert.ok(markers.length >= 300, `only ${markers.length} woken markers on acc-consumer in 1.5 s`);
    assert.ok(named.length >= 0.9 * markers.length, `${named.length} of ${markers.length} name acc-producer`);
    assert.ok(ping.length > 100 && withUser.length >= 0.9 * ping.length,
              `${withUser.length} of ${ping.length} of ping's markers by pong have a user stack`);
    // The summary ranks the processes of the whole machine (five): the fixture's main one,
    // whose waits add up to seconds a run, is among them.
    assert.match(rec.result.stderr, /top wakers of wakers \(\d+\): .*acc-producer \(\d+\) [\d.]+ ms/);
  });
});
