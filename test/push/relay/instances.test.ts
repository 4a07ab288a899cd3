// Two instances on one PostgreSQL database, both relaying to one target while pings arrive at both: every
// weblog reaches the target exactly once (one deriver at a time, claims that skip each other's rows).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, createTestDatabase, startApp, type TestApp } from '../../helpers/app.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';
import { derivedAll, httpPing, relayIdle, startTarget } from './helpers.js';

const skip =
  BACKEND === 'postgres'
    ? false
    : 'needs PostgreSQL: the embedded database is one session in one process, so two instances cannot share it';
const N = 200;

test('two instances, one database: each relay is sent once', { skip, timeout: 60_000 }, async () => {
  const tdb = await createTestDatabase({ migrated: true });
  const target = await startTarget('127.0.0.42');
  const apps: TestApp[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      const t = await startApp(
        {
          RELAY_TARGETS: [target.url],
          FETCH_ALLOW_ADDRESSES: parseCidrList('127.0.0.0/8'),
          RELAY_RATE_PER_MIN: 60_000,
          PING_HOST_BUDGET: 0,
        },
        tdb,
      );
      Object.assign(t.app.relay.timing, { pollMs: 100, deriveGapMs: 20, flushMs: 20 });
      await t.listen();
      apps.push(t);
    }
    const blogs = Array.from({ length: N }, (_, i) => `http://twice${i}-${process.pid}.example.com/`);
    for (let i = 0; i < N; i += 20) {
      // Alternate instances, so both derive and both claim.
      const statuses = await Promise.all(blogs.slice(i, i + 20).map((u, k) => httpPing(apps[k % 2].url, 'T', u)));
      assert.deepEqual([...new Set(statuses)], [200]);
    }
    await target.until((calls) => new Set(calls.map((c) => c.params[1])).size === N, 30_000);
    // Barrier: both instances have nothing pending and none in hand: a job claimed by both would still be
    // in the hand of the second while the first's outcome is written, and its request would be made.
    await derivedAll(apps[0].app.db);
    await relayIdle(apps);
    const counts = new Map<string, number>();
    for (const c of target.calls) counts.set(c.params[1], (counts.get(c.params[1]) ?? 0) + 1);
    assert.deepEqual(
      [...counts.entries()].filter(([, n]) => n > 1),
      [],
    );
    assert.equal(target.calls.length, N);
  } finally {
    for (const t of apps) await t.close();
    await target.close();
    await tdb.drop();
  }
});
