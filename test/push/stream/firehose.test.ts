// What a consumer building on /stream relies on, read by the raw SSE client and by real EventSource clients
// (Chromium's own through playwright-core, and npm `eventsource`): the end-of-replay marker and replay-only
// streams, cursor advance for filtered streams, resume from a time, repeatable filters in replay and live,
// and GET /stream/info.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type { Browser } from 'playwright-core';
import { EventSource as NpmEventSource } from 'eventsource';
import { methodCall, startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { launchBrowser, watchedPage } from '../../helpers/browser.js';
import { openStream, dataOf, type SseConnection } from '../../helpers/sse-client.js';
import { waitFor } from '../../helpers/wait.js';

const CURSOR_MS = 300;
let t: TestApp;
let browser: Browser;
const open: SseConnection[] = [];
/** Last-Event-ID of every /stream request the server got, in order. */
const requests: { url: string; lastEventId: string | undefined }[] = [];

before(async () => {
  t = await startApp({ PING_MIN_INTERVAL: 0, RENDER_SCHEDULER: false, STREAM_CURSOR_MS: CURSOR_MS, STREAM_RETRY_MS: 200 });
  await t.listen();
  t.app.server.on('request', (req: IncomingMessage) => {
    if (req.url?.startsWith('/stream') && !req.url.startsWith('/stream/info'))
      requests.push({ url: req.url, lastEventId: req.headers['last-event-id'] as string | undefined });
  });
  browser = await launchBrowser();
});

after(async () => {
  for (const c of open) c.close();
  await browser?.close();
  await t?.close();
});

async function stream(query = '', headers: Record<string, string> = {}): Promise<SseConnection> {
  const c = await openStream(`${t.url}/stream${query}`, headers);
  open.push(c);
  return c;
}

/** Sends a ping (pingSiteForm) and returns its id. */
async function ping(url: string, tags?: string): Promise<number> {
  const r = await fetch(
    `${t.url}/pingSiteForm?name=${encodeURIComponent(`Blog ${url}`)}&url=${encodeURIComponent(url)}${tags ? `&tags=${tags}` : ''}`,
  );
  assert.equal(r.status, 200, await r.text());
  const [row] = await t.app.db.query<{ id: number }>('select id from pings where url = $1 order by id desc limit 1', [url]);
  return Number(row.id);
}

async function rpc(method: string, params: string[]): Promise<void> {
  const r = await fetch(`${t.url}/RPC2`, { method: 'POST', headers: { 'content-type': 'text/xml' }, body: methodCall(method, params) });
  assert.match(await r.text(), /<boolean>0<\/boolean>/);
}

async function latest(): Promise<number> {
  const [r] = await t.app.db.query<{ m: number }>('select max(id) as m from pings');
  return Number(r.m ?? 0);
}

test('a resumed stream sends every stored event, then one `event: live` at the position reached, then live events; a fresh one sends no marker', async () => {
  const before = await latest();
  const stored = [await ping(uniqueUrl('eosr')), await ping(uniqueUrl('eosr'))];
  const fresh = await stream();
  const resumed = await stream('', { 'last-event-id': String(before) });
  const since = await stream(`?since=${before}`);
  for (const c of [resumed, since]) await c.waitUntil((x) => x.live.length === 1, 10_000, 'the end of the replay');
  for (const c of [resumed, since]) {
    assert.deepEqual(
      c.events.map((e) => Number(e.id)),
      stored,
    );
    const [marker] = c.live;
    assert.ok(Number(marker.id) >= stored[1], `the marker's id is the position reached: ${marker.id}`);
    assert.deepEqual(JSON.parse(marker.data), { position: Number(marker.id) });
  }
  const next = await ping(uniqueUrl('eosr'));
  for (const c of [fresh, resumed, since]) await c.waitUntil((x) => x.events.some((e) => Number(e.id) === next), 10_000, 'the live ping');
  assert.equal(resumed.events.length, 3);
  // The live ping came after the marker: the marker was the end of the stored events.
  assert.equal(fresh.live.length, 0, 'a stream that resumes nothing has no replay to end');
  for (const c of [fresh, resumed, since]) c.close();
});

test('?until=live and ?mode=replay: the stored events, the marker, then the end; reconnecting with the marker id and nothing new gets 204', async () => {
  const before = await latest();
  const stored = [await ping(uniqueUrl('until')), await ping(uniqueUrl('until'))];
  for (const q of [`?since=${before}&until=live`, `?since=${before}&mode=replay`]) {
    const c = await stream(q);
    await c.waitUntil((x) => x.ended, 10_000, 'the end');
    assert.deepEqual(
      c.events.map((e) => Number(e.id)),
      stored,
      q,
    );
    assert.equal(c.live.length, 1, q);
    // An EventSource reconnects with the marker's id: nothing new, so 204 stops it.
    const again = await stream(q, { 'last-event-id': c.live[0].id });
    await again.waitUntil((x) => x.ended, 10_000, 'the answer');
    assert.equal(again.status, 204, q);
  }
  // Something new since: it is sent, then the marker and the end again.
  const mark = (await stream(`?since=${before}&until=live`)).live;
  const newer = await ping(uniqueUrl('until'));
  const c = await stream(`?since=${before}&until=live`, { 'last-event-id': String(stored[1]) });
  await c.waitUntil((x) => x.ended, 10_000, 'the end');
  assert.equal(c.status, 200);
  assert.deepEqual(
    c.events.map((e) => Number(e.id)),
    [newer],
  );
  assert.equal(c.live.length, 1);
  assert.ok(mark !== undefined);
});

interface PageSeen {
  log: { what: string; state: number; data?: string; id?: string }[];
}

test("Chromium's EventSource with ?until=live gets the stored events and `live`, reconnects once with the marker's id, and the 204 closes it", async () => {
  const before = await latest();
  const stored = [await ping(uniqueUrl('chromium-until')), await ping(uniqueUrl('chromium-until'))];
  const w = await watchedPage(browser);
  try {
    await w.page.goto(`${t.url}/healthz`);
    const from = requests.length;
    await w.page.evaluate(`(() => {
      const seen = { log: [] };
      window.seen = seen;
      const es = new EventSource('/stream?since=${before}&until=live');
      window.es = es;
      const note = (what, e) => seen.log.push({ what, state: es.readyState, data: e && e.data, id: e && e.lastEventId });
      es.addEventListener('ping', (e) => note('ping', e));
      es.addEventListener('live', (e) => note('live', e));
      es.addEventListener('error', () => note('error'));
    })()`);
    await w.page.waitForFunction(() => (window as unknown as { es: EventSource }).es.readyState === 2, undefined, { timeout: 15_000 });
    const seen = await w.page.evaluate(() => (window as unknown as { seen: PageSeen }).seen);
    const marker = seen.log.find((l) => l.what === 'live');
    assert.deepEqual(
      seen.log.filter((l) => l.what === 'ping').map((l) => Number(l.id)),
      stored,
    );
    assert.ok(marker && Number(marker.id) >= stored[1]);
    assert.deepEqual(
      requests.slice(from).map((r) => r.lastEventId),
      [undefined, marker.id],
      'one reconnection, with the marker id',
    );
    assert.equal(seen.log.at(-1)?.what, 'error');
    assert.equal(seen.log.at(-1)?.state, 2, 'closed for good');
  } finally {
    await w.close();
  }
});

test('npm eventsource with ?mode=replay: the stored events and `live`, then the 204 closes it', async () => {
  const before = await latest();
  const stored = [await ping(uniqueUrl('npm-until')), await ping(uniqueUrl('npm-until'))];
  const got: { type: string; id: string }[] = [];
  const from = requests.length;
  const es = new NpmEventSource(`${t.url}/stream?since=${before}&mode=replay`);
  try {
    es.addEventListener('ping', (e) => got.push({ type: 'ping', id: e.lastEventId }));
    es.addEventListener('live', (e) => got.push({ type: 'live', id: e.lastEventId }));
    await waitFor(() => es.readyState === NpmEventSource.CLOSED, { what: 'the EventSource to close', timeoutMs: 15_000 });
    assert.deepEqual(
      got.filter((g) => g.type === 'ping').map((g) => Number(g.id)),
      stored,
    );
    const marker = got.find((g) => g.type === 'live')!;
    assert.deepEqual(
      requests.slice(from).map((r) => r.lastEventId),
      [undefined, marker.id],
    );
  } finally {
    es.close();
  }
});

test('cursor advance: a filtered stream the log passes by gets a bare `id:` at most every STREAM_CURSOR_MS; an unfiltered one needs none', async () => {
  const rare = `rare-${process.pid}-${Date.now().toString(36)}.example.org`;
  const filtered = await stream(`?host=${rare}`);
  const all = await stream();
  await filtered.waitUntil((x) => x.retry !== null, 5000, 'the stream to start');
  const started = performance.now();
  const others: number[] = [];
  while (performance.now() - started < 1500) others.push(await ping(uniqueUrl('cursor')));
  const last = others.at(-1)!;
  await filtered.waitUntil((x) => x.cursors.includes(String(last)), 10_000, `a cursor at ${last}`);
  const elapsed = performance.now() - started;
  assert.deepEqual(filtered.events, [], 'no event for the filter');
  assert.equal(filtered.lastEventId, String(last), 'the resume point moved without an event');
  assert.ok(
    filtered.cursors.length <= Math.ceil(elapsed / CURSOR_MS) + 1,
    `${filtered.cursors.length} cursors in ${Math.round(elapsed)} ms at STREAM_CURSOR_MS=${CURSOR_MS}`,
  );
  const ids = filtered.cursors.map(Number);
  assert.deepEqual(
    ids,
    [...ids].sort((a, b) => a - b),
  );
  // Its reconnect from the cursor replays nothing it has not seen, and the next matching event arrives.
  const back = await stream(`?host=${rare}`, { 'last-event-id': filtered.lastEventId });
  const hit = await ping(`http://${rare}/`);
  await back.waitUntil((x) => x.events.length === 1, 10_000, 'the matching ping');
  assert.deepEqual(
    back.events.map((e) => Number(e.id)),
    [hit],
  );
  await all.waitUntil((x) => x.events.some((e) => Number(e.id) === hit), 10_000, 'the matching ping');
  assert.deepEqual(all.cursors, [], 'every position was an event for it');
  for (const c of [filtered, all, back]) c.close();
});

/**
 * Opens a filtered EventSource, moves the log on, waits for a raw client with the same filter opened after
 * it to get its cursor (both are written in the same round), then drops every connection: the client's reconnect says
 * what it took as its last event id.
 */
async function cursorThenReconnect(
  openClient: (url: string) => Promise<void>,
  rare: string,
): Promise<{ cursor: number; sent: string | undefined }> {
  // The client first: a cursor is due STREAM_CURSOR_MS after a connection's start, so when the witness's is
  // due, the client's is too.
  const from = requests.length;
  await openClient(`${t.url}/stream?host=${rare}`);
  await waitFor(() => t.app.stream.following === 1 && requests.length > from, { what: 'the client to follow' });
  const witness = await stream(`?host=${rare}`);
  // Both caught up and following the hub's reads before the log moves (one that starts later starts there).
  await waitFor(() => t.app.stream.following === 2 && requests.length > from, { what: 'the client and the witness to follow' });
  const cursor = await ping(uniqueUrl('cursor-client'));
  await witness.waitUntil((x) => x.cursors.includes(String(cursor)), 10_000, `the cursor at ${cursor}`);
  // Bytes written before a close arrive before it: the client has the cursor when its connection drops.
  const n = requests.length;
  t.app.server.closeAllConnections();
  await waitFor(() => requests.length > n && requests.slice(n).some((r) => r.url.includes(rare)), {
    what: 'the client to reconnect',
    timeoutMs: 10_000,
  });
  return { cursor, sent: requests.slice(n).find((r) => r.url.includes(rare))?.lastEventId };
}

test("Chromium's EventSource takes a bare `id:` block as its last event id: its reconnect resumes from the cursor", async () => {
  const rare = `rare-chromium-${process.pid}-${Date.now().toString(36)}.example.org`;
  const w = await watchedPage(browser);
  try {
    await w.page.goto(`${t.url}/healthz`);
    const r = await cursorThenReconnect(async (url) => {
      await w.page.evaluate(`(() => { window.es = new EventSource(${JSON.stringify(url)}); })()`);
    }, rare);
    assert.equal(r.sent, String(r.cursor));
    assert.deepEqual(w.offLoopback, []);
  } finally {
    await w.close();
  }
});

test('npm eventsource: from 5.1.1 a bare `id:` block moves its resume point; the 4.x line (the last for Node 20) ignores it and resumes from its last event', async () => {
  const version = JSON.parse(readFileSync(new URL('../../../node_modules/eventsource/package.json', import.meta.url), 'utf8'))
    .version as string;
  const [major, minor, patch] = version.split('.').map(Number);
  const honours = major > 5 || (major === 5 && (minor > 1 || (minor === 1 && patch >= 1)));
  const rare = `rare-npm-${process.pid}-${Date.now().toString(36)}.example.org`;
  let es: NpmEventSource | undefined;
  try {
    const r = await cursorThenReconnect(async (url) => {
      es = new NpmEventSource(url);
    }, rare);
    console.log(`# npm eventsource ${version}: reconnected with Last-Event-ID ${JSON.stringify(r.sent)} after a cursor at ${r.cursor}`);
    // No event reached it: without the cursor it has no last event id at all.
    assert.equal(r.sent, honours ? String(r.cursor) : undefined);
  } finally {
    es?.close();
  }
});

test('?since=<RFC 3339 time> starts at the first event at or after that time; a time ahead of every event starts live', async () => {
  const host = `timed-${process.pid}-${Date.now().toString(36)}.example.org`;
  // Hours after every ping stored so far, in id order (as pings are received): the positions and the times agree.
  const base = Date.now() + 3600_000;
  const times = [0, 1, 2].map((h) => new Date(base + h * 3600_000));
  const ids: number[] = [];
  for (const [i, at] of times.entries()) {
    const [r] = await t.app.db.query<{ id: number }>(
      `insert into weblogs (url, name, first_ping_at, last_ping_at) values ($1, 'Timed', $2, $2)
       on conflict (url) do update set last_ping_at = excluded.last_ping_at returning id`,
      [`http://${i}.${host}/`, at],
    );
    const [p] = await t.app.db.query<{ id: number }>(
      `insert into pings (weblog_id, received_at, method, name, url) values ($1, $2, 'ping', 'Timed', $3) returning id`,
      [r.id, at, `http://${i}.${host}/`],
    );
    ids.push(Number(p.id));
  }
  const from = async (since: string) => {
    const c = await stream(`?since=${encodeURIComponent(since)}&host=${host}&until=live`);
    await c.waitUntil((x) => x.ended, 10_000, 'the end of the replay');
    assert.equal(c.status, 200, c.body);
    return c.events.map((e) => Number(e.id));
  };
  assert.deepEqual(await from(times[1].toISOString()), ids.slice(1), 'at the second ping: it and the third');
  assert.deepEqual(await from(new Date(times[1].getTime() - 1).toISOString()), ids.slice(1), 'just before the second');
  assert.deepEqual(await from(new Date(times[1].getTime() + 1).toISOString()), ids.slice(2), 'just after the second');
  assert.deepEqual(await from(new Date(base - 1000).toISOString().replace('Z', '+00:00')), ids, 'before the first: all three');
  const ahead = await stream(`?since=${encodeURIComponent(new Date(base + 86400_000).toISOString())}`);
  await ahead.waitUntil((x) => x.live.length === 1, 10_000, 'the marker');
  assert.deepEqual(ahead.events, []);
  assert.equal(Number(ahead.live[0].id), await latest());
  ahead.close();
});

test('repeatable filters in replay and live: any of the hosts, any of the tags, any of the methods, all of the filters', async () => {
  const stamp = `${process.pid}-${Date.now().toString(36)}`;
  const a = `a-${stamp}.example.org`;
  const b = `b-${stamp}.example.org`;
  const c = `c-${stamp}.example.org`;
  const before = await latest();
  const q = `?host=${a}&host=${b}&tag=Tech&tag=news&method=ping&method=extendedPing`;
  const live = await stream(q);
  await live.waitUntil((x) => x.retry !== null, 5000, 'the stream to start');
  const send = async () => {
    await rpc('weblogUpdates.extendedPing', ['A', `http://${a}/`, `http://${a}/`, `http://${a}/feed`, 'Tech']); // yes
    await rpc('weblogUpdates.extendedPing', ['B', `http://blog.${b}/`, `http://blog.${b}/`, `http://blog.${b}/feed`, 'sport|News']); // yes
    await rpc('weblogUpdates.extendedPing', ['C', `http://${c}/`, `http://${c}/`, `http://${c}/feed`, 'Tech']); // host
    await rpc('weblogUpdates.extendedPing', ['A2', `http://${a}/2`, `http://${a}/2`, `http://${a}/feed`, 'sport']); // tag
    await ping(`http://${b}/form`, 'tech'); // method pingSiteForm
  };
  await send();
  const replay = await stream(`${q}&since=${before}&until=live`);
  await replay.waitUntil((x) => x.ended, 10_000, 'the end of the replay');
  const expected = [`http://${a}/`, `http://blog.${b}/`];
  assert.deepEqual(
    dataOf(replay.events).map((p) => p.url),
    expected,
  );
  await live.waitUntil((x) => x.events.length >= 2, 10_000, 'the live events');
  // The last of them (the pingSiteForm one) is dropped: a sentinel that passes shows nothing else came.
  await rpc('weblogUpdates.ping', ['S', `http://${a}/sentinel`]);
  await rpc('weblogUpdates.extendedPing', ['S', `http://${a}/s`, `http://${a}/s`, `http://${a}/feed`, 'news']);
  await live.waitUntil((x) => dataOf(x.events).some((p) => p.url === `http://${a}/s`), 10_000, 'the sentinel');
  assert.deepEqual(
    dataOf(live.events).map((p) => p.url),
    [...expected, `http://${a}/s`],
  );
  live.close();
});

test('GET /stream/info publishes the ends of the log, the timings, the parameters, the caps, the connections and the slow-consumer rule', async () => {
  await ping(uniqueUrl('info'));
  const c = await stream();
  await c.waitUntil((x) => x.retry !== null, 5000, 'the stream to start');
  const r = await t.app.inject({ method: 'GET', url: '/stream/info' });
  assert.equal(r.statusCode, 200);
  assert.match(r.headers['content-type'] as string, /^application\/json/);
  assert.equal(r.headers['cache-control'], 'no-store');
  const info = r.json();
  const [ends] = await t.app.db.query<{ lo: number; hi: number; lo_at: Date; hi_at: Date }>(
    `select (select id from pings order by id limit 1) as lo, (select id from pings order by id desc limit 1) as hi,
            (select received_at from pings order by id limit 1) as lo_at, (select received_at from pings order by id desc limit 1) as hi_at`,
  );
  assert.deepEqual(info.oldest, { position: Number(ends.lo), time: new Date(ends.lo_at).toISOString() });
  assert.equal(info.newest.position, Number(ends.hi));
  assert.equal(info.newest.time, new Date(ends.hi_at).toISOString());
  assert.equal(info.prunedThrough, 0);
  assert.equal(info.retentionDays, 30);
  assert.equal(info.retryMs, 200);
  assert.equal(info.cursorMs, CURSOR_MS);
  assert.equal(info.heartbeatMs, 15000);
  assert.deepEqual(info.events, ['ping', 'verified', 'reset', 'live', 'refused']);
  assert.deepEqual(info.parameters, ['since', 'host', 'tag', 'types', 'method', 'outcome', 'until', 'mode', 'spam']);
  assert.deepEqual(info.filters.host, { max: 100 });
  assert.deepEqual(info.filters.tag, { max: 20 });
  assert.deepEqual(info.filters.method, ['ping', 'extendedPing', 'pingSiteForm', 'rssPing']);
  assert.equal(info.clients.max, 1000);
  assert.equal(info.clients.open, t.app.stream.size);
  assert.ok(info.clients.open >= 1);
  assert.deepEqual(
    { ...info.slowConsumer, rule: undefined },
    { bufferBytes: 1048576, minBytesPerSecond: 1024, windowMs: 60000, rule: undefined },
  );
  assert.equal(
    info.slowConsumer.rule,
    'A live connection with more than 1024 KiB waiting goes back to catching up from the database at its own pace. A connection is disconnected only when it is catching up with bytes waiting for it and reads less than 1024 bytes/s over 60 s; it resumes with Last-Event-ID.',
  );
  assert.deepEqual(Object.keys(info.replay), ['page', 'concurrency', 'rowsPerSecond', 'bytesPerSecond']);
  c.close();
});
