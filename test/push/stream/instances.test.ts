// The stream across instances and under a consumer that never reads: two app instances on one PostgreSQL
// each serve every ping either accepted (LISTEN/NOTIFY carries only positions), and a stalled consumer is
// disconnected once STREAM_BUFFER_BYTES wait for it, its memory released.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
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

test('a consumer that never reads is disconnected once STREAM_BUFFER_BYTES wait for it; the others keep their events', async () => {
  const t = await startApp({ PING_MIN_INTERVAL: 0, RENDER_SCHEDULER: false, STREAM_BUFFER_BYTES: 16384 });
  apps.push(t);
  const base = await t.listen();
  const port = Number(new URL(base).port);
  // A raw client that sends the request and then never reads a byte.
  const stalled = net.connect(port, '127.0.0.1');
  await new Promise<void>((r) => stalled.once('connect', () => r()));
  stalled.write('GET /stream HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n');
  stalled.pause();
  stalled.on('error', () => undefined);
  const reader = await openStream(`${base}/stream`);
  conns.push(reader);
  await reader.waitUntil(() => t.app.stream.size === 2, 5000, 'both connections');

  // Big events (~4.5 kB: a name of 1,000 three-byte characters and a long URL) until the kernel's buffers
  // are full and what waits in the process passes the bound.
  let sent = 0;
  const name = '€'.repeat(1000);
  const long = `${'p'.repeat(1400)}/`;
  while (t.app.stream.size === 2 && sent < 20_000) {
    await Promise.all(Array.from({ length: 50 }, () => ping(base, `${uniqueUrl('stall')}${long}`, name)));
    sent += 50;
  }
  await reader.waitUntil(() => t.app.stream.size === 1, 5000, 'the stalled connection to be dropped');
  assert.ok(sent < 20_000, 'the stalled consumer was disconnected');
  const metrics = await t.app.inject({ method: 'GET', url: '/metrics' });
  assert.match(metrics.body, /pingd_stream_disconnects_total\{reason="slow"\} 1/);
  // The reading consumer got every event.
  await reader.waitFor(sent, 20_000);
  assert.equal(new Set(reader.events.map((e) => e.id)).size, sent);
  stalled.destroy();
});
