// rssCloud notifications: a feed pinged (by rssCloud.ping, or by weblogUpdates naming the feed) whose
// verification finds new items reaches each subscriber with POST url=<feed> (an xml-rpc subscriber with the
// XML-RPC call of its notifyProcedure, byte for byte as rsscloud-server 4.0.0 sends it); an unchanged feed notifies
// nobody; a failing endpoint is retried with backoff, then the notification is dropped and counted; one
// notification in flight per endpoint host.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { TestApp } from '../../helpers/app.js';
import type { FeedServer } from '../../helpers/feed-server.js';
import { metric } from '../websub/helpers.js';
import {
  cloudApp,
  form,
  notifyCall,
  serveFeed,
  startEndpoint,
  startFeedServer,
  waitForCloud,
  type Endpoint,
  type Feed,
} from './helpers.js';

let t: TestApp;
let feeds: FeedServer;
let ep: Endpoint;
before(async () => {
  t = await cloudApp();
  feeds = await startFeedServer('127.0.0.3');
  ep = await startEndpoint('127.0.0.44');
});
after(async () => {
  await ep.close();
  await feeds.close();
  await t.close();
});

async function subscribe(feed: Feed, path: string): Promise<void> {
  const r = await form(t, '/rsscloud/pleaseNotify', {
    domain: ep.host,
    port: String(ep.port),
    path,
    protocol: 'http-post',
    url1: feed.url,
  });
  assert.equal(r.status, 200, r.body);
}

async function settledPings(): Promise<number> {
  const [r] = await t.app.db.query<{ n: number }>('select count(*)::int as n from ping_verifications where outcome is not null');
  return Number(r.n);
}

test('A changed feed, pinged by rssCloud.ping, notifies its subscribers with POST url=<feed>; an unchanged one does not', async () => {
  const feed = serveFeed(feeds);
  await subscribe(feed, '/one');
  await subscribe(feed, '/two');
  const before = await settledPings();
  // Nothing new since the subscription's fetch: verified unchanged, nobody notified.
  assert.equal((await form(t, '/rsscloud/ping', { url: feed.url })).status, 200);
  await waitForCloud(t, async () => (await settledPings()) > before, 'the first ping to be verified');
  assert.equal(ep.posts('/one').length, 0);
  assert.equal(ep.posts('/two').length, 0);

  feed.add('Second post');
  assert.equal((await form(t, '/rsscloud/ping', { url: feed.url })).status, 200);
  await waitForCloud(t, () => ep.posts('/one').length === 1 && ep.posts('/two').length === 1, 'both subscribers notified');
  for (const p of [...ep.posts('/one'), ...ep.posts('/two')]) {
    assert.equal(p.body, `url=${encodeURIComponent(feed.url)}`);
    assert.equal(p.headers['content-type'], 'application/x-www-form-urlencoded');
    assert.match(String(p.headers['user-agent']), /pingd/);
  }
  await waitForCloud(t, async () => (await metric(t, 'pingd_rsscloud_notifications_total{outcome="delivered"}')) === 2, 'the metric');
  const [q] = await t.app.db.query<{ n: number }>('select count(*)::int as n from rsscloud_notifications');
  assert.equal(q.n, 0);
});

test('An xml-rpc subscriber is called: POST text/xml, its notifyProcedure with the feed URL, as rsscloud-server 4.0.0 calls it', async () => {
  const feed = serveFeed(feeds);
  const r = await form(t, '/rsscloud/pleaseNotify', {
    notifyProcedure: 'river.feedUpdated',
    domain: ep.host,
    port: String(ep.port),
    path: '/RPC2-notify',
    protocol: 'xml-rpc',
    url1: feed.url,
  });
  assert.equal(r.status, 200, r.body);
  assert.equal(ep.posts('/RPC2-notify').length, 1, 'the test call');
  feed.add('Called');
  assert.equal((await form(t, '/rsscloud/ping', { url: feed.url })).status, 200);
  await waitForCloud(t, () => ep.posts('/RPC2-notify').length === 2, 'the xml-rpc subscriber notified');
  const call = ep.posts('/RPC2-notify')[1];
  assert.equal(call.headers['content-type'], 'text/xml');
  assert.equal(call.body, notifyCall('river.feedUpdated', feed.url));
  assert.match(String(call.headers['user-agent']), /pingd/);
});

test('A weblogUpdates.extendedPing naming the feed notifies too (verification is the one judge of "changed")', async () => {
  const feed = serveFeed(feeds);
  await subscribe(feed, '/ext');
  feed.add('News');
  const r = await t.app.pings.accept({ method: 'extendedPing', name: 'A blog', url: `${feeds.origin}/`, rssUrl: feed.url });
  assert.equal(r.ok, true);
  await waitForCloud(t, () => ep.posts('/ext').length === 1, 'the subscriber notified');
});

test('A failing endpoint is retried with backoff, then the notification is dropped and counted', async () => {
  t.app.rsscloud.timing.retryBaseMs = 50;
  t.app.rsscloud.timing.retryMaxMs = 100;
  const feed = serveFeed(feeds);
  let calls = 0;
  // The endpoint check passes; every notification after it fails.
  ep.answer('/down', (h) => (h.method === 'GET' ? { status: 200, body: h.query.get('challenge') ?? '' } : (calls++, { status: 500 })));
  await subscribe(feed, '/down');
  const dropped = (await metric(t, 'pingd_rsscloud_notifications_total{outcome="dropped"}')) ?? 0;
  feed.add('Into the void');
  assert.equal((await form(t, '/rsscloud/ping', { url: feed.url })).status, 200);
  await waitForCloud(
    t,
    async () => (await metric(t, 'pingd_rsscloud_notifications_total{outcome="dropped"}')) === dropped + 1,
    'the notification dropped',
  );
  assert.equal(calls, t.app.rsscloud.timing.attempts);
  const [s] = await t.app.db.query<{ delivered: number; failed: number; dropped: number; last_status: number }>(
    'select delivered, failed, dropped, last_status from rsscloud_subscriptions where resource_url = $1',
    [feed.url],
  );
  assert.deepEqual({ ...s }, { delivered: 0, failed: 5, dropped: 1, last_status: 500 });
});

test('One notification in flight per endpoint host: many subscribers on one host are notified one after another', async () => {
  const slow = await startEndpoint('127.0.0.45');
  try {
    const list: Feed[] = [];
    for (let i = 0; i < 4; i++) {
      const feed = serveFeed(feeds);
      list.push(feed);
      slow.answer(`/s${i}`, (h) =>
        h.method === 'GET' ? { status: 200, body: h.query.get('challenge') ?? '' } : { status: 200, delayMs: 100 },
      );
      const r = await form(t, '/rsscloud/pleaseNotify', {
        domain: slow.host,
        port: String(slow.port),
        path: `/s${i}`,
        protocol: 'http-post',
        url1: feed.url,
      });
      assert.equal(r.status, 200, r.body);
    }
    for (const f of list) f.add('More');
    for (const f of list) assert.equal((await form(t, '/rsscloud/ping', { url: f.url })).status, 200);
    await waitForCloud(t, () => list.every((_f, i) => slow.posts(`/s${i}`).length === 1), 'all four notified');
    assert.equal(slow.maxConcurrent, 1);
  } finally {
    await slow.close();
  }
});

test('/weblog?url= shows the feed’s subscriber count and the last notifications’ outcomes (never who); /status and /api/stats the queue', async () => {
  const feed = serveFeed(feeds);
  await subscribe(feed, '/page-a');
  await subscribe(feed, '/page-b');
  feed.add('Seen on the page');
  assert.equal((await form(t, '/rsscloud/ping', { url: feed.url })).status, 200);
  await waitForCloud(t, () => ep.posts('/page-a').length === 1 && ep.posts('/page-b').length === 1, 'both notified');
  await waitForCloud(
    t,
    async () =>
      (
        await t.app.db.query<{ n: number }>(
          'select count(*)::int as n from rsscloud_subscriptions where resource_url = $1 and delivered = 1',
          [feed.url],
        )
      )[0].n === 2,
    'both deliveries recorded',
  );
  const page = await t.app.inject({ method: 'GET', url: `/weblog?url=${encodeURIComponent(feed.url)}` });
  assert.equal(page.statusCode, 200);
  assert.match(
    page.body,
    /<dt>rssCloud<\/dt><dd>2 subscriber\(s\) · notifications delivered 2, failed tries 0, dropped 0<ul class="recent"><li>[0-9: -]+ UTC delivered \(HTTP 200\)<\/li><li>[0-9: -]+ UTC delivered \(HTTP 200\)<\/li><\/ul><\/dd>/,
  );
  assert.doesNotMatch(page.body, /127\.0\.0\.44/, 'the endpoints are not shown');
  const stats = await t.app.inject({ method: 'GET', url: '/api/stats' });
  const q = stats.json().health.queues.find((x: { name: string }) => x.name === 'rsscloud');
  assert.equal(typeof q.depth, 'number');
  assert.ok(q.subscriptions >= 2 && q.perMinute >= 2, JSON.stringify(q));
  const status = await t.app.inject({ method: 'GET', url: '/status' });
  assert.match(
    status.body,
    /rssCloud: <span id="rsscloud-subscriptions">\d+<\/span> subscriptions; <span id="rsscloud-per-minute">\d+<\/span> notified in the last minute/,
  );
});
