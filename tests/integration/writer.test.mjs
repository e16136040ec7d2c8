// The profile writer's output checked by the Firefox Profiler's own loader, without BPF or
// root: WRITE_DEMO_PROFILE (tests/support/write_demo_profile.cpp) writes the profile of a
// hand-made session (tests/support/synthetic_session.h) with made-up function names, and
// profiler-cli must show its threads, its stacks and its sample weights.
import assert from 'node:assert/strict';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';

import {
  INTEGRATION_DIR, ProfileView, RESULTS_DIR, checkProfileStructure, readProfile, run, withCliSession,
} from './lib/harness.mjs';

const WRITER = process.env.WRITE_DEMO_PROFILE ||
  join(INTEGRATION_DIR, '..', '..', 'build', 'tests', 'write_demo_profile');

function byName(functions, name) {
  const f = functions.find((x) => x.name === name);
  assert.ok(f, `no function ${name} in ${functions.map((x) => x.name).join(', ')}`);
  return f;
}

it('a written profile loads with its threads, stacks and sample weights', async (t) => {
  assert.ok(existsSync(WRITER), `no ${WRITER} (WRITE_DEMO_PROFILE): build the tests first`);
  const file = join(RESULTS_DIR, 'writer-demo.json.gz');
  rmSync(file, { force: true });
  const written = await run(WRITER, [file]);
  assert.equal(written.code, 0, `${WRITER} failed: ${written.stderr}`);
  checkProfileStructure(new ProfileView(readProfile(file)));

  await withCliSession(file, async (session) => {
    const threads = await session.threadList();
    assert.deepEqual(threads.map((x) => [x.name, String(x.pid), x.tid, x.markerCount]),
                     [['demo', '4242', 4242, 1], ['worker', '4242', 4243, 0]],
                     'the threads, with the lost-events marker on the main one');

    // The main thread: 4 ticks in compute_hash written as one sample of weight 4, and 2
    // samples in main, all under _start.
    const main = await session.threadSamples(threads[0].threadHandle);
    assert.equal(main.categoryBreakdown.totalSamples, 6, 'sample weights count');
    const compute = byName(main.topFunctionsBySelf, 'demo!compute_hash');
    assert.equal(compute.selfSamples, 4);
    assert.equal(byName(main.topFunctionsBySelf, 'demo!main').selfSamples, 2);
    assert.deepEqual(main.heaviestStack.frames.map((f) => f.name),
                     ['demo!_start', 'demo!main', 'demo!compute_hash']);

    // The worker's stack does not reach a thread root: it begins with [truncated].
    const worker = await session.threadSamples(threads[1].threadHandle);
    assert.equal(worker.categoryBreakdown.totalSamples, 2);
    assert.deepEqual(worker.heaviestStack.frames.map((f) => f.name),
                     ['[truncated]', 'demo!worker_loop']);
    t.diagnostic(`main: ${main.topFunctionsBySelf.map((f) => `${f.name} ${f.selfSamples}`).join(', ')}`);
  });
});
