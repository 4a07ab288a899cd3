// The running total of accepted pings (ping_totals, migrations/009_ping_totals.sql): raised by intake's batch
// statement with exactly what it accepted, so it always equals sum(weblogs.ping_count), under concurrency too;
// an existing database keeps its count when the migration adds it; changes.xml's `count` and `pingd stats`
// read it; and the render no longer sums the whole weblogs table for it.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startApp, createTestDatabase, testConfig, uniqueUrl, methodCall, rpc, type TestApp } from '../../helpers/app.js';
import { openDatabase, type Queryable } from '../../../src/platform/db/database.js';
import { migrate, listMigrations, MIGRATIONS_DIR } from '../../../src/platform/db/migrate.js';
import { TOTAL_PINGS, totalPings } from '../../../src/intake/ping/window-repository.js';
import { getTotals } from '../../../src/operations/stats/stats-repository.js';
import { strictParse } from '../../publishing/helpers.js';

async function sums(q: Queryable): Promise<{ totals: number; weblogs: number; pings: number }> {
  const [r] = await q.query<{ totals: number; weblogs: number; pings: number }>(
    `select (select coalesce(sum(n), 0) from ping_totals)::bigint as totals,
            (select coalesce(sum(ping_count), 0) from weblogs)::bigint as weblogs,
            (select count(*) from pings)::bigint as pings`,
  );
  return { totals: Number(r.totals), weblogs: Number(r.weblogs), pings: Number(r.pings) };
}

describe('intake keeps the total', () => {
  let t: TestApp;
  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 });
  });
  after(() => t.close());

  test('accepted pings raise it, throttled ones do not: it equals sum(ping_count) and the pings stored', async () => {
    const start = await sums(t.app.db);
    const urls = Array.from({ length: 7 }, () => uniqueUrl('total'));
    for (const url of urls) assert.equal((await t.app.pings.accept({ method: 'ping', name: 'Totalled', url })).ok, true);
    // Within PING_MIN_INTERVAL: throttled, not accepted, not counted.
    for (const url of urls.slice(0, 3)) {
      const r = await t.app.pings.accept({ method: 'ping', name: 'Again', url });
      assert.equal(r.ok, false);
    }
    const end = await sums(t.app.db);
    assert.equal(end.totals - start.totals, 7);
    assert.equal(end.totals, end.weblogs, 'counter = sum(ping_count)');
    assert.equal(end.weblogs, end.pings, 'sum(ping_count) = pings stored');
    assert.equal(await totalPings(t.app.db), end.totals);
    assert.equal((await getTotals(t.app.db)).pingsAccepted, end.totals, 'pingd stats reads the counter');
  });

  test('200 pings at once (a tenth of them repeats, throttled): the totals still agree', async () => {
    const start = await sums(t.app.db);
    const urls = Array.from({ length: 180 }, () => uniqueUrl('burst-total'));
    const bodies = [...urls, ...urls.slice(0, 20)].map((u, i) => methodCall('weblogUpdates.ping', [`Burst ${i}`, u]));
    const replies = await Promise.all(bodies.map((b) => rpc(t.app, b)));
    const accepted = replies.filter((r) => r.flerror === false).length;
    assert.equal(accepted, 180, 'each URL accepted once');
    const end = await sums(t.app.db);
    assert.equal(end.totals - start.totals, accepted);
    assert.equal(end.totals, end.weblogs);
    assert.equal(end.weblogs, end.pings);
  });

  test('changes.xml: the rendered count is the accepted total', async () => {
    const r = await t.app.renderer.tick({ now: new Date() });
    assert.ok(r);
    assert.deepEqual(r.failed, []);
    const res = await t.app.inject({ method: 'GET', url: '/changes.xml' });
    assert.equal(res.statusCode, 200);
    const { totals, weblogs } = await sums(t.app.db);
    assert.equal(totals, 187);
    assert.equal(strictParse(res.rawPayload).root.attrs.count, String(weblogs));
  });
});

test('without the throttle, one weblog pinged 30 times at once: every accepted ping counted once', async () => {
  const t = await startApp({ PING_MIN_INTERVAL: 0, RENDER_SCHEDULER: false });
  try {
    const url = uniqueUrl('repeat-total');
    const replies = await Promise.all(
      Array.from({ length: 30 }, (_, i) => rpc(t.app, methodCall('weblogUpdates.ping', [`Repeat ${i}`, url]))),
    );
    assert.equal(replies.filter((r) => r.flerror === false).length, 30);
    const [w] = await t.app.db.query<{ n: number }>('select ping_count as n from weblogs where url = $1', [url]);
    assert.equal(Number(w.n), 30);
    assert.equal(await totalPings(t.app.db), 30);
  } finally {
    await t.close();
  }
});

test('migration 009 keeps the count of an existing database exactly', async () => {
  const tdb = await createTestDatabase();
  const cfg = testConfig(tdb);
  const db = await openDatabase({ databaseUrl: cfg.DATABASE_URL, dataDir: cfg.DATA_DIR, poolMax: 1, timeoutMs: 10_000 });
  const upTo8 = mkdtempSync(join(tmpdir(), 'pingd-mig-008-'));
  try {
    const before = listMigrations().filter((m) => m.version <= 8);
    for (const m of before) cpSync(join(MIGRATIONS_DIR, m.name), join(upTo8, m.name));
    assert.deepEqual(
      await migrate(db, upTo8),
      before.map((m) => m.name),
    );
    // Weblogs as an older version left them: counts of all sizes (bigint), no counter yet.
    await db.query(
      `insert into weblogs (url, name, first_ping_at, last_ping_at, ping_count)
       select 'http://old' || i || '.example.com/', 'Old ' || i, now() - interval '40 days', now() - interval '1 day', i * i
         from generate_series(1, 500) i`,
    );
    await db.query(
      `insert into weblogs (url, name, first_ping_at, last_ping_at, ping_count) values ('http://huge.example.com/', 'Huge', now(), now(), 5000000000)`,
    );
    const [w] = await db.query<{ n: string }>('select sum(ping_count)::text as n from weblogs');
    assert.equal(w.n, String((500 * 501 * 1001) / 6 + 5_000_000_000));

    // 009 and whatever came after it (later migrations are applied with it, in order).
    assert.deepEqual(
      await migrate(db),
      listMigrations()
        .filter((m) => m.version >= 9)
        .map((m) => m.name),
    );
    const [t] = await db.query<{ n: string; slots: number }>('select sum(n)::text as n, count(*)::int as slots from ping_totals');
    assert.equal(t.n, w.n);
    assert.equal(Number(t.slots), 16);
    assert.equal(await totalPings(db), Number(w.n));
  } finally {
    await db.close();
    await tdb.drop();
    rmSync(upTo8, { recursive: true, force: true });
  }
});

test('REGRESSION: the render read the total as sum(weblogs.ping_count), a scan of the whole table; now the 16 counter slots', async () => {
  const t = await startApp({ RENDER_SCHEDULER: false });
  try {
    assert.match(TOTAL_PINGS, /from ping_totals/);
    assert.doesNotMatch(TOTAL_PINGS, /weblogs/);
    const plan = (await t.app.db.query<Record<string, string>>(`explain ${TOTAL_PINGS}`)).map((r) => Object.values(r)[0]).join('\n');
    assert.match(plan, /ping_totals/, plan);
    assert.doesNotMatch(plan, /weblogs/, plan);
  } finally {
    await t.close();
  }
});
