// The open hub's bounds on what strangers can make it fetch and fan out (each a 503 with Retry-After and its
// reason, before anything is queued): distinct feed topics per callback host (WEBSUB_MAX_TOPICS_PER_HOST),
// subscriptions per topic host (WEBSUB_MAX_PER_TOPIC_HOST), feed topics in all (WEBSUB_MAX_TOPICS). A
// subscriber's renewal, and a topic its host already has, always pass. Callbacks on 127.0.3.x:9 (nothing
// listens: their verifications fail and wait a minute, so their subscriptions stay pending and count).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import type { TestApp } from '../../helpers/app.js';
import { hubApp, metric } from './helpers.js';

let t: TestApp;
before(async () => {
  t = await hubApp({ WEBSUB_MAX_TOPICS_PER_HOST: 2, WEBSUB_MAX_PER_TOPIC_HOST: 2, WEBSUB_MAX_TOPICS: 5, WEBSUB_MAX_PENDING: 100 });
});
after(async () => {
  await t.close();
});

let client = 1;
async function ask(callback: string, topic: string): Promise<{ status: number; body: string; retryAfter: unknown }> {
  const r = await t.app.inject({
    method: 'POST',
    url: '/websub',
    remoteAddress: `127.0.9.${client++}`,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ 'hub.callback': callback, 'hub.mode': 'subscribe', 'hub.topic': topic }).toString(),
  });
  return { status: r.statusCode, body: r.body, retryAfter: r.headers['retry-after'] };
}

test('a callback host past WEBSUB_MAX_TOPICS_PER_HOST distinct feeds gets 503; a feed it already has still passes', async () => {
  assert.equal((await ask('http://127.0.3.1:9/a', 'http://a1.test/feed')).status, 202);
  assert.equal((await ask('http://127.0.3.1:9/a', 'http://a2.test/feed')).status, 202);
  const r = await ask('http://127.0.3.1:9/a', 'http://a3.test/feed');
  assert.equal(r.status, 503);
  assert.equal(r.retryAfter, '3600');
  assert.equal(
    r.body,
    'this hub keeps at most 2 feed topics subscribed from callbacks on one host and has no room for another on 127.0.3.1; try again later\n',
  );
  // Another callback of the same host for a feed it has: no new topic for that host.
  assert.equal((await ask('http://127.0.3.1:10/b', 'http://a1.test/feed')).status, 202);
  assert.equal(await metric(t, 'pingd_websub_refusals_total{reason="host_topics"}'), 1);
});

test('a topic host past WEBSUB_MAX_PER_TOPIC_HOST subscriptions gets 503, whatever the callback host', async () => {
  // a1.test holds two subscriptions (pending) from the test above.
  const r = await ask('http://127.0.3.2:9/c', 'http://a1.test/other-feed');
  assert.equal(r.status, 503);
  assert.equal(
    r.body,
    'this hub keeps at most 2 subscriptions to feeds on one host and has no room for another on a1.test; try again later\n',
  );
  assert.equal(await metric(t, 'pingd_websub_refusals_total{reason="topic_host_full"}'), 1);
});

test('past WEBSUB_MAX_TOPICS feed topics a new topic gets 503; a renewal still passes', async () => {
  // a1, a2 so far; three more fill the hub.
  const b1 = await ask('http://127.0.3.3:9/d', 'http://b1.test/feed');
  assert.equal(b1.status, 202, b1.body);
  const b2 = await ask('http://127.0.3.3:9/d', 'http://b2.test/feed');
  assert.equal(b2.status, 202, b2.body);
  assert.equal((await ask('http://127.0.3.4:9/e', 'http://b3.test/feed')).status, 202);
  const r = await ask('http://127.0.3.5:9/f', 'http://b4.test/feed');
  assert.equal(r.status, 503);
  assert.equal(r.body, 'this hub keeps at most 5 feed topics and has no room for another; try again later\n');
  const again = await ask('http://127.0.3.4:9/e', 'http://b3.test/feed');
  assert.equal(again.status, 202, again.body);
  assert.equal(await metric(t, 'pingd_websub_refusals_total{reason="topics_full"}'), 1);
});
