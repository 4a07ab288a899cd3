// The database goes away and comes back. On the PostgreSQL run: a private cluster the test stops and
// starts (never the shared one). On the embedded run: the database closed under a burst and the data
// directory opened again. Either way pings are refused fast and clearly (flerror 1 / 503), nothing
// acknowledged is missing afterwards, and the service recovers by itself.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  BACKEND,
  startApp,
  createTestDatabase,
  methodCall,
  readReply,
  uniqueUrl,
  type TestApp,
  type TestDatabase,
} from '../helpers/app.js';
import { privatePostgresAvailable, startPrivatePostgres, type PrivatePostgres } from './private-postgres.js';
import { findPingsByUrl } from '../helpers/rows.js';
import { waitFor } from '../helpers/wait.js';

// Answers slower than this are a hang, not a refusal (DB_TIMEOUT_MS is 1000 here).
const HANG_MS = 10_000;
const UNAVAILABLE = /^The (ping could not be stored \(database unavailable\)|database did not answer in time|server is shutting down)/;

async function xmlrpcPing(t: TestApp, url: string, name = 'Fault'): Promise<{ flerror?: boolean; message?: string; ms: number }> {
  const t0 = Date.now();
  const res = await t.app.inject({
    method: 'POST',
    url: '/RPC2',
    headers: { 'content-type': 'text/xml' },
    payload: methodCall('weblogUpdates.ping', [name, url]),
  });
  const r = readReply(res.statusCode, res.body);
  assert.equal(res.statusCode, 200);
  return { flerror: r.flerror, message: r.message, ms: Date.now() - t0 };
}

type Reply = { url: string; flerror?: boolean; message?: string; ms: number };

/** Fires `n` pings for distinct weblogs at once; returns each URL with its reply. */
async function burst(t: TestApp, n: number, tag: string): Promise<Reply[]> {
  const urls = Array.from({ length: n }, () => uniqueUrl(tag));
  const replies = await Promise.all(
    urls.map((u) => xmlrpcPing(t, u).catch((e: Error) => ({ flerror: undefined, message: `transport: ${e.message}`, ms: -1 }))),
  );
  return urls.map((url, i) => ({ url, ...replies[i] }));
}

/**
 * Keeps `concurrency` pings in flight; once `ackedBefore` of them were acknowledged it runs `fault`, goes
 * on pinging for `afterMs`, then stops. So the fault lands in the middle of a steady stream.
 */
async function blastAcross(
  t: TestApp,
  fault: () => Promise<void>,
  { concurrency = 32, ackedBefore = 150, afterMs = 500 } = {},
): Promise<Reply[]> {
  const out: Reply[] = [];
  let stop = false;
  let acked = 0;
  const worker = async () => {
    while (!stop) {
      const url = uniqueUrl('blast');
      const r = await xmlrpcPing(t, url).catch((e: Error) => ({ flerror: undefined, message: `transport: ${e.message}`, ms: -1 }));
      out.push({ url, ...r });
      if (r.flerror === false) acked++;
    }
  };
  const workers = Array.from({ length: concurrency }, worker);
  await waitFor(() => acked >= ackedBefore, {
    what: () => `${ackedBefore} pings acknowledged before the fault (${acked})`,
    intervalMs: 10,
  });
  await fault();
  await new Promise((r) => setTimeout(r, afterMs));
  stop = true;
  await Promise.all(workers);
  return out;
}

if (BACKEND === 'postgres' && privatePostgresAvailable()) {
  let pg: PrivatePostgres;
  let t: TestApp;
  before(async () => {
    pg = await startPrivatePostgres();
    const db: TestDatabase = { config: { DATABASE_URL: pg.url }, drop: async () => {} };
    t = await startApp({ DB_TIMEOUT_MS: 1000, DB_POOL_MAX: 4 }, db);
  });
  after(async () => {
    await t?.close();
    await pg?.destroy();
  });

  test(
    'PostgreSQL stopped mid-burst: refused fast and clearly while down, recovers by itself, every acknowledged ping is stored',
    { timeout: 120_000 },
    async (ctx) => {
      assert.equal((await xmlrpcPing(t, uniqueUrl('up'))).flerror, false);

      // A steady stream of pings while the server shuts down (fast mode: connections are terminated).
      const mid = await blastAcross(t, () => pg.stop());

      // While it is down: every protocol refuses at once with a reason, nothing hangs.
      const down = await burst(t, 20, 'down');
      for (const r of down) {
        assert.equal(r.flerror, true, r.message);
        assert.match(r.message ?? '', UNAVAILABLE);
        assert.ok(r.ms < HANG_MS, `answered in ${r.ms} ms`);
      }
      const form = await t.app.inject({ method: 'GET', url: `/pingSiteForm?name=Down&url=${encodeURIComponent(uniqueUrl('down-get'))}` });
      assert.equal(form.statusCode, 503);
      assert.match(form.body, /<p class="err">The (ping could not be stored \(database unavailable\)|database did not answer in time)/);
      const metrics = await t.app.inject({ method: 'GET', url: '/metrics' });
      assert.match(metrics.body, /pingd_pings_total\{method="ping",outcome="unavailable"\} [1-9]/, 'refusals are counted');

      await pg.start();
      // No restart of pingd: the pool reconnects on its own.
      await waitFor(async () => (await xmlrpcPing(t, uniqueUrl('back'))).flerror === false, {
        what: 'pings to be accepted again once the database is back',
        timeoutMs: 30_000,
        intervalMs: 200,
      });

      const acked = mid.filter((r) => r.flerror === false);
      assert.ok(acked.length > 0 && acked.length < mid.length, 'the fault landed mid-stream');
      for (const r of [...mid, ...down]) {
        assert.ok(r.flerror !== undefined, `every request got a ping reply (${r.message})`);
        const rows = await findPingsByUrl(t.app.db, r.url);
        if (r.flerror === false) assert.equal(rows.length, 1, `acknowledged ${r.url} is stored`);
      }
      for (const r of down) assert.equal((await findPingsByUrl(t.app.db, r.url)).length, 0, 'refused while down: not stored');
      // The split depends on timing; what matters is the invariant above. Report it.
      ctx.diagnostic(`mid-burst: ${acked.length} acknowledged, ${mid.length - acked.length} refused`);
    },
  );
} else if (BACKEND === 'pglite') {
  test(
    'embedded database closed mid-burst: refused fast and clearly, the directory opens again with every acknowledged ping',
    { timeout: 120_000 },
    async (ctx) => {
      const tdb = await createTestDatabase();
      const t = await startApp({ DB_TIMEOUT_MS: 1000 }, tdb);
      let mid: Reply[];
      let down: Reply[];
      try {
        assert.equal((await xmlrpcPing(t, uniqueUrl('up'))).flerror, false);
        mid = await blastAcross(t, () => t.app.db.close());
        down = await burst(t, 20, 'down');
        for (const r of down) {
          assert.equal(r.flerror, true, r.message);
          assert.match(r.message ?? '', UNAVAILABLE);
          assert.ok(r.ms < HANG_MS, `answered in ${r.ms} ms`);
        }
        const form = await t.app.inject({ method: 'GET', url: `/ping?name=Down&url=${encodeURIComponent(uniqueUrl('down-get'))}` });
        assert.equal(form.statusCode, 503);
      } finally {
        await t.close();
      }
      // The same data directory, a new instance: everything acknowledged is there.
      const t2 = await startApp({}, tdb);
      try {
        for (const r of mid) {
          assert.ok(r.flerror !== undefined, `every request got a ping reply (${r.message})`);
          if (r.flerror === false) assert.equal((await findPingsByUrl(t2.app.db, r.url)).length, 1, `acknowledged ${r.url} is stored`);
          else assert.match(r.message ?? '', UNAVAILABLE);
        }
        for (const r of down) assert.equal((await findPingsByUrl(t2.app.db, r.url)).length, 0);
        assert.ok(mid.some((r) => r.flerror === false) && mid.some((r) => r.flerror === true), 'the fault landed mid-stream');
        assert.equal((await xmlrpcPing(t2, uniqueUrl('reopened'))).flerror, false);
        ctx.diagnostic(
          `mid-burst: ${mid.filter((r) => r.flerror === false).length} acknowledged, ${mid.filter((r) => r.flerror !== false).length} refused`,
        );
      } finally {
        await t2.close();
        await tdb.drop();
      }
    },
  );
}
