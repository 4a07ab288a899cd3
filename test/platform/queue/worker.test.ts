// The generic queue worker over an in-memory queue standing in for the database's claim: it never runs more
// than `concurrency` jobs at once, claims again when a job ends or when woken, reports failures with their
// job, keeps running after a failed claim, and on close stops claiming and waits for the jobs in hand.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { QueueWorker } from '../../../src/platform/queue/worker.js';
import { waitFor } from '../../helpers/wait.js';

interface Job {
  n: number;
}

function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

test('runs at most `concurrency` jobs at once and drains the queue as jobs end', async () => {
  const queue: Job[] = Array.from({ length: 10 }, (_, i) => ({ n: i }));
  const done: number[] = [];
  let running = 0;
  let most = 0;
  const gates = new Map<number, ReturnType<typeof deferred>>();
  const w = new QueueWorker<Job>({
    concurrency: 3,
    pollMs: 60_000,
    claim: async (limit) => queue.splice(0, limit),
    run: async (job) => {
      running++;
      most = Math.max(most, running);
      const g = deferred();
      gates.set(job.n, g);
      await g.promise;
      running--;
      done.push(job.n);
      return 'done';
    },
    onError: (err) => assert.fail(err),
  });
  w.start();
  await waitFor(() => gates.size === 3, { what: 'three jobs running', intervalMs: 5 });
  assert.equal(w.active, 3);
  // Releasing one job lets exactly one more in.
  gates.get(0)!.resolve();
  await waitFor(() => gates.size === 4, { what: 'a fourth job to start', intervalMs: 5 });
  assert.equal(w.active, 3);
  for (let i = 1; i < 10; i++) {
    await waitFor(() => gates.has(i), { what: `job ${i} to start`, intervalMs: 5 });
    gates.get(i)!.resolve();
  }
  await waitFor(() => done.length === 10, { what: 'all ten jobs done', intervalMs: 5 });
  assert.equal(most, 3);
  assert.deepEqual(
    [...done].sort((a, b) => a - b),
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
  );
  await w.close(1000);
});

test('wake() claims work queued after the worker went idle, without waiting for the poll', async () => {
  const queue: Job[] = [];
  const ran: number[] = [];
  let claims = 0;
  const w = new QueueWorker<Job>({
    concurrency: 2,
    pollMs: 60_000,
    claim: async (limit) => {
      claims++;
      return queue.splice(0, limit);
    },
    run: async (job) => {
      ran.push(job.n);
      return 'done';
    },
    onError: (err) => assert.fail(err),
  });
  w.start();
  await waitFor(() => claims === 1, { what: 'the first claim', intervalMs: 5 });
  queue.push({ n: 7 });
  w.wake();
  await waitFor(() => ran.length === 1, { what: 'the woken job to run', intervalMs: 5 });
  assert.deepEqual(ran, [7]);
  await w.close(1000);
});

test('a failing job is reported with the job, a failing claim without one, and the worker goes on', async () => {
  const errors: { message: string; job?: number }[] = [];
  const queue: Job[] = [{ n: 1 }, { n: 2 }];
  let claims = 0;
  const ran: number[] = [];
  const w = new QueueWorker<Job>({
    concurrency: 1,
    pollMs: 20,
    claim: async (limit) => {
      claims++;
      if (claims === 1) throw new Error('database down');
      return queue.splice(0, limit);
    },
    run: async (job) => {
      ran.push(job.n);
      if (job.n === 1) throw new Error('boom');
      return 'done';
    },
    onError: (err, job) => errors.push({ message: err.message, job: job?.n }),
  });
  w.start();
  await waitFor(() => ran.length === 2, { what: 'both jobs to run', intervalMs: 5 });
  assert.deepEqual(errors, [
    { message: 'database down', job: undefined },
    { message: 'boom', job: 1 },
  ]);
  await w.close(1000);
});

test('close() stops claiming and waits for the jobs in hand', async () => {
  const g = deferred();
  let claims = 0;
  let finished = false;
  const w = new QueueWorker<Job>({
    concurrency: 1,
    pollMs: 10,
    claim: async () => (++claims === 1 ? [{ n: 1 }] : []),
    run: async () => {
      await g.promise;
      finished = true;
      return 'done';
    },
    onError: (err) => assert.fail(err),
  });
  w.start();
  await waitFor(() => w.active === 1, { what: 'the job to run', intervalMs: 5 });
  const closing = w.close(5000);
  const claimsAtClose = claims;
  setTimeout(() => g.resolve(), 50);
  await closing;
  assert.equal(finished, true);
  // Barrier: timers fire in order of their due time, however slow the machine, so one set now for longer
  // than any the worker may have left (its poll, 10 ms; a wake's gap, 20 ms) fires after that one: a claim
  // close() failed to stop would have been made by then.
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(claims, claimsAtClose);
});
