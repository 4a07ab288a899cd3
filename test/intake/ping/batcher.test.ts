// Group commit sized by load: what arrives while a batch commits waits for one next batch
// instead of splitting into many small ones, yet a batch stuck on a lock never holds up the others.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { BACKEND, startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import type { BatchStats } from '../../../src/intake/ping/ping-batcher.js';
import type { ValidPing } from '../../../src/intake/ping/validate.js';

let t: TestApp;
const batches: BatchStats[] = [];
before(async () => {
  t = await startApp();
  t.app.pings.batcher.onBatch((s) => batches.push(s));
});
after(async () => {
  await t.close();
});

const ping = (url: string): ValidPing => ({
  method: 'ping',
  name: 'Batcher Blog',
  url,
  changesUrl: null,
  rssUrl: null,
  tags: null,
  clientAddr: null,
  userAgent: null,
});
const tick = () => new Promise((r) => setImmediate(r));

const ONE_SESSION = BACKEND === 'pglite' ? 'PGlite has one session: no other transaction can hold a row lock' : false;

/** Holds the weblog row of `url` in another session (an uncommitted insert) until release(). */
async function lockUrl(url: string): Promise<{ release(): Promise<void> }> {
  const c = new pg.Client({ connectionString: t.config.DATABASE_URL });
  await c.connect();
  await c.query('begin');
  await c.query(`insert into weblogs (url, name, first_ping_at, last_ping_at) values ($1, 'lock', now(), now())`, [url]);
  return {
    async release() {
      await c.query('rollback');
      await c.end();
    },
  };
}

test('pings arriving one by one while a batch commits are committed together in the next batch', { skip: ONE_SESSION }, async () => {
  // One attempt: the held batch, then twenty pings each in its own turn of the event loop while it waits on
  // the lock. Returns the batch sizes.
  const attempt = async (): Promise<number[]> => {
    const first = uniqueUrl('held');
    const lock = await lockUrl(first);
    const before = batches.length;
    const p1 = t.app.pings.batcher.submit(ping(first));
    await tick();
    const rest: Promise<unknown>[] = [];
    for (let i = 0; i < 20; i++) {
      rest.push(t.app.pings.batcher.submit(ping(uniqueUrl('follow'))));
      await tick();
    }
    const outcomes = await Promise.all(rest);
    await lock.release();
    assert.equal((await p1).status, 'accepted');
    assert.ok(outcomes.every((o) => (o as { status: string }).status === 'accepted'));
    const mine = batches.slice(before);
    assert.equal(
      mine.reduce((a, b) => a + b.size, 0),
      21,
    );
    return mine.map((b) => b.size);
  };
  // The held batch and one batch for the twenty (started once the first proved slow; two or three if this
  // process was descheduled meanwhile). Starting a batch per turn of the event loop while connections are
  // free, as the batcher once did, makes five or more every time. A turn slower than the batcher's quiet
  // time (1 ms) looks like the end of a burst, which a loaded CI machine produces now and then: up to three
  // attempts, of which one must show it (the old batcher fails all three).
  const seen: string[] = [];
  for (let i = 0; i < 3; i++) {
    const sizes = await attempt();
    seen.push(sizes.join(', '));
    if (sizes.length <= 4) return;
  }
  assert.fail(`batch sizes in three attempts: ${seen.join(' / ')}`);
});

test('a batch stuck on a row lock does not hold up pings for other weblogs', { skip: ONE_SESSION }, async () => {
  const stuck = uniqueUrl('stuck');
  const lock = await lockUrl(stuck);
  const held = t.app.pings.batcher.submit(ping(stuck));
  await tick();
  // Acknowledged while the other batch is still waiting for the lock (if it were not, this would hang
  // until the test times out).
  const other = await t.app.pings.batcher.submit(ping(uniqueUrl('free')));
  assert.equal(other.status, 'accepted');
  await lock.release();
  assert.equal((await held).status, 'accepted');
});

test('a burst of concurrent pings is committed in a few large batches, every one acknowledged', async () => {
  const before = batches.length;
  const urls = Array.from({ length: 300 }, () => uniqueUrl('burst'));
  const out = await Promise.all(urls.map((u) => t.app.pings.batcher.submit(ping(u))));
  assert.ok(out.every((o) => o.status === 'accepted'));
  const mine = batches.slice(before);
  assert.equal(
    mine.reduce((a, b) => a + b.size, 0),
    300,
  );
  assert.ok(mine.length <= 3, `300 pings took ${mine.length} batches`);
});
