// Per-host manners, against real servers on their own loopback addresses: a minimum gap between requests
// to one host and a bound on requests in flight to it, whatever the burst of pings; Retry-After on 429
// and 503 (seconds and HTTP dates) keeps every feed of that host waiting; 5xx backs the feed off.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startApp, type TestApp } from '../helpers/app.js';
import { startFeedServer, feedFixture, bytes, type FeedServer } from '../helpers/feed-server.js';
import { jobsOf, ping, pingAndSettle, settled, weblogApi, type JobRow } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

const apps: TestApp[] = [];
const servers: FeedServer[] = [];
const children: ChildProcess[] = [];

after(async () => {
  for (const a of apps) await a.close();
  for (const s of servers) await s.close();
  for (const c of children) c.kill();
});

async function app(extra: Parameters<typeof startApp>[0] = {}): Promise<TestApp> {
  const t = await startApp({
    VERIFY_PINGS: 'mark',
    FETCH_ALLOW_PRIVATE: true,
    FETCH_HOST_INTERVAL_MS: 0,
    VERIFY_FEED_INTERVAL: 0,
    PING_MIN_INTERVAL: 0,
    RENDER_SCHEDULER: false,
    ...extra,
  });
  apps.push(t);
  await t.app.ready();
  return t;
}

async function server(host: string): Promise<FeedServer> {
  const s = await startFeedServer(host);
  servers.push(s);
  return s;
}

async function timingServer(
  host: string,
  delayMs: number,
): Promise<{ origin: string; log(): Promise<{ arrivals: { path: string; at: number }[]; maxInFlight: number }> }> {
  const child = spawn(
    process.execPath,
    [
      fileURLToPath(new URL('../helpers/timing-server.mjs', import.meta.url)),
      host,
      String(delayMs),
      fileURLToPath(new URL('../fixtures/feeds/rss20.xml', import.meta.url)),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  children.push(child);
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout.once('data', (d: Buffer) => resolve(d.toString().trim()));
    child.once('exit', () => reject(new Error('the timing server exited')));
  });
  const origin = `http://${host}:${port}`;
  return { origin, log: async () => (await fetch(`${origin}/__log`)).json() };
}

test('a burst of pings for many weblogs on one host becomes one request at a time, FETCH_HOST_INTERVAL_MS apart', async () => {
  const t = await app({ FETCH_HOST_INTERVAL_MS: 150, VERIFY_CONCURRENCY: 8 });
  // Servers in their own processes: arrival times are read by a clock the test's event loop cannot delay.
  const a = await timingServer('127.0.0.5', 60);
  const b = await timingServer('127.0.0.6', 60);
  const blogsA = Array.from({ length: 12 }, (_, i) => `${a.origin}/w${i}/`);
  const blogsB = Array.from({ length: 3 }, (_, i) => `${b.origin}/w${i}/`);
  await Promise.all([...blogsA, ...blogsB].map((u) => ping(t, u, `${u}feed.xml`)));
  for (const u of [...blogsA, ...blogsB]) assert.equal((await settled(t, u, 30_000)).outcome, 'verified', u);

  const la = await a.log();
  const lb = await b.log();
  assert.equal(la.arrivals.length, 12);
  assert.ok(la.maxInFlight <= 2, `at most 2 requests in flight to one host, saw ${la.maxInFlight}`);
  const times = la.arrivals.map((r) => r.at).sort((x, y) => x - y);
  const gaps = times.slice(1).map((x, i) => Math.round(x - times[i]));
  // pingd starts them at least 150 ms apart, but a connection can leave late when the machine is loaded
  // (the embedded database shares pingd's event loop), bunching two arrivals: judge the rate, not one gap.
  const median = [...gaps].sort((x, y) => x - y)[Math.floor(gaps.length / 2)];
  assert.ok(median >= 140, `the median gap between requests to one host is ~150 ms or more, gaps: ${gaps.join(', ')}`);
  assert.ok(times[times.length - 1] - times[0] >= 11 * 150 - 20, `12 requests take at least 11 gaps, gaps: ${gaps.join(', ')}`);
  // The other host is not held up behind the first one's queue.
  assert.ok(Math.max(...lb.arrivals.map((r) => r.at)) < times[times.length - 1], 'host B was served while host A still waited');
});

test('429 with Retry-After in seconds: no request to that host before then, for any of its feeds', async () => {
  const t = await app();
  const s = await server('127.0.0.7');
  s.route('/busy.xml', bytes('slow down', { 'content-type': 'text/plain', 'retry-after': '120' }, 429));
  s.route('/other.xml', bytes(feedFixture('rss20.xml')));
  const started = Date.now();
  const job = await pingAndSettle(t, `${s.origin}/busy/`, `${s.origin}/busy.xml`);
  assert.equal(job.outcome, 'unreachable');
  assert.equal(job.http_status, 429);
  const api = await weblogApi(t, `${s.origin}/busy/`);
  assert.ok(
    Date.parse(api.body.feed.nextFetchAfter) >= started + 119_000,
    `the feed waits for Retry-After: ${api.body.feed.nextFetchAfter}`,
  );
  // Another weblog of the same host: its job waits (deferred, still open), and the host hears nothing.
  const other = `${s.origin}/other/`;
  await ping(t, other, `${s.origin}/other.xml`);
  // Barrier: the worker has decided on the job, settled or deferred past the Retry-After.
  const decided = (j: JobRow | undefined) => j !== undefined && (j.outcome !== null || new Date(j.due_at).getTime() > Date.now() + 60_000);
  const jobs = await waitFor(
    async () => {
      const js = await jobsOf(t.app.db, other);
      return decided(js[0]) && js;
    },
    { what: "the worker to settle or defer the other weblog's job", timeoutMs: 5000 },
  );
  assert.equal(jobs[0].outcome, null, 'still queued');
  assert.ok(new Date(jobs[0].due_at).getTime() >= started + 119_000, `due when the host may be asked again: ${jobs[0].due_at}`);
  assert.equal(s.hits('/other.xml').length, 0);
  assert.equal(s.requests.length, 1);
});

test('503 with an HTTP-date Retry-After an hour away: later pings of that host are settled unreachable without a request', async () => {
  const t = await app();
  const s = await server('127.0.0.8');
  const later = new Date(Date.now() + 3600_000).toUTCString();
  s.route('/down.xml', bytes('maintenance', { 'content-type': 'text/plain', 'retry-after': later }, 503));
  s.route('/also.xml', bytes(feedFixture('rss20.xml')));
  const first = await pingAndSettle(t, `${s.origin}/down/`, `${s.origin}/down.xml`);
  assert.equal(first.outcome, 'unreachable');
  assert.equal(first.http_status, 503);
  const second = await pingAndSettle(t, `${s.origin}/also/`, `${s.origin}/also.xml`);
  assert.equal(second.outcome, 'unreachable');
  assert.equal(second.http_status, null, 'no request was made');
  assert.equal(s.requests.length, 1);
});

test('5xx backs the feed off exponentially; a success resets it', async () => {
  const t = await app();
  const s = await server('127.0.0.9');
  s.route('/err.xml', bytes('oops', { 'content-type': 'text/plain' }, 500));
  const url = `${s.origin}/err/`;
  const feed = `${s.origin}/err.xml`;
  assert.equal((await pingAndSettle(t, url, feed)).outcome, 'unreachable');
  let api = await weblogApi(t, url);
  assert.equal(api.body.feed.failures, 1);
  const firstWait = Date.parse(api.body.feed.nextFetchAfter) - Date.parse(api.body.feed.lastFetchAt);
  assert.ok(Math.abs(firstWait - 60_000) < 2000, `1 min after the first failure, got ${firstWait} ms`);
  // While backing off, a ping waits instead of fetching. Barrier: the worker has decided on the new job,
  // settled (had it fetched) or deferred to the end of the backoff.
  await ping(t, url, feed);
  const backoffEnds = Date.parse(api.body.feed.nextFetchAfter);
  const [, waiting] = await waitFor(
    async () => {
      const js = await jobsOf(t.app.db, url);
      return js.length === 2 && (js[1].outcome !== null || new Date(js[1].due_at).getTime() >= backoffEnds - 1000) && js;
    },
    { what: 'the worker to settle or defer the ping during the backoff', between: () => t.app.verification.worker?.wake() },
  );
  assert.equal(waiting.outcome, null, 'deferred, not settled');
  assert.equal(s.hits('/err.xml').length, 1);
  // Time passes (the backoff is over): the next failure doubles the wait.
  await t.app.db.query('update feeds set next_fetch_after = null where url = $1', [feed]);
  await t.app.db.query('update ping_verifications set due_at = now() where outcome is null');
  t.app.verification.worker?.wake();
  await settled(t, url);
  api = await weblogApi(t, url);
  assert.equal(api.body.feed.failures, 2);
  const secondWait = Date.parse(api.body.feed.nextFetchAfter) - Date.parse(api.body.feed.lastFetchAt);
  assert.ok(Math.abs(secondWait - 120_000) < 2000, `2 min after the second, got ${secondWait} ms`);
  // Recovery.
  s.route('/err.xml', bytes(feedFixture('rss20.xml')));
  await t.app.db.query('update feeds set next_fetch_after = null where url = $1', [feed]);
  assert.equal((await pingAndSettle(t, url, feed)).outcome, 'verified');
  api = await weblogApi(t, url);
  assert.equal(api.body.feed.failures, 0);
  assert.equal(api.body.feed.nextFetchAfter, null);
});
