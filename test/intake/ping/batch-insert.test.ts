// The group-commit statement: outcomes in input order, throttled pings told when their weblog last took a
// ping, and a cached plan that stays right as the table grows (it is a prepared statement).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { INSERT_BATCH, insertPingBatch } from '../../../src/intake/ping/ping-repository.js';
import type { ValidPing } from '../../../src/intake/ping/validate.js';
import { findWeblog } from '../../helpers/rows.js';

let t: TestApp;
before(async () => {
  t = await startApp();
});
after(async () => {
  await t.close();
});

const ping = (url: string, name = 'Batch Blog'): ValidPing => ({
  method: 'ping',
  name,
  url,
  changesUrl: null,
  rssUrl: `${url}feed/`,
  tags: ['a', 'b'],
  clientAddr: '192.0.2.1',
  userAgent: 'bench',
});

test('a batch mixing new, throttled and new weblogs: outcomes in input order, lastPingAt of the throttled', async () => {
  const [a, b, c] = [uniqueUrl('batch'), uniqueUrl('batch'), uniqueUrl('batch')];
  const first = await insertPingBatch(t.app.db, [ping(a), ping(b)], 300);
  assert.deepEqual(
    first.map((o) => o.status),
    ['accepted', 'accepted'],
  );
  const second = await insertPingBatch(t.app.db, [ping(c), ping(a, 'Renamed'), ping(b)], 300);
  assert.deepEqual(
    second.map((o) => o.status),
    ['accepted', 'throttled', 'throttled'],
  );
  for (const [i, url] of [[1, a] as const, [2, b] as const]) {
    const w = await findWeblog(t.app.db, url);
    const o = second[i];
    assert.ok(w && o.status === 'throttled');
    assert.equal(o.lastPingAt?.getTime(), new Date(w.last_ping_at).getTime(), 'lastPingAt is the weblog’s last accepted ping');
    assert.equal(w.name, 'Batch Blog', 'a throttled ping changes nothing');
    assert.equal(w.ping_count, 1);
  }
  const accepted = second[0];
  assert.ok(accepted.status === 'accepted' && accepted.id > 0);
  // With the throttle off the same URL is accepted again, and the weblog takes the new name.
  const third = await insertPingBatch(t.app.db, [ping(a, 'Renamed')], 0);
  assert.equal(third[0].status, 'accepted');
  assert.equal((await findWeblog(t.app.db, a))?.name, 'Renamed');
});

test('the same statement, run many times (past the point PostgreSQL switches to a generic plan), stays correct', async () => {
  for (let round = 0; round < 12; round++) {
    const urls = Array.from({ length: 1 + (round % 4) }, () => uniqueUrl('generic'));
    const out = await insertPingBatch(
      t.app.db,
      urls.map((u) => ping(u)),
      300,
    );
    assert.deepEqual(
      out.map((o) => o.status),
      urls.map(() => 'accepted'),
    );
  }
});

test('the generic plan of the batch statement reads weblogs only through an index', async () => {
  // A cached generic plan is made once, possibly on an empty table; a sequential scan of weblogs in it
  // would make every batch cost more as the table grows.
  const db = t.app.db;
  await db.transaction(async (tx) => {
    await tx.exec(`set local plan_cache_mode = force_generic_plan`);
    await tx.exec(
      `prepare pingd_plan_check (text[], text[], text[], text[], text[], text[], text[], text[], int, boolean, float8[], text[], boolean, float8, text[]) as ${INSERT_BATCH}`,
    );
    try {
      const rows = await tx.query<Record<string, string>>(
        `explain execute pingd_plan_check (array['ping'], array['n'], array['http://plan.example.com/'], array[null]::text[], array[null]::text[], array[null]::text[], array[null]::text[], array[null]::text[], 300, true, array[0.1]::float8[], array['[]'], true, 0.5, array['plan.example.com'])`,
      );
      const plan = rows.map((r) => Object.values(r)[0]).join('\n');
      assert.match(plan, /Insert on weblogs/);
      assert.doesNotMatch(plan, /Seq Scan on weblogs/, plan);
      assert.doesNotMatch(plan, /Seq Scan on weblog_spam/, plan);
    } finally {
      await tx.exec('deallocate pingd_plan_check');
    }
  });
});
