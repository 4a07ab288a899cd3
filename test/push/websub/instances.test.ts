// Two pingd instances on one PostgreSQL database share the hub's queue: each verification of intent and
// each delivery is claimed by one instance only (FOR UPDATE SKIP LOCKED under a lease), so a subscriber
// hears every request once, and each subscriber receives renderings in order, never one twice.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, createTestDatabase, startApp, type TestApp } from '../../helpers/app.js';
import { publish, PUBLIC, startSubscriber, waitForHub } from './helpers.js';

const skip =
  BACKEND === 'postgres'
    ? false
    : 'needs PostgreSQL: the embedded database is one session in one process, so two instances cannot share it';

test(
  'two instances, one database: every verification and every delivery reaches the subscriber exactly once, in order',
  { skip },
  async () => {
    const db = await createTestDatabase({ migrated: true });
    const cfg = {
      FETCH_ALLOW_PRIVATE: true,
      FETCH_HOST_INTERVAL_MS: 0,
      RENDER_SCHEDULER: false,
      PING_MIN_INTERVAL: 0,
      PUBLIC_URL: PUBLIC,
      WEBSUB_CONCURRENCY: 2,
    } as const;
    const apps: TestApp[] = [];
    const sub = await startSubscriber('127.0.0.35');
    try {
      for (let i = 0; i < 2; i++) {
        const a = await startApp(cfg, db);
        apps.push(a);
        await a.app.ready();
      }
      const [a, b] = apps;
      const topics = ['/changes.xml', '/shortChanges.xml'];
      const callbacks: { path: string; topic: string }[] = [];
      for (const topic of topics) for (let i = 0; i < 3; i++) callbacks.push({ path: `/${topic.slice(1, 6)}-${i}`, topic });
      for (const [i, c] of callbacks.entries()) {
        sub.onGet(c.path, (q) => ({ status: 200, body: q.get('hub.challenge') ?? '', delayMs: 30 }));
        // Slow answers keep tasks in flight while the other instance looks for work.
        sub.onPost(c.path, () => ({ status: 204, delayMs: 60 }));
        const via = i % 2 === 0 ? a : b;
        const r = await via.app.inject({
          method: 'POST',
          url: '/websub',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: new URLSearchParams({
            'hub.callback': `${sub.origin}${c.path}`,
            'hub.mode': 'subscribe',
            'hub.topic': `${PUBLIC}${c.topic}`,
          }).toString(),
        });
        assert.equal(r.statusCode, 202);
      }
      const count = async () => Number((await a.app.db.query<{ n: number }>('select count(*)::int as n from websub_tasks'))[0].n);
      await waitForHub(apps, async () => (await count()) === 0, 'the verifications');
      for (const c of callbacks) assert.equal(sub.getsTo(c.path).length, 1, `${c.path} was asked once`);

      // Renderings published one after another (by the instance holding the render lock), each recorded.
      const renderings = new Map<string, Buffer[]>(topics.map((t) => [t, []]));
      for (let round = 0; round < 6; round++) {
        await publish(a);
        for (const t of topics) {
          const r = await a.app.inject({ method: 'GET', url: t, headers: { 'accept-encoding': 'identity' } });
          renderings.get(t)!.push(r.rawPayload);
        }
        for (const x of apps) x.app.websub.worker.wake();
      }
      const last = (t: string) => renderings.get(t)!.at(-1)!;
      await waitForHub(
        apps,
        async () => (await count()) === 0 && callbacks.every((c) => sub.postsTo(c.path).at(-1)?.body.equals(last(c.topic))),
        'the newest renderings to arrive',
      );

      for (const c of callbacks) {
        const seq = renderings.get(c.topic)!;
        const got = sub.postsTo(c.path).map((p) => seq.findIndex((r) => r.equals(p.body)));
        assert.ok(!got.includes(-1), `${c.path} received only published renderings: ${got.join(',')}`);
        for (let i = 1; i < got.length; i++)
          assert.ok(got[i] > got[i - 1], `${c.path} got renderings ${got.join(',')}: each once, in order`);
        assert.equal(got.at(-1), seq.length - 1);
      }
      const delivered = async (x: TestApp) =>
        Number(/pingd_websub_deliveries_total\{outcome="delivered"\} (\d+)/.exec((await x.app.inject({ url: '/metrics' })).body)?.[1]);
      // An instance counts a delivery once the subscriber has answered and the outcome is recorded, after the
      // subscriber saw the POST: the count is waited for (a CI run read 35 of 36 the moment the last arrived).
      const total = async () => (await delivered(a)) + (await delivered(b));
      await waitForHub(apps, async () => (await total()) >= sub.posts.length, 'every delivery counted').catch(() => undefined);
      assert.equal(await total(), sub.posts.length, 'every delivery counted by one instance');
      // Both instances took part (the claim is shared, not one instance's).
      assert.ok((await delivered(a)) > 0 && (await delivered(b)) > 0, `a delivered ${await delivered(a)}, b ${await delivered(b)}`);
    } finally {
      for (const x of apps) await x.app.close();
      await sub.close();
      await db.drop();
    }
  },
);
