// GET /api/stats through the app: pings and refusals of known kinds show in the totals and the current
// minute, the busiest hosts are named, the answer matches its schema, answers are cached for CACHE_MS, a
// flush adds the counts to stats_minutes once, another instance on the same database reports them, old
// minutes are pruned, a database that does not answer is a 503; and, on an instance that verifies, the
// verification outcomes and the intake latency of a real listening server.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { FormatRegistry } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import {
  BACKEND,
  createTestDatabase,
  methodCall,
  readReply,
  rpc,
  startApp,
  uniqueUrl,
  type TestApp,
  type TestDatabase,
} from '../../helpers/app.js';
import { feedFixture, bytes, startFeedServer, type FeedServer } from '../../helpers/feed-server.js';
import { StatsReply } from '../../../src/operations/stats/snapshot.js';
import { CACHE_MS } from '../../../src/operations/stats/plugin.js';
import { LATENCY_BOUNDS_MS, MINUTE_MS, minuteOf } from '../../../src/operations/stats/minute-tally.js';
import { pruneMinutes } from '../../../src/operations/stats/minute-repository.js';
import { waitFor } from '../../helpers/wait.js';

// TypeBox checks no string format unless told how (Fastify's serializer does not check them at all).
if (!FormatRegistry.Has('date-time'))
  FormatRegistry.Set('date-time', (v) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(v) && !Number.isNaN(Date.parse(v)));

type Reply = StatsReply;

async function stats(t: TestApp, query = ''): Promise<{ status: number; headers: Record<string, unknown>; body: Reply }> {
  const res = await t.app.inject({ method: 'GET', url: `/api/stats${query}` });
  return { status: res.statusCode, headers: res.headers, body: res.json() as Reply };
}

/** A 200 answer that matches the StatsReply schema. */
async function validStats(t: TestApp, query = ''): Promise<Reply> {
  const r = await stats(t, query);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.ok(Value.Check(StatsReply, r.body), JSON.stringify([...Value.Errors(StatsReply, r.body)].slice(0, 3)));
  return r.body;
}

/** Stops `t`'s statistics clock (the answers' time and their cache's): requests until expireAnswers() share one answer. */
function holdAnswers(t: TestApp): void {
  const at = t.app.stats.now();
  t.app.stats.now = () => at;
}

/**
 * Moves `t`'s statistics clock CACHE_MS past where it stands and lets it run: the next request gets a new
 * answer, with no wait. It never goes back, nor behind real time (counting stays on real time).
 */
function expireAnswers(t: TestApp): void {
  const ahead = Math.max(0, t.app.stats.now() + CACHE_MS - Date.now());
  t.app.stats.now = () => Date.now() + ahead;
}

/** Polls GET /api/stats until `ok` holds, expiring the cached answer between two looks. */
async function statsUntil(
  t: TestApp,
  ok: (s: Reply) => boolean,
  what: string,
  timeoutMs = 15_000,
  between?: () => void,
  query = '',
): Promise<Reply> {
  let last: Reply | undefined;
  return waitFor(
    async () => {
      last = await validStats(t, query);
      return ok(last) && last;
    },
    {
      what: () => `${what}; last answer ${JSON.stringify({ totals: last?.totals, generatedAt: last?.generatedAt })}`,
      timeoutMs,
      intervalMs: 50,
      between: () => {
        between?.();
        expireAnswers(t);
      },
    },
  );
}

const ping = (t: TestApp, url: string, name = 'Stats blog') => rpc(t.app, methodCall('weblogUpdates.ping', [name, url]));
const hostOf = (url: string) => new URL(url).hostname;
const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);
/** The sum of a per-minute series over the minutes [from, to] (minute starts, ms) of an answer. */
const over = (s: Reply, series: number[], from: number, to: number) =>
  sum(series.filter((_n, i) => s.minutes[i] * 1000 >= from && s.minutes[i] * 1000 <= to));

async function storedSums(t: TestApp): Promise<Record<string, number>> {
  const rows = await t.app.db.query<{ series: string; n: string | number }>(
    'select series, sum(n) as n from stats_minutes group by series order by series',
  );
  return Object.fromEntries(rows.map((r) => [r.series, Number(r.n)]));
}

describe('one instance, then a second on the same database', () => {
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp | undefined;
  const urls = Array.from({ length: 4 }, () => uniqueUrl('stats'));
  // What the tests below sent, in total.
  const sent = { accepted: 0, invalid: 0, throttled: 0 };

  before(async () => {
    db = await createTestDatabase({ migrated: true });
    a = await startApp({ RENDER_SCHEDULER: false }, db);
  });
  after(async () => {
    await b?.close();
    await a?.close();
    await db?.drop();
  });

  test('accepted pings and refusals (invalid, throttled) show in the totals and the current minute; topHosts names the hosts', async () => {
    const m0 = minuteOf(Date.now());
    for (const u of urls) assert.equal((await ping(a, u)).flerror, false);
    sent.accepted += urls.length;
    const bad = await ping(a, 'javascript:alert(1)');
    assert.equal(bad.flerror, true);
    assert.equal(bad.message, 'The weblog URL must use http or https, not javascript.');
    assert.equal((await ping(a, 'no scheme at all')).flerror, true);
    sent.invalid += 2;
    const again = await ping(a, urls[0]);
    assert.equal(again.flerror, true);
    assert.match(again.message ?? '', /less than 300 seconds ago/);
    sent.throttled += 1;
    const m1 = minuteOf(Date.now());

    const r = await stats(a);
    assert.equal(r.status, 200);
    assert.equal(r.headers['cache-control'], `public, max-age=${CACHE_MS / 1000}`);
    assert.match(String(r.headers['content-type']), /^application\/json/);
    const s = r.body;
    assert.ok(Value.Check(StatsReply, s), JSON.stringify([...Value.Errors(StatsReply, s)].slice(0, 3)));
    assert.equal(s.window, '1h');
    assert.equal(s.minutes.length, 60);
    assert.equal(s.minutes[59] * 1000, minuteOf(Date.parse(s.generatedAt)), 'the last minute is the current one');
    assert.deepEqual(s.totals, {
      accepted: 4,
      refused: { invalid: 2, throttled: 1, rate_limited: 0, blocked: 0, unavailable: 0 },
      verification: {},
    });
    // All of it in the minute(s) the pings were sent in: the current one unless a minute turned meanwhile.
    assert.equal(over(s, s.accepted, m0, m1), 4);
    assert.equal(over(s, s.refused.invalid, m0, m1), 2);
    assert.equal(over(s, s.refused.throttled, m0, m1), 1);
    if (m0 === m1 && m1 === s.minutes[59] * 1000) {
      assert.equal(s.accepted[59], 4);
      assert.equal(s.refused.throttled[59], 1);
    }
    // The throttled weblog's host has a refusal too, so it is the busiest; the invalid URLs name no host.
    assert.deepEqual(s.topHosts[0], { host: hostOf(urls[0]), accepted: 1, refused: 1 });
    assert.deepEqual(
      [...s.topHosts].sort((x, y) => (x.host < y.host ? -1 : 1)),
      urls.map((u, i) => ({ host: hostOf(u), accepted: 1, refused: i === 0 ? 1 : 0 })).sort((x, y) => (x.host < y.host ? -1 : 1)),
    );
    assert.deepEqual(new Set(s.recent.map((p) => p.url)), new Set(urls));
    assert.equal(s.health.database, BACKEND);
    assert.equal(s.health.ready, true);
    assert.deepEqual(
      s.health.queues.map((q) => q.name),
      ['verification', 'relay', 'websub', 'rsscloud'],
    );
    assert.ok(
      s.latencyMs.p50.some((v) => v !== null),
      'the pings were timed',
    );
  });

  test('answers are cached for CACHE_MS: a ping in between shows only in a later answer', async () => {
    // The statistics clock held: both requests fall inside one answer's lifetime however slow the machine.
    holdAnswers(a);
    const first = await validStats(a);
    assert.equal((await ping(a, uniqueUrl('cached'))).flerror, false);
    sent.accepted += 1;
    const second = await validStats(a);
    assert.equal(second.generatedAt, first.generatedAt);
    assert.equal(second.totals.accepted, first.totals.accepted);
    // CACHE_MS later (the clock moved, not waited for): a new answer, with the ping.
    expireAnswers(a);
    const fresh = await validStats(a);
    assert.notEqual(fresh.generatedAt, first.generatedAt, 'a new answer after CACHE_MS');
    assert.ok(Date.parse(fresh.generatedAt) - Date.parse(first.generatedAt) >= CACHE_MS);
    assert.equal(fresh.totals.accepted, sent.accepted);
  });

  test('an answer carries an ETag: the same tag gets a 304 with no body while it is cached, a new answer a new tag', async () => {
    // The statistics clock held: both requests fall inside one answer's lifetime however slow the machine.
    holdAnswers(a);
    const first = await a.app.inject({ method: 'GET', url: '/api/stats' });
    assert.equal(first.statusCode, 200);
    assert.equal(first.headers['content-type'], 'application/json; charset=utf-8');
    const tag = String(first.headers.etag);
    assert.match(tag, /^"stats-1h-[0-9a-z]+"$/);
    const notModified = await a.app.inject({ method: 'GET', url: '/api/stats', headers: { 'if-none-match': tag } });
    assert.equal(notModified.statusCode, 304);
    assert.equal(notModified.body, '');
    expireAnswers(a);
    const fresh = await a.app.inject({ method: 'GET', url: '/api/stats', headers: { 'if-none-match': tag } });
    assert.equal(fresh.statusCode, 200, 'a new answer after CACHE_MS');
    assert.notEqual(fresh.headers.etag, tag);
    assert.ok(Value.Check(StatsReply, fresh.json()));
  });

  test('?window=24h: 1440 minutes, the same totals', async () => {
    const s = await validStats(a, '?window=24h');
    assert.equal(s.window, '24h');
    assert.equal(s.minutes.length, 1440);
    assert.equal(s.accepted.length, 1440);
    assert.equal(s.latencyMs.p50.length, 1440);
    assert.equal(s.minutes[1439] * 1000, minuteOf(Date.parse(s.generatedAt)));
    assert.equal(s.minutes[1439] - s.minutes[0], 1439 * 60);
    assert.equal(s.totals.accepted, sent.accepted);
    assert.equal(s.totals.refused.invalid, sent.invalid);
    assert.equal(s.totals.refused.throttled, sent.throttled);
  });

  test('?window=2h (or anything but 1h and 24h): 400 WINDOW_INVALID naming it', async () => {
    const r = await a.app.inject({ method: 'GET', url: '/api/stats?window=2h' });
    assert.equal(r.statusCode, 400);
    assert.deepEqual(r.json(), { error: 'WINDOW_INVALID', message: 'window must be 1h or 24h, not "2h".' });
    const q = await a.app.inject({ method: 'GET', url: `/api/stats?window=${encodeURIComponent('"x')}` });
    assert.equal(q.statusCode, 400);
    assert.deepEqual(q.json(), { error: 'WINDOW_INVALID', message: 'window must be 1h or 24h, not "\\"x".' });
    const proto = await a.app.inject({ method: 'GET', url: '/api/stats?window=toString' });
    assert.equal(proto.statusCode, 400);
  });

  test('flush() adds the counts to stats_minutes and the busiest hosts to stats_minute_hosts; a second flush adds nothing', async () => {
    await a.app.stats.flush();
    const want = { accepted: sent.accepted, 'refused:invalid': sent.invalid, 'refused:throttled': sent.throttled };
    assert.deepEqual(await storedSums(a), want);
    const hosts = await a.app.db.query<{ host: string; accepted: string | number; refused: string | number }>(
      'select host, sum(accepted) as accepted, sum(refused) as refused from stats_minute_hosts group by host',
    );
    assert.equal(hosts.length, sent.accepted);
    const h0 = hosts.find((h) => h.host === hostOf(urls[0]));
    assert.deepEqual([Number(h0?.accepted), Number(h0?.refused)], [1, 1]);
    // Every row is a minute start.
    const minutes = await a.app.db.query<{ minute: Date }>('select distinct minute from stats_minutes');
    for (const m of minutes) assert.equal(new Date(m.minute).getTime() % MINUTE_MS, 0);
    await a.app.stats.flush();
    await a.app.stats.flush();
    assert.deepEqual(await storedSums(a), want, 'flushing again does not count again');
  });

  test('a second instance on the same database reports the same totals without having seen the pings; a closing instance flushes', async () => {
    const firstHosts = (await validStats(a)).topHosts;
    const want = () => ({
      accepted: sent.accepted,
      refused: { invalid: sent.invalid, throttled: sent.throttled, rate_limited: 0, blocked: 0, unavailable: 0 },
      verification: {},
    });
    // Counted by the first instance, not flushed yet: its close writes it.
    const late = uniqueUrl('late');
    if (BACKEND === 'pglite') {
      // The embedded database belongs to one process at a time: the first instance stops (its close
      // flushes) and the second opens the same data directory.
      assert.equal((await ping(a, late)).flerror, false);
      sent.accepted += 1;
      await a.close();
      a = undefined as unknown as TestApp;
      b = await startApp({ RENDER_SCHEDULER: false }, db);
      const s = await validStats(b);
      assert.deepEqual(s.totals, want());
      assert.deepEqual(
        s.topHosts.filter((h) => h.host !== hostOf(late)),
        firstHosts,
      );
      assert.ok(s.topHosts.some((h) => h.host === hostOf(late)));
      assert.ok(
        s.latencyMs.p50.every((v) => v === null),
        'latency is per instance: the second timed nothing',
      );
    } else {
      // Both at once on the server: the second reads what the first flushed.
      b = await startApp({ RENDER_SCHEDULER: false }, db);
      const s = await validStats(b);
      assert.deepEqual(s.totals, want());
      assert.deepEqual(s.topHosts, firstHosts);
      assert.ok(
        s.latencyMs.p50.every((v) => v === null),
        'latency is per instance: the second timed nothing',
      );
      assert.equal((await ping(a, late)).flerror, false);
      sent.accepted += 1;
      await a.close();
      a = undefined as unknown as TestApp;
      await statsUntil(b, (x) => x.totals.accepted === sent.accepted, "the closed instance's last count", 3 * CACHE_MS);
    }
    // Its own flush (nothing counted) changes nothing.
    await b.app.stats.flush();
    assert.deepEqual(await storedSums(b), {
      accepted: sent.accepted,
      'refused:invalid': sent.invalid,
      'refused:throttled': sent.throttled,
    });
  });

  test('pruneMinutes drops minutes older than it is told, in both tables, and keeps the rest', async () => {
    const t = b as TestApp;
    const old = new Date(minuteOf(Date.now()) - 26 * 60 * MINUTE_MS);
    await t.app.db.query("insert into stats_minutes (minute, series, n) values ($1, 'accepted', 40), ($1, 'refused:blocked', 2)", [old]);
    await t.app.db.query("insert into stats_minute_hosts (minute, host, accepted, refused) values ($1, 'old.example', 40, 2)", [old]);
    assert.equal((await storedSums(t)).accepted, sent.accepted + 40);
    assert.equal(await pruneMinutes(t.app.db, Date.now() - 25 * 60 * MINUTE_MS), 3);
    assert.deepEqual(await storedSums(t), {
      accepted: sent.accepted,
      'refused:invalid': sent.invalid,
      'refused:throttled': sent.throttled,
    });
    const [h] = await t.app.db.query<{ n: string | number }>("select count(*) as n from stats_minute_hosts where host = 'old.example'");
    assert.equal(Number(h.n), 0);
    assert.equal(await pruneMinutes(t.app.db, Date.now() - 25 * 60 * MINUTE_MS), 0, 'nothing left to prune');
  });

  test('the database gone: 503 STATS_UNAVAILABLE, not cached', async () => {
    const t = b as TestApp;
    if (BACKEND === 'pglite') await t.app.db.close();
    else await db.drop(); // terminates the pool's connections; new ones find no database
    // The day's window: this instance has no cached answer for it.
    const r = await t.app.inject({ method: 'GET', url: '/api/stats?window=24h' });
    assert.equal(r.statusCode, 503);
    assert.equal(r.headers['cache-control'], 'no-store');
    assert.deepEqual(r.json(), { error: 'STATS_UNAVAILABLE', message: 'The database did not answer; statistics are unavailable for now.' });
    // A failed answer is not kept: the next request tries again (and fails again while the database is gone).
    assert.equal((await t.app.inject({ method: 'GET', url: '/api/stats?window=24h' })).statusCode, 503);
  });
});

describe('an instance that verifies, listening on loopback', () => {
  let s: FeedServer;
  let v: TestApp;
  before(async () => {
    s = await startFeedServer('127.0.0.50');
    s.route('/v/rss.xml', bytes(feedFixture('rss20.xml')));
    v = await startApp({
      VERIFY_PINGS: 'mark',
      FETCH_ALLOW_PRIVATE: true,
      FETCH_HOST_INTERVAL_MS: 0,
      VERIFY_FEED_INTERVAL: 0,
      FETCH_TIMEOUT_MS: 1500,
      RENDER_SCHEDULER: false,
      RATE_LIMIT_PER_IP: 2,
    });
    await v.listen();
  });
  after(async () => {
    await v?.close();
    await s?.close();
  });

  test('intake latency: a ping through the listening /RPC2 gives the minute a p50 and a p99', async () => {
    const before = await validStats(v, '?window=24h');
    assert.ok(
      before.latencyMs.p50.every((x) => x === null),
      'nothing timed yet',
    );
    const at = Date.now();
    const res = await fetch(`${v.url}/RPC2`, {
      method: 'POST',
      headers: { 'content-type': 'text/xml' },
      body: methodCall('weblogUpdates.ping', ['Latency', `${s.origin}/latency/`]),
    });
    const reply = readReply(res.status, await res.text());
    assert.equal(reply.flerror, false, reply.message);
    const m = minuteOf(Date.now());
    const st = await statsUntil(v, (x) => x.minutes.includes(m / 1000), 'the minute of the ping in the window');
    const i = st.minutes.indexOf(m / 1000);
    const p50 = st.latencyMs.p50[i];
    const p99 = st.latencyMs.p99[i];
    assert.equal(typeof p50, 'number', JSON.stringify(st.latencyMs.p50.slice(-3)));
    assert.equal(typeof p99, 'number');
    assert.ok((p50 as number) <= (p99 as number));
    // The server's time is within what the client measured: its bucket is at most the client time's bucket.
    const took = Date.now() - at;
    assert.ok((p50 as number) <= (LATENCY_BOUNDS_MS.find((b) => b >= took) ?? 5000), `p50 ${p50} ms, the ping took ${took} ms`);
    // The minutes before it (in this fresh instance) stay null.
    assert.ok(st.latencyMs.p50.slice(0, Math.max(0, st.minutes.indexOf(minuteOf(at) / 1000))).every((x) => x === null));
  });

  test('verification outcomes: a verified feed shows as verification.verified', async () => {
    const url = `${s.origin}/verified-blog/`;
    const res = await fetch(`${v.url}/RPC2`, {
      method: 'POST',
      headers: { 'content-type': 'text/xml' },
      body: methodCall('weblogUpdates.extendedPing', ['Verified', url, url, `${s.origin}/v/rss.xml`]),
    });
    assert.equal(readReply(res.status, await res.text()).flerror, false);
    const st = await statsUntil(
      v,
      (x) => (x.totals.verification.verified ?? 0) >= 1,
      'verification.verified',
      15_000,
      () => v.app.verification.worker?.wake(),
    );
    assert.ok(s.hits('/v/rss.xml').length >= 1, 'the feed was fetched');
    assert.equal(sum(st.verification.verified), st.totals.verification.verified);
    assert.equal(st.verification.verified.length, 60);
    // Every known refusal stays listed; these two pings were accepted.
    assert.equal(st.totals.accepted, 2);
  });

  // REGRESSION: a ping refused before validation (per-address rate limit, blocked client) is reported
  // with the URL as sent; weblogHost() only knew a lower-case scheme, so "HTTP://Host/path?q" was counted
  // under the whole URL as its "host" in topHosts.
  test('a refused ping whose URL has an upper-case scheme is counted under its host, not its whole URL', async () => {
    const addr = '203.0.113.7';
    const send = (url: string) =>
      v.app.inject({
        method: 'POST',
        url: '/RPC2',
        headers: { 'content-type': 'text/xml' },
        payload: methodCall('weblogUpdates.ping', ['Limited', url]),
        remoteAddress: addr,
      });
    // Two tokens a minute: two invalid pings spend them, the third is over the limit.
    for (let i = 0; i < 2; i++) assert.equal(readReply(200, (await send('javascript:x')).body).flerror, true);
    const host = `rate-limited-${process.pid}.example.com`;
    const r = readReply(200, (await send(`HTTP://Rate-Limited-${process.pid}.Example.com/a/path?x=1`)).body);
    assert.equal(r.flerror, true);
    assert.match(r.message ?? '', /^Too many pings from your address/);
    // The day's window: the hour's answer is likely still cached from the test above.
    const st = await statsUntil(
      v,
      (x) => x.totals.refused.rate_limited === 1,
      'the rate-limited ping counted',
      3 * CACHE_MS,
      undefined,
      '?window=24h',
    );
    assert.deepEqual(
      st.topHosts.filter((h) => h.host.includes('rate-limited')),
      [{ host, accepted: 0, refused: 1 }],
    );
  });
});
