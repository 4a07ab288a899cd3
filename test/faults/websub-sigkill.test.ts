// Deliveries promised are durable: a feed topic's change is queued for its subscribers in the transaction
// that commits the verification, the server is killed (SIGKILL) with one delivery in flight (the callback
// host holds its answer) and the rest queued behind it, and after a restart on the same database every
// subscriber receives the change: none is lost.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, createTestDatabase, testConfig } from '../helpers/app.js';
import { startFeedServer } from '../helpers/feed-server.js';
import { startSubscriber } from '../push/websub/helpers.js';
import { startServer, type Server } from './serve-process.js';
import { waitFor } from '../helpers/wait.js';

const ADMIN = 'sigkill-admin-token-0123456789abcdef';
const N = 8;

test(
  'SIGKILL with WebSub deliveries in flight and queued: after a restart every subscriber gets the change',
  { timeout: 120_000 },
  async (ctx) => {
    const tdb = await createTestDatabase();
    const cfg = testConfig(tdb);
    const blog = await startFeedServer('127.0.0.53');
    let items = ['1'];
    blog.route('/feed.xml', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/rss+xml' });
      res.end(
        `<rss version="2.0"><channel><title>K</title>${items.map((n) => `<item><guid>k${n}</guid><title>${n}</title></item>`).join('')}</channel></rss>`,
      );
    });
    const topic = `${blog.origin}/feed.xml`;
    const sub = await startSubscriber('127.0.0.37');
    // Until `hold` is off, every delivery waits a minute for its answer (the first is in flight when the server dies).
    let hold = true;
    const env: Record<string, string> = {
      ...(cfg.DATABASE_URL ? { DATABASE_URL: cfg.DATABASE_URL } : { DATABASE_URL: '', DATA_DIR: cfg.DATA_DIR as string }),
      VERIFY_PINGS: 'mark',
      VERIFY_FEED_INTERVAL: '0',
      FETCH_ALLOW_PRIVATE: 'true',
      FETCH_HOST_INTERVAL_MS: '0',
      FETCH_TIMEOUT_MS: '2000',
      WEBSUB_ANSWER_TIMEOUT_MS: '2000',
      PING_MIN_INTERVAL: '0',
      PUBLIC_URL: 'http://pingd.test',
      ADMIN_TOKEN: ADMIN,
    };
    const api = (s: Server, path: string, init: RequestInit = {}) => fetch(`http://127.0.0.1:${s.port}${path}`, init);
    const form = (s: Server, f: Record<string, string>) =>
      api(s, '/websub', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(f).toString(),
      });
    let server: Server | undefined = await startServer(env);
    for (let i = 0; i < N; i++) sub.onPost(`/k${i}`, () => (hold ? { status: 204, delayMs: 60_000 } : { status: 204 }));
    try {
      for (let i = 0; i < N; i++)
        assert.equal(
          (await form(server, { 'hub.callback': `${sub.origin}/k${i}`, 'hub.mode': 'subscribe', 'hub.topic': topic })).status,
          202,
        );
      await waitFor(
        async () => {
          const r = await api(server!, '/api/websub/subscriptions', { headers: { authorization: `Bearer ${ADMIN}` } });
          return ((await r.json()) as { subscriptions: unknown[] }).subscriptions.length === N;
        },
        { what: 'every subscription stored', timeoutMs: 30_000, intervalMs: 100 },
      );
      items = ['2', '1'];
      assert.equal((await form(server, { 'hub.mode': 'publish', 'hub.url': topic })).status, 204);
      // One callback host: one delivery in flight (WEBSUB_HOST_CONCURRENCY), the others queued behind it.
      await waitFor(() => sub.posts.length >= 1, { what: 'a delivery in flight', timeoutMs: 20_000, intervalMs: 10 });
      const before = sub.posts.length;
      server.child.kill('SIGKILL');
      await server.exited;
      server = undefined;
      ctx.diagnostic(`${before} delivery in flight, ${N - before} queued when the process was killed (${BACKEND})`);

      hold = false;
      server = await startServer(env);
      // The killed instance's claim comes back when its lease runs out (2 × the answer deadline + 10 s).
      await waitFor(
        () => Array.from({ length: N }, (_, i) => sub.postsTo(`/k${i}`).some((p) => p.body.includes('<guid>k2</guid>'))).every(Boolean),
        {
          what: () => `every subscriber delivered (${new Set(sub.posts.map((p) => p.path)).size} of ${N})`,
          timeoutMs: 60_000,
          intervalMs: 100,
        },
      );
      for (let i = 0; i < N; i++) {
        const got = sub.postsTo(`/k${i}`);
        assert.ok(
          got.every((p) => p.body.includes('<guid>k2</guid>') && !p.body.includes('<guid>k1</guid>')),
          'only the new entry',
        );
      }
    } finally {
      if (server) {
        server.child.kill('SIGTERM');
        await server.exited;
      }
      await sub.close();
      await blog.close();
      await tdb.drop();
    }
  },
);
