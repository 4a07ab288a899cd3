// The hub end to end against a real subscriber on loopback: the verification of intent (WebSub §5.3: mode,
// topic, challenge, the lease granted; only an exact echo in a 2xx confirms), content distribution (§7: the
// topic's current bytes, its Content-Type, the Link header, §8's signature checked independently), the
// denial of a topic that is not ours (§5.2), unsubscribing, and the hub link without PUBLIC_URL.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import type { TestApp } from '../../helpers/app.js';
import {
  hubApp,
  metric,
  publish,
  PUBLIC,
  queued,
  startSubscriber,
  subscribe,
  subscriptionsApi,
  waitForHub,
  type Subscriber,
} from './helpers.js';

let t: TestApp;
let sub: Subscriber;
before(async () => {
  t = await hubApp({ WEBSUB_LEASE_MIN: 3600, WEBSUB_LEASE_DEFAULT: 864000, WEBSUB_LEASE_MAX: 2592000 });
  // Verification retries come after 20 ms, not a minute.
  Object.assign(t.app.websub.timing, { retryBaseMs: 20, retryMaxMs: 100 });
  sub = await startSubscriber('127.0.0.31');
});
after(async () => {
  await t.close();
  await sub.close();
});

const CHANGES = `${PUBLIC}/changes.xml`;
const SHORT = `${PUBLIC}/shortChanges.xml`;

test('subscribing: the callback is asked with mode, topic, a challenge and the granted lease, its own query kept', async () => {
  const asks: [string, string | undefined, number][] = [
    ['/short?token=a%20b', '60', 3600],
    ['/long', '99999999999999999999', 2592000],
    ['/default', undefined, 864000],
  ];
  for (const [path, lease] of asks) {
    const r = await subscribe(t, {
      'hub.callback': `${sub.origin}${path}`,
      'hub.mode': 'subscribe',
      'hub.topic': CHANGES,
      ...(lease ? { 'hub.lease_seconds': lease } : {}),
    });
    assert.equal(r.status, 202);
  }
  await waitForHub(t, async () => (await queued(t)) === 0, 'the three verifications');
  for (const [path, , granted] of asks) {
    const [get, ...more] = sub.getsTo(new URL(path, 'http://x').pathname);
    assert.equal(more.length, 0, path);
    assert.equal(get.query.get('hub.mode'), 'subscribe');
    assert.equal(get.query.get('hub.topic'), CHANGES);
    assert.match(get.query.get('hub.challenge') ?? '', /^[A-Za-z0-9_-]{32}$/);
    assert.equal(get.query.get('hub.lease_seconds'), String(granted));
  }
  assert.equal(sub.getsTo('/short')[0].query.get('token'), 'a b');
  const challenges = new Set(sub.gets.map((g) => g.query.get('hub.challenge')));
  assert.equal(challenges.size, 3, 'every verification has its own challenge');

  // Listed in the order they were stored (the order the worker verified them): compared by callback.
  const listed = (await subscriptionsApi(t)).sort((a, b) => (a.callback < b.callback ? -1 : 1));
  assert.deepEqual(
    listed.map((s) => [s.callback, s.state, s.failures, s.last_status, s.last_success_at]),
    [
      [`${sub.origin}/default`, 'active', 0, null, null],
      [`${sub.origin}/long`, 'active', 0, null, null],
      // The operator API does not show a callback's query (often the subscriber's token).
      [`${sub.origin}/short?…`, 'active', 0, null, null],
    ],
  );
  for (const s of listed) {
    const granted = asks.find(
      ([p]) => s.callback === `${sub.origin}${p.split('?')[0]}` || s.callback === `${sub.origin}${p.split('?')[0]}?…`,
    )![2];
    assert.ok(Math.abs(Date.parse(s.expires_at) - Date.now() - granted * 1000) < 60_000, `${s.callback} expires ${s.expires_at}`);
  }
  assert.equal(await metric(t, 'pingd_websub_verifications_total{outcome="confirmed"}'), 3);
  assert.equal(await metric(t, 'pingd_websub_subscriptions{state="active"}'), 3);
  assert.equal(await metric(t, 'pingd_websub_subscriptions{state="pending"}'), 0);
});

test('a wrong echo, an echo with a 404 and a redirect confirm nothing; a 503 is asked again and then confirms', async () => {
  sub.onGet('/wrong', (q) => ({ status: 200, body: `${q.get('hub.challenge')}\n` }));
  sub.onGet('/notfound', (q) => ({ status: 404, body: q.get('hub.challenge') ?? '' }));
  sub.onGet('/moved', () => ({ status: 302, headers: { location: `${sub.origin}/default` } }));
  let busy = 1;
  sub.onGet('/flaky', (q) => (busy-- > 0 ? { status: 503, body: 'later' } : { status: 200, body: q.get('hub.challenge') ?? '' }));
  for (const p of ['/wrong', '/notfound', '/moved', '/flaky']) {
    assert.equal((await subscribe(t, { 'hub.callback': `${sub.origin}${p}`, 'hub.mode': 'subscribe', 'hub.topic': SHORT })).status, 202);
  }
  await waitForHub(t, async () => (await queued(t)) === 0, 'the four verifications');
  assert.equal(sub.getsTo('/wrong').length, 1, 'a wrong echo is not asked again');
  assert.equal(sub.getsTo('/notfound').length, 1);
  assert.equal(sub.getsTo('/moved').length, 1);
  assert.equal(sub.getsTo('/flaky').length, 2);
  const short = (await subscriptionsApi(t)).filter((s) => s.topic === SHORT).map((s) => s.callback);
  assert.deepEqual(short, [`${sub.origin}/flaky`]);
  assert.equal(await metric(t, 'pingd_websub_verifications_total{outcome="not_confirmed"}'), 3);
});

test('a publication is POSTed to each subscriber of its topic: current bytes, Content-Type, Link, signature', async () => {
  const secret = 'a subscriber secret ✓';
  sub.onGet('/signed', (q) => ({ status: 200, body: q.get('hub.challenge') ?? '' }));
  assert.equal(
    (await subscribe(t, { 'hub.callback': `${sub.origin}/signed`, 'hub.mode': 'subscribe', 'hub.topic': CHANGES, 'hub.secret': secret }))
      .status,
    202,
  );
  await waitForHub(t, async () => (await queued(t)) === 0, 'the verification');

  await publish(t, 2);
  const callbacks = ['/signed', '/default', '/long', '/short', '/flaky'];
  await waitForHub(t, () => callbacks.every((p) => sub.postsTo(p).length === 1), 'a delivery to every subscriber');
  await waitForHub(t, async () => (await queued(t)) === 0, 'the deliveries to finish');

  const changes = await t.app.inject({ method: 'GET', url: '/changes.xml', headers: { 'accept-encoding': 'identity' } });
  const short = await t.app.inject({ method: 'GET', url: '/shortChanges.xml', headers: { 'accept-encoding': 'identity' } });
  const signed = sub.postsTo('/signed')[0];
  assert.deepEqual(signed.body, changes.rawPayload);
  assert.equal(signed.headers['content-type'], changes.headers['content-type']);
  assert.equal(signed.headers['content-type'], 'text/xml; charset=utf-8');
  assert.equal(signed.headers.link, `<${PUBLIC}/websub>; rel="hub", <${CHANGES}>; rel="self"`);
  assert.equal(
    signed.headers['x-hub-signature'],
    `sha256=${createHmac('sha256', Buffer.from(secret, 'utf8')).update(changes.rawPayload).digest('hex')}`,
  );

  const plain = sub.postsTo('/default')[0];
  assert.deepEqual(plain.body, changes.rawPayload);
  assert.equal(plain.headers['x-hub-signature'], undefined);
  const flaky = sub.postsTo('/flaky')[0];
  assert.deepEqual(flaky.body, short.rawPayload);
  assert.equal(flaky.headers.link, `<${PUBLIC}/websub>; rel="hub", <${SHORT}>; rel="self"`);
  assert.equal(sub.postsTo('/wrong').length + sub.postsTo('/notfound').length + sub.postsTo('/moved').length, 0);

  const listed = await subscriptionsApi(t);
  const signedRow = listed.find((s) => s.callback === `${sub.origin}/signed`);
  assert.equal(signedRow.last_status, 204);
  assert.ok(Date.now() - Date.parse(signedRow.last_success_at) < 60_000);
  assert.equal(await metric(t, 'pingd_websub_deliveries_total{outcome="delivered"}'), 5);
});

test('a topic that is not ours gets 202 and then a denial with the reason; nothing is stored', async () => {
  // Another URL on our own origin, or a scheme no feed is fetched by (any other http(s) URL is a feed topic:
  // test/push/websub/feed-topics.test.ts).
  const cases = [`${PUBLIC}/nope.xml`, 'ftp://elsewhere.test/changes.xml', `${PUBLIC}/changes.xml?x=1`];
  for (const [i, topic] of cases.entries()) {
    sub.onGet(`/denied${i}`, () => ({ status: 200, body: 'ok' }));
    assert.equal(
      (await subscribe(t, { 'hub.callback': `${sub.origin}/denied${i}`, 'hub.mode': 'subscribe', 'hub.topic': topic })).status,
      202,
    );
  }
  await waitForHub(t, async () => (await queued(t)) === 0, 'the denials');
  for (const [i, topic] of cases.entries()) {
    const gets = sub.getsTo(`/denied${i}`);
    assert.equal(gets.length, 1);
    assert.deepEqual(
      [...gets[0].query.entries()],
      [
        ['hub.mode', 'denied'],
        ['hub.topic', topic],
        [
          'hub.reason',
          topic.startsWith('ftp:')
            ? 'hub.topic must be an http or https URL of a feed'
            : `not a topic of this hub; the topics are ${PUBLIC}/changes.xml, ${PUBLIC}/shortChanges.xml, ${PUBLIC}/updates.xml`,
        ],
      ],
    );
  }
  assert.equal((await subscriptionsApi(t)).filter((s) => /denied/.test(s.callback)).length, 0);
  assert.equal(await metric(t, 'pingd_websub_verifications_total{outcome="denied"}'), 3);
});

test('unsubscribing: the callback confirms (no lease asked), the subscription is gone, and later publications skip it', async () => {
  assert.equal((await subscribe(t, { 'hub.callback': `${sub.origin}/long`, 'hub.mode': 'unsubscribe', 'hub.topic': CHANGES })).status, 202);
  await waitForHub(t, async () => (await queued(t)) === 0, 'the unsubscription');
  const last = sub.getsTo('/long').at(-1)!;
  assert.equal(last.query.get('hub.mode'), 'unsubscribe');
  assert.equal(last.query.get('hub.topic'), CHANGES);
  assert.equal(last.query.has('hub.lease_seconds'), false);
  assert.equal(
    (await subscriptionsApi(t)).some((s) => s.callback === `${sub.origin}/long`),
    false,
  );

  await publish(t);
  await waitForHub(t, () => sub.postsTo('/default').length === 2, 'the next delivery to a remaining subscriber');
  await waitForHub(t, async () => (await queued(t)) === 0, 'the deliveries to finish');
  assert.equal(sub.postsTo('/long').length, 1);
  assert.equal(sub.postsTo('/signed').length, 2);
});

test('without PUBLIC_URL: the hub and topic a document advertises (Link) subscribe, and deliveries name the same hub', async () => {
  const t2 = await hubApp({ PUBLIC_URL: undefined });
  try {
    const base = await t2.listen();
    const s2 = await startSubscriber('127.0.0.32');
    try {
      // Discovery (WebSub §4) as a subscriber does it: the hub and the topic from the document's Link header.
      // (changes.xml: a ping changes it; /updates.xml lists verified items, and verification is off here.)
      await t2.app.renderer.tick();
      const link = (await fetch(`${base}/changes.xml`, { method: 'HEAD' })).headers.get('link') ?? '';
      const hub = /<([^>]+)>; rel="hub"/.exec(link)?.[1];
      const self = /<([^>]+)>; rel="self"/.exec(link)?.[1];
      assert.equal(hub, `${base}/websub`);
      assert.equal(self, `${base}/changes.xml`);
      const form = new URLSearchParams({ 'hub.callback': `${s2.origin}/cb`, 'hub.mode': 'subscribe', 'hub.topic': self! });
      const r = await fetch(hub!, { method: 'POST', body: form });
      assert.equal(r.status, 202);
      await waitForHub(t2, async () => (await queued(t2)) === 0, 'the verification');
      assert.equal(s2.getsTo('/cb')[0].query.get('hub.mode'), 'subscribe');
      await publish(t2);
      await waitForHub(t2, () => s2.postsTo('/cb').length === 1, 'the delivery');
      const post = s2.postsTo('/cb')[0];
      assert.equal(post.headers.link, `<${base}/websub>; rel="hub", <${base}/changes.xml>; rel="self"`);
      const doc = await fetch(`${base}/changes.xml`, { headers: { 'accept-encoding': 'identity' } });
      assert.deepEqual(post.body, Buffer.from(await doc.arrayBuffer()));
      assert.equal(post.headers['content-type'], doc.headers.get('content-type'));
    } finally {
      await s2.close();
    }
  } finally {
    await t2.close();
  }
});
