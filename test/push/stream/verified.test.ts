// The stream with verification: `verified` events carry each outcome (and the new items when the feed showed
// some), after the ping they verify; under VERIFY_PINGS=require a `ping` event is sent only once its ping
// is verified, like changes.xml lists it. Feeds are served by a real HTTP server on loopback.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, methodCall, type TestApp } from '../../helpers/app.js';
import { startFeedServer, feedFixture, bytes, type FeedServer } from '../../helpers/feed-server.js';
import { openStream, dataOf, type SseConnection } from '../../helpers/sse-client.js';
import { settled } from '../../verification/helpers.js';
import { eventsAfter } from '../../../src/push/stream/event-repository.js';

let s: FeedServer;
const apps: TestApp[] = [];
const conns: SseConnection[] = [];

before(async () => {
  s = await startFeedServer('127.0.0.13');
  s.route('/feed.xml', bytes(feedFixture('rss20.xml'), { 'content-type': 'application/rss+xml' }));
});

after(async () => {
  for (const c of conns) c.close();
  for (const a of apps) await a.close();
  await s?.close();
});

async function app(mode: 'mark' | 'require'): Promise<TestApp> {
  const t = await startApp({
    VERIFY_PINGS: mode,
    FETCH_ALLOW_PRIVATE: true,
    FETCH_HOST_INTERVAL_MS: 0,
    VERIFY_FEED_INTERVAL: 0,
    PING_MIN_INTERVAL: 0,
    RENDER_SCHEDULER: false,
  });
  apps.push(t);
  await t.listen();
  return t;
}

async function extendedPing(t: TestApp, name: string, url: string, feed: string): Promise<void> {
  const r = await fetch(`${t.url}/RPC2`, {
    method: 'POST',
    headers: { 'content-type': 'text/xml' },
    body: methodCall('weblogUpdates.extendedPing', [name, url, url, feed]),
  });
  assert.match(await r.text(), /<boolean>0<\/boolean>/);
}

const NEWEST = {
  title: 'Tips & tricks: what I’ve learned from ten years of blogging',
  link: 'http://www.example.com/blog/2026/11/21/tips-and-tricks/',
  guid: 'http://www.example.com/blog/2026/11/21/tips-and-tricks/',
};

test('VERIFY_PINGS=mark: every ping event at once, then a `verified` event with its outcome and new items', async () => {
  const t = await app('mark');
  const c = await openStream(`${t.url}/stream`);
  conns.push(c);
  const good = `${s.origin}/mark-good/`;
  const spam = `${s.origin}/mark-spam/`;
  await extendedPing(t, 'Good', good, `${s.origin}/feed.xml`);
  await extendedPing(t, 'Spam', spam, `${s.origin}/missing.xml`);
  await settled(t, good);
  await settled(t, spam);
  await c.waitFor(4);
  const [pGood, pSpam] = dataOf(c.events, 'ping');
  assert.deepEqual([pGood.url, pSpam.url], [good, spam]);
  const verified = dataOf(c.events, 'verified');
  const byUrl = new Map(verified.map((v) => [v.url, v]));
  assert.deepEqual(byUrl.get(good), { id: pGood.id, url: good, outcome: 'verified', newItems: [NEWEST] });
  assert.deepEqual(byUrl.get(spam), { id: pSpam.id, url: spam, outcome: 'not_a_feed', newItems: [] });
  // Positions only grow, and a verified event comes after the ping it verifies.
  const ids = c.events.map((e) => Number(e.id));
  assert.deepEqual(
    [...ids].sort((a, b) => a - b),
    ids,
  );
  const pos = (type: string, id: number) => Number(c.events.find((e) => e.event === type && JSON.parse(e.data).id === id)!.id);
  assert.ok(pos('verified', pGood.id) > pos('ping', pGood.id));

  // ?types=verified and resume both see the verified events (read back from the database).
  const replay = await openStream(`${t.url}/stream?since=0&types=verified`);
  conns.push(replay);
  await replay.waitFor(2);
  assert.deepEqual(
    replay.events.map((e) => JSON.parse(e.data).url),
    c.events.filter((e) => e.event === 'verified').map((e) => JSON.parse(e.data).url),
  );

  // ?outcome= narrows the verified events and lets ping events through; with types=verified, only those.
  const outcome = async (q: string) => {
    const r = await openStream(`${t.url}/stream?since=0&until=live&${q}`);
    conns.push(r);
    await r.waitUntil((x) => x.ended, 15_000, 'the end of the replay');
    assert.equal(r.live.length, 1);
    return r.events.map((e) => `${e.event} ${JSON.parse(e.data).url}${e.event === 'verified' ? ` ${JSON.parse(e.data).outcome}` : ''}`);
  };
  assert.deepEqual(await outcome('outcome=not_a_feed&types=verified'), [`verified ${spam} not_a_feed`]);
  assert.deepEqual(await outcome('outcome=verified&outcome=gone&types=verified'), [`verified ${good} verified`]);
  const mixed = await outcome('outcome=not_a_feed');
  assert.deepEqual(
    mixed.filter((e) => e.startsWith('ping')),
    [`ping ${good}`, `ping ${spam}`],
  );
  assert.deepEqual(
    mixed.filter((e) => e.startsWith('verified')),
    [`verified ${spam} not_a_feed`],
  );
});

test('VERIFY_PINGS=require: a ping event only once its ping is verified; an unverified ping never gets one', async () => {
  const t = await app('require');
  const c = await openStream(`${t.url}/stream`);
  conns.push(c);
  let release: () => void = () => undefined;
  const held = new Promise<void>((r) => (release = r));
  s.route('/held.xml', async (_req, res) => {
    await held;
    res.writeHead(200, { 'content-type': 'application/rss+xml' });
    res.end(feedFixture('rss20.xml'));
  });
  const good = `${s.origin}/require-good/`;
  const spam = `${s.origin}/require-spam/`;
  await extendedPing(t, 'Good', good, `${s.origin}/held.xml`);
  await extendedPing(t, 'Spam', spam, `${s.origin}/missing.xml`);
  await settled(t, spam);
  await c.waitFor(1);
  // Barrier: the connection has every event stored so far (what the stream reads). A released spam ping
  // would be among them: its `ping` position is drawn with its `verified` one, just before it.
  const stored = await eventsAfter(t.app.db, 'require', 0, 100);
  assert.deepEqual(
    stored.map((e) => [e.type, e.url]),
    [['verified', spam]],
  );
  await c.waitUntil((x) => x.events.length >= stored.length, 15_000, 'every stored event on the stream');
  assert.deepEqual(
    c.events.map((e) => [e.event, JSON.parse(e.data).url]),
    [['verified', spam]],
    'the spam ping is settled (not_a_feed) and never sent as a ping; the good one waits for its feed',
  );
  release();
  await settled(t, good);
  await c.waitFor(3);
  assert.deepEqual(
    c.events.map((e) => [e.event, JSON.parse(e.data).url]),
    [
      ['verified', spam],
      ['ping', good],
      ['verified', good],
    ],
  );
  assert.equal(JSON.parse(c.events[1].data).name, 'Good');
  assert.ok(Number(c.events[2].id) > Number(c.events[1].id));
  // Resuming from before the release replays the same sequence from the database.
  const again = await openStream(`${t.url}/stream`, { 'last-event-id': c.events[0].id });
  conns.push(again);
  await again.waitFor(2);
  assert.deepEqual(
    again.events.map((e) => [e.id, e.event]),
    c.events.slice(1).map((e) => [e.id, e.event]),
  );
});

test('an outcome committed but never stamped (the process died in between) is stamped by the poll and streamed', async () => {
  const t = await app('mark');
  const url = `${s.origin}/unstamped/`;
  await extendedPing(t, 'Unstamped', url, `${s.origin}/feed.xml`);
  await settled(t, url);
  const [job] = await t.app.db.query<{ ping_id: number }>(
    'select ping_id from ping_verifications v join pings p on p.id = v.ping_id where p.url = $1',
    [url],
  );
  // What a crash between the verifier's commit and the stamping leaves behind.
  await t.app.db.query('update ping_verifications set event_id = null, release_id = null where ping_id = $1', [job.ping_id]);
  const c = await openStream(`${t.url}/stream?types=verified&since=${job.ping_id}`);
  conns.push(c);
  await c.waitFor(1, 5000);
  assert.deepEqual(JSON.parse(c.events[0].data), { id: Number(job.ping_id), url, outcome: 'verified', newItems: [NEWEST] });
  const [row] = await t.app.db.query<{ event_id: number; release_id: number }>(
    'select event_id, release_id from ping_verifications where ping_id = $1',
    [job.ping_id],
  );
  assert.equal(c.events[0].id, String(row.event_id));
  assert.ok(Number(row.release_id) < Number(row.event_id), 'a verified outcome gets its release position first');
});
