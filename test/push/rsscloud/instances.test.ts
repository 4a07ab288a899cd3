// Two pingd instances on one PostgreSQL database share the notification queue: each change reaches each
// subscriber once (claims are FOR UPDATE SKIP LOCKED under a lease), and an endpoint host has at most one
// notification in flight across both instances.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { openDatabase } from '../../../src/platform/db/database.js';
import { claimNotifications, RSSCLOUD_CLAIM_LOCK } from '../../../src/push/rsscloud/notification-repository.js';
import { BACKEND, createTestDatabase, testConfig, type TestApp } from '../../helpers/app.js';
import { cloudApp, form, serveFeed, startEndpoint, startFeedServer, type Feed } from './helpers.js';
import { waitFor } from '../../helpers/wait.js';

const skip =
  BACKEND === 'postgres'
    ? false
    : 'needs PostgreSQL: the embedded database is one session in one process, so two instances cannot share it';

test('two instances, one database: each change reaches each subscriber once, one notification in flight per host', { skip }, async () => {
  const db = await createTestDatabase({ migrated: true });
  const feeds = await startFeedServer('127.0.0.13');
  const hosts = [await startEndpoint('127.0.0.48'), await startEndpoint('127.0.0.49')];
  const apps: TestApp[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      apps.push(await cloudApp({ RSSCLOUD_CONCURRENCY: 4 }, db));
    }
    const list: Feed[] = Array.from({ length: 3 }, () => serveFeed(feeds));
    const subs: { ep: (typeof hosts)[number]; path: string; feed: Feed }[] = [];
    for (const [h, ep] of hosts.entries())
      for (const [i, feed] of list.entries()) {
        const path = `/h${h}-f${i}`;
        ep.answer(path, (x) => (x.method === 'GET' ? { status: 200, body: x.query.get('challenge') ?? '' } : { status: 200, delayMs: 40 }));
        const r = await form(apps[(h + i) % 2], '/rsscloud/pleaseNotify', {
          domain: ep.host,
          port: String(ep.port),
          path,
          protocol: 'http-post',
          url1: feed.url,
        });
        assert.equal(r.status, 200, r.body);
        subs.push({ ep, path, feed });
      }
    for (const [i, feed] of list.entries()) {
      feed.add('Changed once');
      assert.equal((await form(apps[i % 2], '/rsscloud/ping', { url: feed.url })).status, 200);
    }
    const queued = async () =>
      Number((await apps[0].app.db.query<{ n: number }>('select count(*)::int as n from rsscloud_notifications'))[0].n);
    await waitFor(async () => subs.every((s) => s.ep.posts(s.path).length >= 1) && (await queued()) === 0, {
      what: 'every subscriber notified and the queue empty',
      between: () => {
        for (const a of apps) {
          a.app.rsscloud.worker.wake();
          a.app.verification.worker?.wake();
        }
      },
    });
    for (const s of subs) {
      assert.equal(s.ep.posts(s.path).length, 1, `${s.path} notified once`);
      assert.equal(s.ep.posts(s.path)[0].body, `url=${encodeURIComponent(s.feed.url)}`);
    }
    for (const ep of hosts) assert.equal(ep.maxConcurrent, 1, `${ep.host}: one notification in flight at a time`);
  } finally {
    for (const a of apps) await a.app.close();
    for (const ep of hosts) await ep.close();
    await feeds.close();
    await db.drop();
  }
});

test(
  "a claim while another instance's claim of the same endpoint host is not yet committed leases nothing of that host (both instances leased one: 2 notifications at once)",
  { skip },
  async () => {
    const tdb = await createTestDatabase({ migrated: true });
    const cfg = testConfig(tdb);
    const db = await openDatabase({ databaseUrl: cfg.DATABASE_URL, dataDir: cfg.DATA_DIR, poolMax: 4, timeoutMs: 30_000 });
    const other = new pg.Client({ connectionString: cfg.DATABASE_URL });
    await other.connect();
    try {
      // a2 was queued by a verification whose transaction began before a1's and committed after the other
      // instance's claim had read the queue: it is older than a1 but that claim did not see it.
      const ids: Record<string, number> = {};
      for (const [name, host, ageMin] of [
        ['a1', 'a.test', 1],
        ['a2', 'a.test', 2],
        ['b1', 'b.test', 1],
      ] as const) {
        const [s] = await db.query<{ id: number }>(
          `insert into rsscloud_subscriptions (feed_id, resource_url, notify_url, endpoint_host, protocol, expires_at)
         values (1, $1, $2, $3, 'http-post', now() + interval '1 day') returning id`,
          [`http://feeds.test/${name}`, `http://${host}/notify`, host],
        );
        const [n] = await db.query<{ id: number }>(
          `insert into rsscloud_notifications (subscription_id, endpoint_host, due_at) values ($1, $2, now() - make_interval(mins => $3)) returning id`,
          [s.id, host, ageMin],
        );
        ids[name] = Number(n.id);
      }
      // The other instance, mid-claim: under the claim lock it has leased a1 and not committed yet.
      await other.query('begin');
      await other.query('select pg_advisory_xact_lock($1)', [RSSCLOUD_CLAIM_LOCK]);
      await other.query(
        `update rsscloud_notifications set leased_until = now() + interval '60 seconds', due_at = now() + interval '60 seconds' where id = $1`,
        [ids.a1],
      );
      let settled = false;
      const mine = claimNotifications(db, 10, 60, []).finally(() => (settled = true));
      // Barrier: this claim either returned (the race) or waits on the lock held by the other instance.
      await waitFor(
        async () =>
          settled ||
          Number(
            (
              await other.query<{ n: number }>(
                `select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted and objid = $1`,
                [RSSCLOUD_CLAIM_LOCK],
              )
            ).rows[0].n,
          ) > 0,
        { what: "the claim to return or to wait for the other instance's" },
      );
      await other.query('commit');
      const got = await mine;
      assert.deepEqual(
        got.map((n) => n.id),
        [ids.b1],
        "a.test has a notification leased by the other instance: only b.test's is claimed",
      );
      const leased = await db.query<{ host: string; n: number }>(
        `select endpoint_host as host, count(*)::int as n from rsscloud_notifications where leased_until > now() group by 1 order by 1`,
      );
      assert.deepEqual(
        leased.map((r) => [r.host, Number(r.n)]),
        [
          ['a.test', 1],
          ['b.test', 1],
        ],
      );
    } finally {
      await other.end();
      await db.close();
      await tdb.drop();
    }
  },
);
