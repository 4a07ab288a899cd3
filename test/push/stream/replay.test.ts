// Replays from the database (Last-Event-ID, ?since=) under many resuming clients: a bounded number of
// replay reads at once whatever the number of replays, the connection's filter in the query (a filter that
// matches nothing reads no rows), every event still delivered once and in order, and a client that stops
// reading holding up no other replay. Stored events are written straight into the tables.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { openStream, dataOf, type SseConnection } from '../../helpers/sse-client.js';
import { waitFor } from '../../helpers/wait.js';
import { Subscriber } from '../../../src/push/stream/subscriber.js';
import type { Sink } from '../../../src/push/stream/sink.js';
import { parseStreamRequest } from '../../../src/push/stream/events.js';

const STORED = 2000;
const CONCURRENCY = 2;
const PAGE = 100;

let t: TestApp;
let stamp: string;
/** Ids of the stored pings, in order. */
let stored: number[] = [];
const open: SseConnection[] = [];

/**
 * Stream reads in flight at once (the most seen), and rows returned by those started since `epoch` was
 * last moved on, counted where every statement passes.
 */
const reads = { inFlight: 0, most: 0, rows: 0, epoch: 0 };
/** How many stored pings are tagged. */
let storedTagged = 0;

before(async () => {
  t = await startApp({
    PING_MIN_INTERVAL: 0,
    RENDER_SCHEDULER: false,
    STREAM_MAX_CLIENTS: 100,
    STREAM_REPLAY_CONCURRENCY: CONCURRENCY,
    STREAM_REPLAY_PAGE: PAGE,
    // Fast enough for a test: the pace itself is checked in replay-gate.test.ts.
    STREAM_REPLAY_ROWS_PER_SECOND: 10_000_000,
  });
  await t.listen();
  stamp = `${process.pid}x${Date.now().toString(36)}`;
  // Weblogs w1…wN on a host of this run, every third ping tagged Tech|News.
  await t.app.db.query(
    `insert into weblogs (url, name, first_ping_at, last_ping_at)
     select 'http://w' || i || '.${stamp}.example.org/', 'Stored ' || i, now(), now() from generate_series(1, $1::int) i`,
    [STORED],
  );
  await t.app.db.query(
    `insert into pings (weblog_id, received_at, method, name, url, tags)
     select w.id, now(), 'weblogUpdates.ping', w.name, w.url, case when w.id % 3 = 0 then array['Tech', 'News'] end
       from weblogs w where w.url like $1 order by w.id`,
    [`http://w%.${stamp}.example.org/`],
  );
  stored = (await t.app.db.query<{ id: number }>('select id from pings order by id')).map((r) => Number(r.id));
  storedTagged = Number((await t.app.db.query<{ n: number }>('select count(*)::int as n from pings where tags is not null'))[0].n);
  const db = t.app.db;
  const query = db.query.bind(db);
  db.query = (async (sql: string, params?: unknown[], opts?: { name?: string }) => {
    const stream = opts?.name?.startsWith('pingd_stream_events') || opts?.name?.startsWith('pingd_stream_replay');
    if (!stream) return query(sql, params, opts);
    reads.inFlight++;
    reads.most = Math.max(reads.most, reads.inFlight);
    const epoch = reads.epoch;
    try {
      const rows = await query(sql, params, opts);
      if (epoch === reads.epoch) reads.rows += rows.length;
      return rows;
    } finally {
      reads.inFlight--;
    }
  }) as typeof db.query;
});

after(async () => {
  for (const c of open) c.close();
  await t?.close();
});

// Each test starts with no connection left by the one before (closed even when it failed).
beforeEach(async () => {
  for (const c of open.splice(0)) c.close();
  await waitFor(() => t.app.stream.size === 0, { what: 'the previous connections to close', timeoutMs: 30_000, intervalMs: 10 });
});

async function stream(query: string, headers: Record<string, string> = {}): Promise<SseConnection> {
  const c = await openStream(`${t.url}/stream${query}`, headers);
  open.push(c);
  return c;
}

async function ping(url: string): Promise<number> {
  const r = await fetch(`${t.url}/pingSiteForm?name=${encodeURIComponent('Live')}&url=${encodeURIComponent(url)}`);
  assert.equal(r.status, 200, await r.text());
  const [row] = await t.app.db.query<{ id: number }>('select id from pings where url = $1 order by id desc limit 1', [url]);
  return Number(row.id);
}

test('30 replays from ?since=0 run at most STREAM_REPLAY_CONCURRENCY reads at once (the rest wait their turn), and each gets every event once, in order', async () => {
  // REGRESSION: every replay read the database as fast as its client took the pages, all at once: 200
  // clients resuming from 0 over 100k events took intake p50 from ~5 ms to 2.1–2.3 s on the embedded
  // database (its one session shared with intake) and held the pool on PostgreSQL.
  reads.most = 0;
  reads.epoch++;
  reads.rows = 0;
  const clients = await Promise.all(Array.from({ length: 30 }, () => stream('?since=0')));
  // Intake is served meanwhile.
  const live = [uniqueUrl('during'), uniqueUrl('during'), uniqueUrl('during')];
  const liveIds: number[] = [];
  for (const u of live) liveIds.push(await ping(u));
  const expected = [...stored, ...liveIds].map(String);
  await Promise.all(clients.map((c) => c.waitFor(expected.length, 60_000)));
  // One more event after all of them: anything sent twice would have arrived before it.
  const last = String(await ping(uniqueUrl('after')));
  await Promise.all(clients.map((c) => c.waitUntil((x) => x.lastEventId === last, 15_000, 'the last ping')));
  for (const c of clients)
    assert.deepEqual(
      c.events.map((e) => e.id),
      [...expected, last],
    );
  // The replays' reads, and one of the hub's own live reads.
  assert.ok(reads.most <= CONCURRENCY + 1, `${reads.most} stream reads ran at once with STREAM_REPLAY_CONCURRENCY=${CONCURRENCY}`);
  // REGRESSION: each replay read every window itself, 30 replays of the same stretch 30 times the rows
  // (and 30 times the JSON encoding). Whole windows are shared: the stored rows are read about once.
  assert.ok(reads.rows < 2 * expected.length + 100, `30 replays of ${expected.length} events read ${reads.rows} rows`);
  const metrics = await t.app.inject({ method: 'GET', url: '/metrics' });
  assert.match(metrics.body, /pingd_stream_replays\{state="replaying"\} 0\n/);
  assert.match(metrics.body, /pingd_stream_replays\{state="waiting"\} 0\n/);
  assert.match(metrics.body, /pingd_stream_replay_shared_total [1-9]\d*\n/);
});

test('a replay whose filter matches nothing reads no rows: the filter is in the query', async () => {
  // REGRESSION: the filter was applied to the rows read, so a replay that would send nothing read (and
  // formatted) every stored event: an attacker got 60 KB in all for the same cost as a full replay.
  const host = `sentinel-${stamp}.example.net`;
  reads.epoch++;
  reads.rows = 0;
  const c = await stream(`?since=0&host=${host}`);
  await c.waitUntil((x) => x.retry !== null, 15_000, 'the stream to start');
  // The one event it takes, after everything stored: its arrival means the replay is over.
  const sentinel = await ping(`http://${host}/`);
  await c.waitFor(1, 30_000);
  assert.deepEqual(
    c.events.map((e) => e.id),
    [String(sentinel)],
  );
  assert.equal(reads.rows, 1, 'the stream read only the sentinel, not the events its filter drops');
  c.close();
});

test("filters in the query keep exactly what the connection's own filter takes: hosts and subdomains, tags in any case", async () => {
  const base = `f-${stamp}.example.com`;
  const cases: [string, string | null][] = [
    [`http://${base}/`, 'Tech'],
    [`http://blog.${base}/`, 'TECH'],
    [`http://not${base}/`, 'tech'],
    [`http://other-${stamp}.example.com/${base}/`, 'technology'],
    [`https://${base}:8443/x`, 'K\u212A'],
    [`http://x.${base}/`, null],
  ];
  for (const [url, tag] of cases) {
    const body = `<?xml version="1.0"?><methodCall><methodName>weblogUpdates.extendedPing</methodName><params><param><value>F</value></param><param><value>${url}</value></param><param><value>${url}</value></param><param><value>${url}feed</value></param>${tag ? `<param><value>${tag}</value></param>` : ''}</params></methodCall>`;
    const r = await fetch(`${t.url}/RPC2`, { method: 'POST', headers: { 'content-type': 'text/xml' }, body });
    assert.match(await r.text(), /<boolean>0<\/boolean>/);
  }
  const from = String(stored[0] - 1);
  const byHost = await stream(`?since=${from}&host=${base}`);
  const byTag = await stream(`?since=${from}&tag=tech`);
  // "k" is what JavaScript folds the Kelvin sign to: the query keeps non-ASCII tags for the filter to judge.
  const byKelvin = await stream(`?since=${from}&tag=kk`);
  const both = await stream(`?since=${from}&host=${base}&tag=TECH`);
  const sentinel = `http://z.${base}/`;
  const body = `<?xml version="1.0"?><methodCall><methodName>weblogUpdates.extendedPing</methodName><params><param><value>F</value></param><param><value>${sentinel}</value></param><param><value>${sentinel}</value></param><param><value>${sentinel}feed</value></param><param><value>Tech|KK</value></param></params></methodCall>`;
  assert.match(
    await (await fetch(`${t.url}/RPC2`, { method: 'POST', headers: { 'content-type': 'text/xml' }, body })).text(),
    /<boolean>0<\/boolean>/,
  );
  const urls = async (c: SseConnection) => {
    await c.waitUntil((x) => dataOf(x.events).some((p) => p.url === sentinel), 30_000, 'the sentinel');
    return dataOf(c.events).map((p) => p.url);
  };
  const tagged = await urls(byTag);
  assert.equal(tagged.length, storedTagged + 4, 'the stored Tech pings, three spellings of tech, the sentinel');
  assert.deepEqual(tagged.slice(storedTagged), [`http://${base}/`, `http://blog.${base}/`, `http://not${base}/`, sentinel]);
  assert.deepEqual(await urls(byHost), [
    `http://${base}/`,
    `http://blog.${base}/`,
    `https://${base}:8443/x`,
    `http://x.${base}/`,
    sentinel,
  ]);
  assert.deepEqual(await urls(byKelvin), [`https://${base}:8443/x`, sentinel]);
  assert.deepEqual(await urls(both), [`http://${base}/`, `http://blog.${base}/`, sentinel]);
  for (const c of [byHost, byTag, byKelvin, both]) c.close();
});

test('a replay whose client stops reading holds no turn: another replay finishes meanwhile', async () => {
  const hub = t.app.stream;
  // A client that takes nothing: its first page is written, then it is waited for, forever.
  let blocked = 0;
  const stalled: Sink = {
    write: () => true,
    drained: () => {
      blocked++;
      return new Promise<void>(() => {});
    },
    waiting: 1,
    delivered: 0,
    end: () => {},
    cut: () => {},
    closed: false,
  };
  const parsed = parseStreamRequest({ since: '0' }, undefined);
  assert.ok(parsed.ok);
  const held: Subscriber[] = [];
  for (let i = 0; i < CONCURRENCY + 1; i++) {
    const sub = new Subscriber(parsed.filter, stalled);
    held.push(sub);
    void hub.attach(sub, await hub.start({ at: 'position', pos: 0, header: false }));
  }
  await waitFor(() => blocked === CONCURRENCY + 1, {
    what: 'the stalled replays to wait for their clients',
    timeoutMs: 30_000,
    intervalMs: 10,
  });
  const c = await stream('?since=0');
  await c.waitFor(stored.length, 30_000);
  assert.deepEqual(
    c.events.slice(0, stored.length).map((e) => e.id),
    stored.map(String),
  );
  for (const sub of held) hub.detach(sub);
  c.close();
});
