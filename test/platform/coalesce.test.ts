// coalesced(): one run at a time; calls during a run fold into exactly one more.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { coalesced } from '../../src/platform/coalesce.js';

test('calls made while the job runs are folded into one more run after it', async () => {
  let runs = 0;
  let release: () => void = () => undefined;
  const job = coalesced(async () => {
    runs++;
    if (runs === 1) await new Promise<void>((r) => (release = r));
  });
  const first = job();
  const second = job();
  const third = job();
  assert.equal(second, third, 'the follow-up run is shared');
  assert.equal(runs, 1);
  release();
  await first;
  await second;
  assert.equal(runs, 2);
  await job.idle();
  await job();
  assert.equal(runs, 3);
});

test('a failed run rejects its callers and does not stop the next', async () => {
  let n = 0;
  const job = coalesced(async () => {
    n++;
    if (n === 1) throw new Error('boom');
  });
  await assert.rejects(job(), { message: 'boom' });
  await job();
  assert.equal(n, 2);
});
