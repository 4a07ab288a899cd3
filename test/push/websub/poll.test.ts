// The poll fallback for subscribed feed topics that never ping (WEBSUB_POLL_INTERVAL): off by default; when
// on, a topic is fetched again at most once per interval, never sooner than its own ttl or sy:updatePeriod
// allow, and never after a 410; a poll that finds new entries delivers them like a ping would.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import type { TestApp } from '../../helpers/app.js';
import { startFeedServer, type FeedServer } from '../../helpers/feed-server.js';
import { pollDue, pollGapSec } from '../../../src/push/websub/poll.js';
import { loadConfig } from '../../../src/platform/config.js';
import { hubApp, queued, startSubscriber, subscribe, subscriptionsApi, waitForHub, type Subscriber } from './helpers.js';

test("pollDue: the interval, the feed's ttl (minutes) and sy:updatePeriod/updateFrequency, never when gone, never when off", () => {
  const now = Date.parse('2026-11-26T12:00:00Z');
  const ago = (s: number) => new Date(now - s * 1000);
  assert.equal(pollGapSec(600, {}), 600);
  assert.equal(pollGapSec(600, { ttl: 60 }), 3600);
  assert.equal(pollGapSec(600, { updatePeriod: 'daily', updateFrequency: 4 }), 21_600);
  assert.equal(pollGapSec(600, { updatePeriod: 'hourly', updateFrequency: 12 }), 600, 'never more often than the interval');
  assert.equal(pollDue({ lastFetchAt: null, gone: false, hints: {} }, 600, now), true);
  assert.equal(pollDue({ lastFetchAt: ago(601), gone: false, hints: {} }, 600, now), true);
  assert.equal(pollDue({ lastFetchAt: ago(599), gone: false, hints: {} }, 600, now), false);
  assert.equal(pollDue({ lastFetchAt: ago(3000), gone: false, hints: { ttl: 60 } }, 600, now), false);
  assert.equal(pollDue({ lastFetchAt: null, gone: true, hints: {} }, 600, now), false, 'never after a 410');
  assert.equal(pollDue({ lastFetchAt: null, gone: false, hints: {} }, 0, now), false, 'off');
  assert.equal(loadConfig({}, {}).WEBSUB_POLL_INTERVAL, 0, 'off by default');
});

let t: TestApp;
let sub: Subscriber;
let blog: FeedServer;
let items = ['1'];
let ttl = '';
before(async () => {
  // An interval long enough that the timer never fires during the test: rounds are run by the test.
  t = await hubApp({ VERIFY_PINGS: 'mark', VERIFY_FEED_INTERVAL: 0, WEBSUB_POLL_INTERVAL: 3600 });
  sub = await startSubscriber('127.0.0.35');
  blog = await startFeedServer('127.0.0.52');
  blog.route('/feed.xml', (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/rss+xml' });
    res.end(
      `<rss version="2.0"><channel><title>P</title>${ttl}${items.map((n) => `<item><guid>${n}</guid><title>${n}</title></item>`).join('')}</channel></rss>`,
    );
  });
  blog.route('/gone.xml', (_req, res) => {
    res.writeHead(410);
    res.end();
  });
});
after(async () => {
  await t.close();
  await sub.close();
  await blog.close();
});

/** The feed's last fetch moved `minutes` back (an hour and a minute: a poll is due by the interval). */
async function age(url: string, minutes = 61): Promise<void> {
  await t.app.db.query('update feeds set last_fetch_at = now() - make_interval(mins => $2::int) where url = $1', [url, minutes]);
}

test('a due poll fetches the topic and delivers its new entries; a ttl longer than the interval holds the next one back', async () => {
  const topic = `${blog.origin}/feed.xml`;
  assert.equal((await subscribe(t, { 'hub.callback': `${sub.origin}/p`, 'hub.mode': 'subscribe', 'hub.topic': topic })).status, 202);
  await waitForHub(t, async () => (await subscriptionsApi(t)).length === 1, 'the subscription');
  assert.equal(await t.app.websub.pollRound(), 0, 'just fetched: not due');
  items = ['2', '1'];
  ttl = '<ttl>120</ttl>';
  await age(topic);
  const fetches = blog.hits('/feed.xml').length;
  assert.equal(await t.app.websub.pollRound(), 1);
  await waitForHub(t, () => sub.postsTo('/p').length === 1, 'the delivery of the poll');
  assert.equal(blog.hits('/feed.xml').length, fetches + 1);
  assert.match(sub.postsTo('/p')[0].body.toString('utf8'), /<guid>2<\/guid>/);
  await waitForHub(t, async () => (await queued(t)) === 0, 'the queue');
  await age(topic);
  assert.equal(await t.app.websub.pollRound(), 0, 'the feed asks for two hours between fetches');
});

test('a topic that answered 410 is never polled again', async () => {
  const topic = `${blog.origin}/feed.xml`;
  const gone = `${blog.origin}/gone.xml`;
  // Subscribed while it was a feed, then it went away (the route now answers 410 for the new URL).
  blog.route('/gone.xml', (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/rss+xml' });
    res.end('<rss version="2.0"><channel><title>G</title><item><guid>g</guid></item></channel></rss>');
  });
  assert.equal((await subscribe(t, { 'hub.callback': `${sub.origin}/g`, 'hub.mode': 'subscribe', 'hub.topic': gone })).status, 202);
  await waitForHub(t, async () => (await subscriptionsApi(t)).some((s) => s.topic === gone), 'the subscription');
  blog.route('/gone.xml', (_req, res) => {
    res.writeHead(410);
    res.end();
  });
  await age(gone);
  // Past the two hours the feed's ttl asks for.
  await age(topic, 121);
  assert.equal(await t.app.websub.pollRound(), 2);
  await waitForHub(t, async () => (await queued(t)) === 0, 'the polls');
  const [f] = await t.app.db.query<{ gone: boolean }>('select gone from feeds where url = $1', [gone]);
  assert.equal(f.gone, true);
  await age(gone, 10_000);
  await age(topic, 121);
  assert.equal(await t.app.websub.pollRound(), 1, 'only the live topic');
});
