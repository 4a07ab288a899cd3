// rssCloud notifications promised by committed verification outcomes survive a crash: subscribers' feeds
// change and are pinged while their endpoint host hangs, the server is killed (SIGKILL) with one
// notification in flight and the others queued, and after a restart on the same database every subscriber
// is notified.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { BACKEND, createTestDatabase, testConfig } from '../helpers/app.js';
import { openDatabase } from '../../src/platform/db/database.js';
import { startFeedServer } from '../helpers/feed-server.js';
import { serveFeed, type Feed } from '../push/rsscloud/helpers.js';
import { startServer } from './serve-process.js';
import { waitFor } from '../helpers/wait.js';

const N = 6;

test(
  'SIGKILL with rssCloud notifications queued and in flight: after a restart every subscriber is notified',
  { timeout: 120_000 },
  async (ctx) => {
    const tdb = await createTestDatabase();
    const cfg = testConfig(tdb);
    const feeds = await startFeedServer('127.0.0.12');
    let hang = true;
    const hung: http.ServerResponse[] = [];
    /** Paths whose notification was answered 200, with the body received. */
    const answered = new Map<string, string>();
    let received = 0;
    const endpoint = http.createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => {
        const u = new URL(req.url ?? '/', 'http://x');
        if (req.method === 'GET') return res.end(u.searchParams.get('challenge') ?? '');
        received++;
        if (hang) return void hung.push(res);
        answered.set(u.pathname, Buffer.concat(parts).toString());
        res.end('ok');
      });
    });
    await new Promise<void>((r) => endpoint.listen(0, '127.0.0.46', r));
    const port = (endpoint.address() as AddressInfo).port;
    const env: Record<string, string> = {
      ...(cfg.DATABASE_URL ? { DATABASE_URL: cfg.DATABASE_URL } : { DATABASE_URL: '', DATA_DIR: cfg.DATA_DIR }),
      VERIFY_PINGS: 'mark',
      VERIFY_FEED_INTERVAL: '0',
      FETCH_ALLOW_ADDRESSES: '127.0.0.0/8',
      FETCH_HOST_INTERVAL_MS: '0',
      WEBSUB_ANSWER_TIMEOUT_MS: '2000',
    VERIFY_PARSE_BUDGET_MS: '20000',
      PING_MIN_INTERVAL: '0',
    };
    const list: Feed[] = Array.from({ length: N }, () => serveFeed(feeds));
    const post = async (base: string, path: string, fields: Record<string, string>) => {
      const r = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(fields),
      });
      return { status: r.status, body: await r.text() };
    };
    const depth = async (base: string) => {
      const text = await (await fetch(`${base}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith('pingd_rsscloud_queue{measure="depth"} '));
      return line === undefined ? -1 : Number(line.split(' ')[1]);
    };
    try {
      const server = await startServer(env);
      const base = `http://127.0.0.1:${server.port}`;
      for (const [i, f] of list.entries()) {
        const r = await post(base, '/rsscloud/pleaseNotify', {
          domain: '127.0.0.46',
          port: String(port),
          path: `/n${i}`,
          protocol: 'http-post',
          url1: f.url,
        });
        assert.equal(r.status, 200, r.body);
      }
      for (const f of list) {
        f.add('Changed');
        assert.equal((await post(base, '/rsscloud/ping', { url: f.url })).status, 200);
      }
      // Kill once every notification is queued and the first one is in flight (held by the endpoint).
      await waitFor(async () => received >= 1 && (await depth(base)) === N, {
        what: 'every notification queued, one in flight',
        timeoutMs: 30_000,
        intervalMs: 50,
      });
      server.child.kill('SIGKILL');
      await server.exited;
      for (const res of hung.splice(0)) res.destroy();
      ctx.diagnostic(`${received} notification(s) in flight and ${N} queued when the process was killed (${BACKEND})`);

      hang = false;
      const again = await startServer(env);
      try {
        // The killed instance's claim comes back when its lease runs out (2 × WEBSUB_ANSWER_TIMEOUT_MS + 10 s).
        await waitFor(() => answered.size === N, {
          what: () => `every subscriber notified (${answered.size} of ${N})`,
          timeoutMs: 60_000,
          intervalMs: 100,
        });
        for (const [i, f] of list.entries()) assert.equal(answered.get(`/n${i}`), `url=${encodeURIComponent(f.url)}`);
      } finally {
        again.child.kill('SIGTERM');
        assert.equal(await again.exited, 0, again.stderr());
      }
      const db = await openDatabase({ databaseUrl: cfg.DATABASE_URL, dataDir: cfg.DATA_DIR, poolMax: 1, timeoutMs: 5000 });
      try {
        const [q] = await db.query<{ n: number }>('select count(*)::int as n from rsscloud_notifications');
        assert.equal(q.n, 0, 'nothing left queued');
      } finally {
        await db.close();
      }
    } finally {
      endpoint.closeAllConnections();
      endpoint.close();
      await feeds.close();
      await tdb.drop();
    }
  },
);
