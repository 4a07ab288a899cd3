// GET /stream against a listening server, read by a raw SSE client: live events in commit order, resume
// with Last-Event-ID / ?since= across an outage with no gap and no duplicate, reset, filters, refusals (400
// final; the cap, the database away and shutdown as a 200 stream that ends, which an EventSource retries),
// the keep-alive comment and shutdown.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { openStream, dataOf, type SseConnection } from '../../helpers/sse-client.js';

let t: TestApp;
const open: SseConnection[] = [];

before(async () => {
  t = await startApp({ PING_MIN_INTERVAL: 0, RENDER_SCHEDULER: false, STREAM_MAX_CLIENTS: 50, STREAM_HEARTBEAT_MS: 200 });
  await t.listen();
});

after(async () => {
  for (const c of open) c.close();
  await t?.close();
});

async function stream(query = '', headers: Record<string, string> = {}): Promise<SseConnection> {
  const c = await openStream(`${t.url}/stream${query}`, headers);
  open.push(c);
  return c;
}

/** Sends pings over HTTP (GET /pingSiteForm), `concurrency` at a time; returns the URLs in sending order. */
async function sendPings(urls: string[], opts: { concurrency?: number; tags?: string } = {}): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < urls.length) {
      const u = urls[next++];
      const r = await fetch(`${t.url}/pingSiteForm?name=${encodeURIComponent(`Blog ${u}`)}&url=${encodeURIComponent(u)}`);
      assert.equal(r.status, 200, await r.text());
      await r.arrayBuffer().catch(() => undefined);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency ?? 1 }, worker));
}

/** Ping ids of the given URLs, from the database, in id order. */
async function idsOf(urls: string[]): Promise<number[]> {
  const rows = await t.app.db.query<{ id: number }>('select id from pings where url = any($1::text[]) order by id', [urls]);
  return rows.map((r) => Number(r.id));
}

/**
 * Barrier: one more ping, and waits until each connection got its event. A connection's events come in
 * position order, so whatever was to reach it before the sentinel has arrived. Returns the sentinel's id.
 */
async function sentinel(...cs: SseConnection[]): Promise<string> {
  const url = uniqueUrl('sentinel');
  await sendPings([url]);
  const [id] = await idsOf([url]);
  for (const c of cs) await c.waitUntil((x) => x.events.some((e) => e.id === String(id)), 10_000, `the sentinel ping ${id}`);
  return String(id);
}

test('a connected client gets one `ping` event per accepted ping, in commit order, with the ping as JSON', async () => {
  const c = await stream();
  assert.equal(c.status, 200);
  assert.equal(c.headers['content-type'], 'text/event-stream');
  assert.equal(c.headers['cache-control'], 'no-cache');
  assert.equal(c.headers['x-accel-buffering'], 'no');
  assert.equal(c.headers['content-encoding'], undefined);
  const urls = [uniqueUrl('live'), uniqueUrl('live'), uniqueUrl('live')];
  await sendPings(urls);
  const events = await c.waitFor(3);
  assert.equal(c.retry, 3000);
  const ids = await idsOf(urls);
  assert.deepEqual(
    events.map((e) => e.id),
    ids.map(String),
  );
  assert.deepEqual(
    events.map((e) => e.event),
    ['ping', 'ping', 'ping'],
  );
  const [first] = dataOf(events);
  const row = (await t.app.db.query<{ received_at: Date }>('select received_at from pings where id = $1', [ids[0]]))[0];
  assert.deepEqual(first, {
    id: ids[0],
    name: `Blog ${urls[0]}`,
    url: urls[0],
    changesUrl: null,
    rssUrl: null,
    tags: [],
    method: 'pingSiteForm',
    receivedAt: new Date(row.received_at).toISOString(),
  });
  c.close();
});

test('resume: 1,000 pings sent while the client is away arrive on reconnect with Last-Event-ID, then live, with no gap and no duplicate', async () => {
  const c = await stream();
  const before = Array.from({ length: 20 }, () => uniqueUrl('outage'));
  await sendPings(before, { concurrency: 4 });
  await c.waitFor(20);
  const resumeFrom = c.lastEventId;
  c.close();

  const during = Array.from({ length: 1000 }, () => uniqueUrl('outage'));
  await sendPings(during, { concurrency: 16 });

  const r = await stream('', { 'last-event-id': resumeFrom });
  // More pings while the replay runs and after it: the seam between replay and live.
  const seam = Array.from({ length: 200 }, () => uniqueUrl('outage'));
  await sendPings(seam, { concurrency: 8 });
  const expected = (await idsOf([...during, ...seam])).map(String);
  await r.waitFor(expected.length, 30_000);
  const last = await sentinel(r);
  const got = r.events.map((e) => e.id);
  assert.equal(new Set(got).size, got.length, 'no event twice');
  assert.deepEqual(got, [...expected, last], 'every ping after the resume point, in id order');
  r.close();
});

test('?since= resumes like Last-Event-ID, and Last-Event-ID wins over it (an EventSource keeps its URL on reconnect)', async () => {
  const urls = [uniqueUrl('since'), uniqueUrl('since'), uniqueUrl('since')];
  await sendPings(urls);
  const ids = await idsOf(urls);
  const a = await stream(`?since=${ids[0]}`);
  await a.waitFor(2);
  assert.deepEqual(
    a.events.slice(0, 2).map((e) => e.id),
    [String(ids[1]), String(ids[2])],
  );
  const b = await stream(`?since=${ids[0]}`, { 'last-event-id': String(ids[1]) });
  await b.waitFor(1);
  const last = await sentinel(b);
  assert.deepEqual(
    b.events.map((e) => e.id),
    [String(ids[2]), last],
  );
  a.close();
  b.close();
});

test('a resume point older than what retention kept gets `event: reset` first, then every event still kept, `live`, then live events', async () => {
  // REGRESSION: a pruned Last-Event-ID reset the stream to live, dropping every event still kept between
  // the oldest retained one and now: a consumer away longer than the retention lost more than was pruned.
  const urls = [uniqueUrl('reset'), uniqueUrl('reset'), uniqueUrl('reset')];
  await sendPings(urls);
  const ids = await idsOf(urls);
  await t.app.db.query('update stream_horizon set pruned_through = $1', [ids[0]]);
  try {
    const c = await stream('', { 'last-event-id': String(ids[0] - 1) });
    await c.waitUntil((x) => x.live.length === 1, 10_000, 'the end of the replay');
    const [reset, ...replayed] = c.events;
    assert.equal(reset.event, 'reset');
    assert.equal(reset.id, String(ids[0]));
    assert.deepEqual(JSON.parse(reset.data), {
      reason: 'pruned',
      lastEventId: ids[0] - 1,
      continueAt: ids[0],
      message: `Events ${ids[0]}–${ids[0]} were deleted by retention; continuing from the oldest event still kept.`,
    });
    // What is kept after the horizon: the two later pings (and whatever other tests left after them).
    assert.deepEqual(
      dataOf(replayed)
        .slice(0, 2)
        .map((p) => p.url),
      urls.slice(1),
    );
    const next = [uniqueUrl('reset')];
    await sendPings(next);
    await c.waitUntil((x) => dataOf(x.events).some((p) => p.url === next[0]), 10_000, 'the live ping');
    assert.equal(dataOf(c.events).at(-1).url, next[0]);
    // ?since=0 means "everything still kept": no reset, the replay starts after the horizon.
    const all = await stream('?since=0&until=live');
    await all.waitUntil((x) => x.ended, 10_000, 'the replay to end');
    assert.notEqual(all.events[0]?.event, 'reset');
    assert.equal(all.events[0]?.id, String(ids[1]));
    c.close();
  } finally {
    await t.app.db.query('update stream_horizon set pruned_through = 0');
  }
});

test('an id this server never sent (from the future) gets `event: reset` with reason unknown', async () => {
  const c = await stream('', { 'last-event-id': '999999999' });
  await c.waitFor(1);
  assert.equal(c.events[0].event, 'reset');
  assert.equal(JSON.parse(c.events[0].data).reason, 'unknown');
  assert.equal(JSON.parse(c.events[0].data).message, 'Event 999999999 is not one this server has sent; continuing with new events.');
  c.close();
});

test('filters: ?host= takes the host and its subdomains, ?tag= a tag, ?types= the event types', async () => {
  const stamp = `${process.pid}x${Date.now()}`;
  const host = `filter-${stamp}.example.org`;
  const byHost = await stream(`?host=${host.toUpperCase()}`);
  const byType = await stream('?types=verified');
  const urls = [`http://${host}/`, `http://blog.${host}/`, `http://not${host}/`, `http://other-${stamp}.example.org/`];
  await sendPings(urls);
  const tagged = `http://tagged-${stamp}.example.org/`;
  const body = `<?xml version="1.0"?><methodCall><methodName>weblogUpdates.extendedPing</methodName><params><param><value>Tagged</value></param><param><value>${tagged}</value></param><param><value>${tagged}</value></param><param><value>${tagged}feed</value></param><param><value>News|Tech</value></param></params></methodCall>`;
  const byTag = await stream('?tag=tech');
  const r = await fetch(`${t.url}/RPC2`, { method: 'POST', headers: { 'content-type': 'text/xml' }, body });
  assert.match(await r.text(), /<boolean>0<\/boolean>/);
  await byHost.waitFor(2);
  await byTag.waitFor(1);
  // Barrier: a sentinel both filters take (a subdomain of the host, tagged Tech), sent after the others:
  // whatever either was to get before it has arrived once it has.
  const last = `http://sentinel.${host}/`;
  const sentinelPing = body.replaceAll(tagged, last).replace('News|Tech', 'Tech');
  const s = await fetch(`${t.url}/RPC2`, { method: 'POST', headers: { 'content-type': 'text/xml' }, body: sentinelPing });
  assert.match(await s.text(), /<boolean>0<\/boolean>/);
  for (const c of [byHost, byTag]) await c.waitUntil((x) => dataOf(x.events).some((p) => p.url === last), 10_000, 'the sentinel');
  // ?types=verified takes neither: its barrier is a keep-alive comment written after the sentinel was
  // handed out (one connection is one ordered byte stream). The second from now: the first may have been
  // written just before the sentinel, and still be on its way.
  const comments = byType.comments.length;
  await byType.waitUntil((x) => x.comments.length >= comments + 2, 10_000, 'keep-alive comments after the sentinel');
  assert.deepEqual(
    dataOf(byHost.events).map((p) => p.url),
    [...urls.slice(0, 2), last],
  );
  assert.deepEqual(
    dataOf(byTag.events).map((p) => [p.url, p.tags]),
    [
      [tagged, ['News', 'Tech']],
      [last, ['Tech']],
    ],
  );
  assert.equal(byType.events.length, 0, 'verification is off: no verified events, and no ping events asked for');
  for (const c of [byHost, byType, byTag]) c.close();
});

test('a client that has its headers gets every ping committed after, even while a flood of pings keeps the hub reading', async () => {
  // REGRESSION: a new connection waited for the hub's read to end; pings kept it going, and the events it
  // read meanwhile were passed to no one, so a client missed pings sent after it saw its headers.
  const watcher = await stream();
  const flood = Array.from({ length: 300 }, () => uniqueUrl('flood'));
  const sending = sendPings(flood, { concurrency: 6 });
  await new Promise((res) => setTimeout(res, 50));
  const c = await stream('?types=ping');
  const after = [uniqueUrl('after'), uniqueUrl('after')];
  await sendPings(after);
  await sending;
  const ids = await idsOf([...flood, ...after]);
  const last = ids[ids.length - 1];
  await c.waitUntil((x) => x.events.some((e) => e.id === String(last)), 10_000, 'the last ping');
  const got = c.events.map((e) => Number(e.id));
  const first = got[0];
  assert.deepEqual(
    got,
    ids.filter((i) => i >= first),
    'every ping from the first one it got on, none missing',
  );
  for (const id of await idsOf(after)) assert.ok(got.includes(id), `ping ${id}, sent after the headers, arrived`);
  watcher.close();
  c.close();
});

const SINCE =
  'since must be the id of an event this stream sent (a decimal number; 0 = everything still kept) or an RFC 3339 time such as 2026-11-23T02:10:04Z.';

test('bad requests are refused with the reason (400), a client that refuses event streams with 406', async () => {
  const cases: [string, Record<string, string>, string][] = [
    ['?since=abc', {}, SINCE],
    ['?since=-1', {}, SINCE],
    ['?since=2026-11-23T02:10:04', {}, SINCE],
    ['', { 'last-event-id': 'x1' }, 'Last-Event-ID must be the id of an event this stream sent (a decimal number).'],
    ['?host=exa%20mple.com', {}, 'host must be a domain name such as example.com (it matches that host and its subdomains).'],
    ['?host=http://example.com/', {}, 'host must be a domain name such as example.com (it matches that host and its subdomains).'],
    ['?tag=', {}, 'tag must not be empty.'],
    ['?types=ping,changes', {}, 'types must be one or more of ping, verified.'],
    ['?types=', {}, 'types must be one or more of ping, verified.'],
    [`?${Array.from({ length: 101 }, (_, i) => `host=h${i}.example`).join('&')}`, {}, 'host may be given at most 100 times.'],
    [`?${Array.from({ length: 21 }, (_, i) => `tag=t${i}`).join('&')}`, {}, 'tag may be given at most 20 times.'],
    ['?method=weblogUpdates.ping', {}, 'method must be one or more of ping, extendedPing, pingSiteForm, rssPing.'],
    [
      '?outcome=ok',
      {},
      'outcome must be one or more of verified, unchanged, not_modified, unreachable, not_a_feed, gone, refused, too_large, too_complex.',
    ],
    ['?hosts=example.com', {}, 'Unknown parameter "hosts"; /stream takes since, host, tag, types, method, outcome, until, mode, spam.'],
    ['?since=0&until=now', {}, 'until must be live (the stored events, then the end).'],
    ['?since=0&mode=history', {}, 'mode must be replay (the stored events, then the end) or live (the default).'],
    ['?until=live', {}, 'A replay (until=live or mode=replay) needs since or Last-Event-ID.'],
  ];
  for (const [q, h, message] of cases) {
    const r = await t.app.inject({ method: 'GET', url: `/stream${q}`, headers: { accept: 'text/event-stream', ...h } });
    assert.equal(r.statusCode, 400, q);
    assert.equal(r.body, `${message}\n`, q);
  }
  const json = await t.app.inject({ method: 'GET', url: '/stream', headers: { accept: 'application/json' } });
  assert.equal(json.statusCode, 406);
});

/** The exact answer of a refusal: a 200 event stream that ends, as an EventSource reads a dropped connection. */
function assertRefusal(c: SseConnection, reason: string, message: string, retryMs: number, lastEventId = ''): void {
  assert.equal(c.status, 200);
  assert.equal(c.headers['content-type'], 'text/event-stream');
  assert.equal(c.headers['cache-control'], 'no-store');
  assert.equal(c.headers['retry-after'], String(retryMs / 1000));
  assert.equal(c.headers['x-pingd-refused'], reason);
  assert.equal(c.retry, retryMs);
  assert.deepEqual(c.comments, [`refused: ${message}`]);
  assert.deepEqual(c.events, [{ id: lastEventId, event: 'refused', data: JSON.stringify({ reason, message, retryMs }) }]);
  assert.equal(c.lastEventId, lastEventId, 'the refusal leaves the resume point where it was');
}

test('beyond STREAM_MAX_CLIENTS a connection is refused with a 200 stream that ends with `retry: 10000` (a 503 closed EventSources for good); a freed place is taken again', async () => {
  const small = await startApp({ STREAM_MAX_CLIENTS: 2 });
  try {
    const base = await small.listen();
    const a = await openStream(`${base}/stream`);
    const b = await openStream(`${base}/stream`);
    await a.waitUntil(() => a.retry !== null);
    await b.waitUntil(() => b.retry !== null);
    const c = await openStream(`${base}/stream`);
    await c.waitUntil((x) => x.ended);
    assertRefusal(c, 'max_clients', 'This server already serves 2 streams; reconnect later.', 10_000);
    // The exact bytes, for clients that read them by hand.
    const raw = await small.app.inject({ method: 'GET', url: '/stream', headers: { accept: 'text/event-stream' } });
    assert.equal(raw.statusCode, 200);
    assert.equal(
      raw.body,
      'retry: 10000\n: refused: This server already serves 2 streams; reconnect later.\n\nevent: refused\ndata: {"reason":"max_clients","message":"This server already serves 2 streams; reconnect later.","retryMs":10000}\n\n',
    );
    // A resuming client gets its own Last-Event-ID back, so the refusal never moves where it resumes.
    const resuming = await openStream(`${base}/stream`, { 'last-event-id': '41230' });
    await resuming.waitUntil((x) => x.ended);
    assertRefusal(resuming, 'max_clients', 'This server already serves 2 streams; reconnect later.', 10_000, '41230');
    // A client that does not ask for event streams (no Accept, */*) gets the same answer; one that refuses
    // them, 406 as before.
    for (const accept of [undefined, '*/*']) {
      const r = await small.app.inject({ method: 'GET', url: '/stream', headers: accept ? { accept } : {} });
      assert.equal(r.statusCode, 200, String(accept));
      assert.equal(r.headers['x-pingd-refused'], 'max_clients', String(accept));
      assert.equal(r.body, raw.body, String(accept));
    }
    assert.equal((await small.app.inject({ method: 'GET', url: '/stream', headers: { accept: 'application/json' } })).statusCode, 406);
    a.close();
    await a.waitUntil(() => small.app.stream.size === 1, 5000, 'the place to be freed');
    const d = await openStream(`${base}/stream`);
    assert.equal(d.status, 200);
    await d.waitUntil((x) => x.retry === 3000, 5000, "the stream's own retry");
    assert.equal(d.headers['x-pingd-refused'], undefined);
    const metrics = await small.app.inject({ method: 'GET', url: '/metrics' });
    assert.match(metrics.body, /pingd_stream_disconnects_total\{reason="refused"\} 5/);
    assert.match(metrics.body, /pingd_stream_clients 2/);
    b.close();
    d.close();
  } finally {
    await small.close();
  }
});

test('beyond STREAM_MAX_CLIENTS the HTTP server refuses before Fastify (a burst of refusals held intake for 0.5 s), with the route’s own bytes and head', async () => {
  const small = await startApp({ STREAM_MAX_CLIENTS: 1 });
  try {
    const base = await small.listen();
    const a = await openStream(`${base}/stream`);
    await a.waitUntil(() => a.retry !== null);
    const viaFastify = await small.app.inject({ method: 'GET', url: '/stream', headers: { accept: 'text/event-stream' } });
    const early0 = small.app.earlyAnswers.written;
    for (const [path, headers] of [
      ['/stream', { accept: 'text/event-stream' }],
      ['/stream?since=0&host=example.org', {}],
      // A full server refuses before it reads the query: its parameters are checked once a place is free.
      ['/stream?no_such_parameter=1', { accept: '*/*' }],
    ] as const) {
      const res = await fetch(`${base}${path}`, { headers });
      assert.equal(res.status, 200, path);
      assert.equal(await res.text(), viaFastify.body, path);
      for (const h of ['content-type', 'cache-control', 'retry-after', 'x-pingd-refused', 'content-length', 'connection'])
        assert.equal(res.headers.get(h), String(viaFastify.headers[h]), `${path}: ${h}`);
      assert.match(res.headers.get('x-request-id') ?? '', /\S/, `${path}: the request id`);
    }
    assert.equal(small.app.earlyAnswers.written - early0, 3, 'answered before Fastify');
    // A resuming client gets its own Last-Event-ID back there too.
    const resuming = await fetch(`${base}/stream`, { headers: { accept: 'text/event-stream', 'last-event-id': '41230' } });
    assert.match(await resuming.text(), /^id: 41230\nevent: refused\n/m);
    // What the early answer cannot answer the same way goes on to the route: 400 and 406 as before.
    const badId = await fetch(`${base}/stream`, { headers: { accept: 'text/event-stream', 'last-event-id': 'abc' } });
    assert.equal(badId.status, 400);
    assert.match(await badId.text(), /Last-Event-ID must be the id of an event/);
    const json = await fetch(`${base}/stream`, { headers: { accept: 'application/json' } });
    assert.equal(json.status, 406);
    await json.text();
    assert.equal(small.app.earlyAnswers.written - early0, 4);
    const metrics = await small.app.inject({ method: 'GET', url: '/metrics' });
    assert.match(metrics.body, /pingd_stream_disconnects_total\{reason="refused"\} 5/);
    a.close();
  } finally {
    await small.close();
  }
});

test('with the database away when a client connects: a 200 stream that ends with `retry: 5000` (a 503 closed EventSources for good)', async () => {
  const hub = t.app.stream;
  const start = hub.start;
  hub.start = async () => {
    throw new Error('connection refused');
  };
  try {
    const c = await stream('?since=0');
    await c.waitUntil((x) => x.ended);
    assertRefusal(c, 'database_unavailable', 'The database is unavailable; reconnect in a moment.', 5000);
  } finally {
    hub.start = start;
  }
  const again = await stream('?since=0');
  await again.waitUntil((x) => x.retry === 3000, 5000, 'the stream once the database is back');
  again.close();
});

test('while the server is closing: a 200 stream that ends with `retry: 1000` (a 503 closed EventSources for good)', async () => {
  const other = await startApp({});
  const base = await other.listen();
  // Hold the shutdown between "closing" and the server's stop listening: the hub's close waits for a barrier.
  const hub = other.app.stream;
  const close = hub.close.bind(hub);
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let reached!: () => void;
  const closing = new Promise<void>((r) => (reached = r));
  hub.close = async () => {
    reached();
    await released;
    return close();
  };
  const done = other.close();
  try {
    await closing;
    const c = await openStream(`${base}/stream`, { 'last-event-id': '7' });
    await c.waitUntil((x) => x.ended);
    assertRefusal(c, 'shutting_down', 'The server is shutting down; reconnect in a moment.', 1000, '7');
  } finally {
    release();
    await done;
  }
});

test('an idle stream gets a comment line every STREAM_HEARTBEAT_MS (proxies keep it open)', async () => {
  const c = await stream();
  await c.waitUntil((x) => x.comments.length >= 2, 5000, 'two heartbeats');
  assert.equal(c.comments[0], 'heartbeat');
  c.close();
});

test('shutdown ends every open stream and the server closes promptly', async () => {
  const other = await startApp({});
  const base = await other.listen();
  const a = await openStream(`${base}/stream`);
  const b = await openStream(`${base}/stream?since=0`);
  await a.waitUntil(() => a.retry !== null);
  await b.waitUntil(() => b.retry !== null);
  const started = Date.now();
  await other.close();
  await a.waitUntil((x) => x.ended, 5000, 'the stream to end');
  await b.waitUntil((x) => x.ended, 5000, 'the stream to end');
  assert.ok(Date.now() - started < 5000, 'close did not wait for the streams');
});
