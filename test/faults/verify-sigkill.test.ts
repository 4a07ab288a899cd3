// Promised work survives a crash: pings are accepted while their feeds' host hangs, the server is killed
// (SIGKILL) with verifications claimed and in flight and others still queued, and after a restart on the
// same database every acknowledged ping's verification runs to an outcome.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, createTestDatabase, testConfig, methodCall, readReply } from '../helpers/app.js';
import { openDatabase } from '../../src/platform/db/database.js';
import { startFeedServer, feedFixture } from '../helpers/feed-server.js';
import { startServer } from './serve-process.js';
import { waitFor } from '../helpers/wait.js';

test('SIGKILL with verifications queued and in flight: after a restart every one of them is settled', { timeout: 180_000 }, async (ctx) => {
  const tdb = await createTestDatabase();
  const cfg = testConfig(tdb);
  const feeds = await startFeedServer('127.0.0.11');
  let hang = true;
  const hung: import('node:http').ServerResponse[] = [];
  for (let i = 0; i < 20; i++) {
    feeds.route(`/w${i}/feed.xml`, (_req, res) => {
      if (hang) {
        hung.push(res);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/rss+xml' });
      res.end(feedFixture('rss20.xml'));
    });
  }
  const env: Record<string, string> = {
    ...(cfg.DATABASE_URL ? { DATABASE_URL: cfg.DATABASE_URL } : { DATABASE_URL: '', DATA_DIR: cfg.DATA_DIR }),
    VERIFY_PINGS: 'mark',
    VERIFY_CONCURRENCY: '4',
    FETCH_ALLOW_PRIVATE: 'true',
    FETCH_HOST_INTERVAL_MS: '0',
    // Long enough that no fetch times out between the first request and the kill on a loaded machine (at
    // 2 s one did, and its weblog was settled `unreachable` before the kill); the lease is then 20 s.
    FETCH_TIMEOUT_MS: '5000',
    PING_MIN_INTERVAL: '0',
  };
  const blogs = Array.from({ length: 20 }, (_, i) => `${feeds.origin}/w${i}/`);
  try {
    const server = await startServer(env);
    for (const url of blogs) {
      const res = await fetch(`http://127.0.0.1:${server.port}/RPC2`, {
        method: 'POST',
        headers: { 'content-type': 'text/xml' },
        body: methodCall('weblogUpdates.extendedPing', ['W', url, url, `${url}feed.xml`]),
      });
      assert.equal(readReply(res.status, await res.text()).flerror, false);
    }
    // Kill while the first verifications wait on the hung host and the rest are queued.
    // (Soon after the first request arrives: well inside FETCH_TIMEOUT_MS, so none has timed out yet.)
    await waitFor(() => feeds.requests.length >= 1, { what: 'a verification in flight', timeoutMs: 5000, intervalMs: 10 });
    await new Promise((r) => setTimeout(r, 150)); // a moment for the next ones to reach the hung host too
    const inFlight = feeds.requests.length;
    server.child.kill('SIGKILL');
    await server.exited;
    for (const res of hung.splice(0)) res.destroy();
    ctx.diagnostic(`${inFlight} verifications in flight and ${20 - inFlight} queued when the process was killed (${BACKEND})`);

    hang = false;
    const again = await startServer(env);
    try {
      // The killed instance's claims come back when their lease runs out (2 × FETCH_TIMEOUT_MS + 10 s).
      const outcomes = new Map<string, string>();
      await waitFor(
        async () => {
          for (const url of blogs) {
            if (outcomes.has(url)) continue;
            const r = await fetch(`http://127.0.0.1:${again.port}/api/weblogs?url=${encodeURIComponent(url)}`);
            const body = (await r.json()) as { verification: { outcome: string } | null };
            if (body.verification) outcomes.set(url, body.verification.outcome);
          }
          return outcomes.size === blogs.length;
        },
        { what: () => `every weblog settled (${outcomes.size} of ${blogs.length})`, timeoutMs: 120_000, intervalMs: 250 },
      );
      assert.deepEqual([...new Set(outcomes.values())], ['verified']);
    } finally {
      again.child.kill('SIGTERM');
      assert.equal(await again.exited, 0, again.stderr());
    }
    const db = await openDatabase({ databaseUrl: cfg.DATABASE_URL, dataDir: cfg.DATA_DIR, poolMax: 1, timeoutMs: 5000 });
    try {
      const rows = await db.query<{ n: number; open: number }>(
        'select count(*)::int as n, count(*) filter (where outcome is null)::int as open from ping_verifications',
      );
      assert.deepEqual(rows[0], { n: 20, open: 0 }, 'one job per acknowledged ping, none left open');
    } finally {
      await db.close();
    }
  } finally {
    await feeds.close();
    await tdb.drop();
  }
});
