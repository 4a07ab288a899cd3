// Two pingd instances on one PostgreSQL database share the open hub's queue: each feed change is stored
// once, each subscriber's delivery of it is claimed by one instance only (FOR UPDATE SKIP LOCKED under a
// lease), and a subscriber goes through the changes one at a time: every change arrives once, in order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, createTestDatabase, startApp, type TestApp } from '../../helpers/app.js';
import { startFeedServer } from '../../helpers/feed-server.js';
import { PUBLIC, startSubscriber, waitForHub } from './helpers.js';

const skip =
  BACKEND === 'postgres'
    ? false
    : 'needs PostgreSQL: the embedded database is one session in one process, so two instances cannot share it';

test('two instances, one database: every change of a feed topic reaches each subscriber exactly once, in order', { skip }, async () => {
  const db = await createTestDatabase({ migrated: true });
  const cfg = {
    FETCH_ALLOW_PRIVATE: true,
    FETCH_HOST_INTERVAL_MS: 0,
    RENDER_SCHEDULER: false,
    PING_MIN_INTERVAL: 0,
    VERIFY_PINGS: 'mark',
    VERIFY_FEED_INTERVAL: 0,
    PUBLIC_URL: PUBLIC,
    WEBSUB_CONCURRENCY: 2,
  } as const;
  const apps: TestApp[] = [];
  // Callbacks on three hosts, so that both instances have deliveries to run at once.
  const subs = await Promise.all(['127.0.0.41', '127.0.0.42', '127.0.0.43'].map((h) => startSubscriber(h)));
  const blog = await startFeedServer('127.0.0.54');
  let items = ['0'];
  blog.route('/feed.xml', (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/atom+xml' });
    res.end(
      `<feed xmlns="http://www.w3.org/2005/Atom"><title>I</title><id>urn:i</id>${items.map((n) => `<entry><id>urn:i:${n}</id><title>${n}</title></entry>`).join('')}</feed>`,
    );
  });
  const topic = `${blog.origin}/feed.xml`;
  try {
    for (let i = 0; i < 2; i++) {
      const a = await startApp(cfg, db);
      apps.push(a);
      await a.app.ready();
    }
    const [a, b] = apps;
    const callbacks = subs.flatMap((s) => [0, 1].map((i) => ({ sub: s, path: `/i${i}` })));
    for (const [i, c] of callbacks.entries()) {
      // Slow answers keep deliveries in flight while the other instance looks for work.
      c.sub.onPost(c.path, () => ({ status: 204, delayMs: 40 }));
      const r = await (i % 2 ? a : b).app.inject({
        method: 'POST',
        url: '/websub',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({
          'hub.callback': `${c.sub.origin}${c.path}`,
          'hub.mode': 'subscribe',
          'hub.topic': topic,
        }).toString(),
      });
      assert.equal(r.statusCode, 202);
    }
    const count = async (sql: string) => Number((await a.app.db.query<{ n: number }>(sql))[0].n);
    await waitForHub(
      apps,
      async () => (await count('select count(*)::int as n from websub_subscriptions')) === callbacks.length,
      'the subscriptions',
    );

    // Five changes, published alternately through both instances, each once verification has seen the last.
    for (let n = 1; n <= 5; n++) {
      items = [String(n), ...items];
      const r = await (n % 2 ? a : b).app.inject({
        method: 'POST',
        url: '/websub',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: `hub.mode=publish&hub.url=${encodeURIComponent(topic)}`,
      });
      assert.equal(r.statusCode, 204);
      await waitForHub(apps, async () => (await count('select count(*)::int as n from websub_changes')) >= n, `change ${n} stored`, 60_000);
    }
    await waitForHub(
      apps,
      async () =>
        (await count('select count(*)::int as n from websub_tasks')) === 0 && callbacks.every((c) => c.sub.postsTo(c.path).length >= 5),
      'every change delivered',
    );
    for (const c of callbacks) {
      const got = c.sub.postsTo(c.path).map((p) => /<title>(\d+)<\/title><\/entry>/.exec(p.body.toString('utf8'))?.[1]);
      assert.deepEqual(got, ['1', '2', '3', '4', '5'], `${c.sub.origin}${c.path}: each change once, in order`);
    }
    await a.app.websub.sweep();
    assert.equal(await count('select count(*)::int as n from websub_changes'), 0, 'changes nobody is behind are pruned');
  } finally {
    for (const x of apps) await x.app.close();
    for (const s of subs) await s.close();
    await blog.close();
    await db.drop();
  }
});
