// The outbox runner's options for a surface whose rows the generic settle does not fit (the relay's): with no
// table, record() writes every outcome, at most maxBatch in one transaction; claimPlaces 0 claims only for
// the places free; a run that says it is deferred prompts no claim at once. On the test database, with an
// in-memory list standing in for the claim.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Outbox, type Ran } from '../../../src/platform/outbox/outbox.js';
import { startApp, type TestApp } from '../../helpers/app.js';
import { waitFor } from '../../helpers/wait.js';

let t: TestApp;
before(async () => {
  t = await startApp({});
  await t.app.db.query('create table outbox_test_rows (id int primary key)');
});
after(async () => t?.close());

function outbox(
  queue: number[],
  o: {
    run(n: number): Promise<Ran<number>>;
    record?(records: number[]): void;
    claims?: number[];
    errors?: Error[];
    concurrency?: number;
    claimPlaces?: number;
    maxBatch?: number;
    gatherMs?: number;
  },
): Outbox<number, number> {
  return new Outbox<number, number>({
    db: t.app.db,
    leaseSec: 60,
    concurrency: o.concurrency ?? 1,
    pollMs: 60_000,
    claimPlaces: o.claimPlaces,
    maxBatch: o.maxBatch,
    gatherMs: o.gatherMs,
    claim: async (limit) => {
      o.claims?.push(limit);
      return queue.splice(0, limit);
    },
    run: o.run,
    record: async (tx, records) => {
      o.record?.(records);
      await tx.query('insert into outbox_test_rows (id) select unnest($1::int[])', [records]);
    },
    onError: (err) => (o.errors ? o.errors.push(err) : assert.fail(err)),
  });
}

test('without a table, record() writes every outcome, at most maxBatch in one transaction', async () => {
  const batches: number[][] = [];
  const box = outbox([1, 2, 3, 4, 5, 6, 7], {
    concurrency: 3,
    maxBatch: 3,
    gatherMs: 10,
    run: async (n) => ({ record: n }),
    record: (records) => batches.push(records),
  });
  box.start();
  await waitFor(() => batches.flat().length === 7, { what: () => `seven records (${JSON.stringify(batches)})` });
  await box.close(1000);
  assert.ok(
    batches.every((b) => b.length <= 3),
    JSON.stringify(batches),
  );
  const rows = await t.app.db.query<{ id: number }>('select id from outbox_test_rows where id <= 7 order by id');
  assert.deepEqual(
    rows.map((r) => Number(r.id)),
    [1, 2, 3, 4, 5, 6, 7],
  );
});

test('claimPlaces 0 claims only for the places free; unset, four places worth', async () => {
  for (const [claimPlaces, first] of [
    [0, 2],
    [undefined, 8],
  ] as const) {
    const claims: number[] = [];
    const queue = Array.from({ length: 20 }, (_, i) => 100 + i);
    const box = outbox(queue, { concurrency: 2, claimPlaces, claims, run: async () => ({ settle: null }) });
    box.start();
    await waitFor(() => claims.length > 0, { what: 'a claim' });
    await box.close(1000);
    assert.equal(claims[0], first, `claimPlaces ${claimPlaces}: ${JSON.stringify(claims)}`);
  }
});

test('a run that says deferred is not followed by a claim at once; one that does not, is', async () => {
  for (const deferred of [true, false]) {
    const claims: number[] = [];
    const batches: number[][] = [];
    const box = outbox([200 + Number(deferred) * 10, 201 + Number(deferred) * 10], {
      claims,
      claimPlaces: 0,
      gatherMs: 50,
      // Longer than the worker's wake gap (20 ms): the look that follows a full claim (more may be due)
      // comes while the run holds the only place, finds none free and waits for the poll (a minute).
      run: async (n) => {
        await new Promise((r) => setTimeout(r, 400));
        return { record: n, deferred };
      },
      record: (records) => batches.push(records),
    });
    box.start();
    // The batch is written gatherMs after the run ended; the claim a finished run prompts comes at once
    // (refillAtOnce, from memory), so by the time the batch is written it has been made, or never was.
    await waitFor(() => batches.length > 0, { what: 'the first batch' });
    assert.equal(claims.length > 1, !deferred, `deferred ${deferred}: claims ${JSON.stringify(claims)}`);
    if (deferred) {
      box.wake();
      await waitFor(() => claims.length > 1, { what: 'the claim after a wake' });
    }
    await box.close(1000);
  }
});

test('an outbox without a table refuses a settle: the row is left to its lease', async () => {
  const errors: Error[] = [];
  const box = outbox([300], { errors, run: async (n) => ({ settle: { id: n, kind: 'drop' } }) });
  box.start();
  await waitFor(() => errors.length > 0, { what: 'the error' });
  await box.close(1000);
  assert.match(errors[0].message, /without a table cannot settle/);
});
