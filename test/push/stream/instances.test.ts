// The stream across instances: two app instances on one PostgreSQL each serve every ping either accepted
// (LISTEN/NOTIFY carries only positions). The slow-consumer rule is in slow-consumer.test.ts.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, createTestDatabase, startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { openStream, type SseConnection } from '../../helpers/sse-client.js';

const apps: TestApp[] = [];
const conns: SseConnection[] = [];

after(async () => {
  for (const c of conns) c.close();
  for (const a of apps) await a.close();
});

async function ping(base: string, url: string, name = `Blog ${url}`): Promise<void> {
  const r = await fetch(`${base}/pingSiteForm?name=${encodeURIComponent(name)}&url=${encodeURIComponent(url)}`);
  assert.equal(r.status, 200, await r.text());
}

test(
  'two instances on one PostgreSQL: a consumer on each gets every ping accepted by either, in the same order',
  { skip: BACKEND !== 'postgres' && 'the embedded database belongs to one process: there is no second instance to reach' },
  async () => {
    const db = await createTestDatabase({ migrated: true });
    const a = await startApp({ PING_MIN_INTERVAL: 0, RENDER_SCHEDULER: false }, db);
    const b = await startApp({ PING_MIN_INTERVAL: 0, RENDER_SCHEDULER: false }, db);
    apps.push(b, a);
    try {
      const [ua, ub] = [await a.listen(), await b.listen()];
      const ca = await openStream(`${ua}/stream`);
      const cb = await openStream(`${ub}/stream`);
      conns.push(ca, cb);
      await ca.waitUntil(() => ca.retry !== null);
      await cb.waitUntil(() => cb.retry !== null);
      const urls = Array.from({ length: 200 }, () => uniqueUrl('multi'));
      // Both instances take pings at once, several in flight each.
      await Promise.all(
        [0, 1, 2, 3].map(async (k) => {
          for (let i = k; i < urls.length; i += 4) await ping(i % 2 ? ub : ua, urls[i]);
        }),
      );
      const ids = (await a.app.db.query<{ id: number }>('select id from pings where url = any($1::text[]) order by id', [urls])).map((r) =>
        String(r.id),
      );
      assert.equal(ids.length, 200);
      await ca.waitFor(200, 10_000);
      await cb.waitFor(200, 10_000);
      assert.deepEqual(
        ca.events.map((e) => e.id),
        ids,
      );
      assert.deepEqual(
        cb.events.map((e) => e.id),
        ids,
      );
    } finally {
      apps.splice(0, 2);
      await a.close();
      await b.close();
      await db.drop();
    }
  },
);
