// RELAY_ONLY_VERIFIED under VERIFY_PINGS=mark: a ping is relayed once verification found something new
// in its feed, and one whose "feed" is not a feed is never relayed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, type TestApp } from '../../helpers/app.js';
import { startFeedServer, feedFixture, type FeedServer } from '../../helpers/feed-server.js';
import { pingAndSettle } from '../../verification/helpers.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';
import { derivedAll, relayIdle, startTarget, type Target } from './helpers.js';

let t: TestApp;
let s: FeedServer;
let target: Target;

before(async () => {
  s = await startFeedServer('127.0.0.49');
  target = await startTarget('127.0.0.49');
  t = await startApp({
    VERIFY_PINGS: 'mark',
    RELAY_ONLY_VERIFIED: true,
    RELAY_TARGETS: [target.url],
    RELAY_RATE_PER_MIN: 6000,
    FETCH_ALLOW_ADDRESSES: parseCidrList('127.0.0.0/8'),
    FETCH_HOST_INTERVAL_MS: 0,
    VERIFY_FEED_INTERVAL: 0,
    PING_MIN_INTERVAL: 0,
    RENDER_SCHEDULER: false,
  });
  Object.assign(t.app.relay.timing, { pollMs: 100, deriveGapMs: 20, flushMs: 20 });
  await t.app.ready();
});

after(async () => {
  await t?.close();
  await target?.close();
  await s?.close();
});

test('only verified pings are relayed', async () => {
  s.route('/good.xml', (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/rss+xml' });
    res.end(feedFixture('rss20.xml'));
  });
  const good = `${s.origin}/good/`;
  const spam = `${s.origin}/spam/`;
  assert.equal((await pingAndSettle(t, spam, `${s.origin}/missing.xml`)).outcome, 'not_a_feed');
  assert.equal((await pingAndSettle(t, good, `${s.origin}/good.xml`)).outcome, 'verified');
  await target.until((calls) => calls.some((c) => c.params[1] === good), 10_000);
  // Barrier: the relay's cursor is past every released ping (the spam one settled first: released, it would
  // come before the good one), and nothing is pending or in hand: every relay it derived has been sent.
  await derivedAll(t.app.db);
  await relayIdle(t);
  assert.deepEqual(
    (await t.app.db.query<{ weblog_url: string }>('select weblog_url from relay_jobs order by id')).map((j) => j.weblog_url),
    [good],
  );
  assert.deepEqual(
    target.calls.map((c) => [c.method, c.params[1]]),
    [['weblogUpdates.extendedPing', good]],
  );
});
