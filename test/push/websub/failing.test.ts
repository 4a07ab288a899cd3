// Deliveries that fail (WebSub §7: only a 2xx counts) are retried with backoff; after six failures in a
// row the subscription is failing (in the operator API and the gauge) and is retried at the longest
// interval (an hour by default) with the newest content; a success clears it. A lease that ends stops deliveries and the sweep
// deletes the subscription. Backoffs are shortened through the hub's timing (milliseconds, not minutes).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
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
  t = await hubApp({ WEBSUB_LEASE_MIN: 1, WEBSUB_LEASE_DEFAULT: 3600, WEBSUB_LEASE_MAX: 3600 });
  // 10, 20, 40, 80, 160 ms between the first six tries; a failing subscription's rhythm stays a minute.
  Object.assign(t.app.websub.timing, { retryBaseMs: 10, retryMaxMs: 60_000 });
  sub = await startSubscriber('127.0.0.33');
});
after(async () => {
  await t.close();
  await sub.close();
});

const TOPIC = `${PUBLIC}/changes.xml`;

async function subscribed(path: string, lease?: string): Promise<void> {
  const r = await subscribe(t, {
    'hub.callback': `${sub.origin}${path}`,
    'hub.mode': 'subscribe',
    'hub.topic': TOPIC,
    ...(lease ? { 'hub.lease_seconds': lease } : {}),
  });
  assert.equal(r.status, 202);
  await waitForHub(t, async () => (await queued(t)) === 0, `the verification of ${path}`);
  assert.equal(sub.getsTo(path).length, 1);
}

const row = async (path: string) => (await subscriptionsApi(t)).find((s) => s.callback === `${sub.origin}${path}`);

test('a subscriber answering 500 becomes failing after six failures; when it answers 2xx again it gets the newest content and is active', async () => {
  let status = 500;
  sub.onPost('/down', () => ({ status }));
  await subscribed('/down');
  await publish(t);
  await waitForHub(t, async () => (await row('/down'))?.state === 'failing', 'the subscription to be failing');
  const failing = await row('/down');
  assert.equal(failing.failures, 6);
  assert.equal(failing.last_status, 500);
  assert.equal(failing.last_error, 'the callback answered 500');
  assert.equal(failing.last_success_at, null);
  assert.equal(sub.postsTo('/down').length, 6);
  assert.equal(await metric(t, 'pingd_websub_subscriptions{state="failing"}'), 1);
  const [task] = await t.app.db.query<{ id: number; due_at: Date }>('select id, due_at from websub_tasks');
  const wait = new Date(task.due_at).getTime() - Date.now();
  assert.ok(wait > 50_000 && wait <= 60_000, `a failing subscription is tried at the longest interval, here in ${wait} ms`);

  // A newer rendering meanwhile waits for that try; when it comes (moved to now), it carries what is current then.
  await publish(t);
  status = 200;
  await t.app.db.query('update websub_tasks set due_at = now() where id = $1', [task.id]);
  await waitForHub(t, async () => (await row('/down'))?.state === 'active', 'the subscription to recover');
  const recovered = await row('/down');
  assert.equal(recovered.failures, 0);
  assert.equal(recovered.last_status, 200);
  assert.equal(recovered.last_error, null);
  assert.ok(Date.now() - Date.parse(recovered.last_success_at) < 60_000);
  const current = await t.app.inject({ method: 'GET', url: '/changes.xml', headers: { 'accept-encoding': 'identity' } });
  assert.equal(sub.postsTo('/down').length, 7);
  assert.deepEqual(sub.postsTo('/down').at(-1)!.body, current.rawPayload);
  assert.notDeepEqual(sub.postsTo('/down')[0].body, current.rawPayload, 'the failed tries carried the older rendering');
  await waitForHub(t, async () => (await queued(t)) === 0, 'the delivery task to finish');
  assert.equal(await metric(t, 'pingd_websub_deliveries_total{outcome="failed"}'), 6);
  assert.equal(await metric(t, 'pingd_websub_subscriptions{state="failing"}'), 0);
});

test('a redirect is a failed delivery, and its target is never POSTed to', async () => {
  sub.onPost('/moving', () => ({ status: 307, headers: { location: `${sub.origin}/target` } }));
  await subscribed('/moving');
  await publish(t);
  await waitForHub(t, async () => (await row('/moving'))?.failures >= 2, 'two failed deliveries');
  const r = await row('/moving');
  assert.equal(r.last_status, 307);
  assert.equal(sub.postsTo('/target').length, 0);
  await t.app.inject({
    method: 'POST',
    url: '/websub',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ 'hub.callback': `${sub.origin}/moving`, 'hub.mode': 'unsubscribe', 'hub.topic': TOPIC }).toString(),
  });
  await waitForHub(t, async () => (await row('/moving')) === undefined, 'the unsubscription');
});

test('429 with Retry-After: the next try waits for it, and the host is blocked meanwhile', async () => {
  sub.onPost('/slow', () => ({ status: 429, headers: { 'retry-after': '3600' } }));
  // Alone on its host: the block would hold other subscribers' deliveries for the hour too.
  await t.app.db.query('delete from websub_subscriptions');
  await subscribed('/slow');
  await publish(t);
  await waitForHub(t, async () => (await row('/slow'))?.last_status === 429, 'the 429');
  const [task] = await t.app.db.query<{ due_at: Date }>(
    `select t.due_at from websub_tasks t join websub_subscriptions s on s.id = t.subscription_id where s.callback = $1`,
    [`${sub.origin}/slow`],
  );
  const wait = new Date(task.due_at).getTime() - Date.now();
  assert.ok(wait > 3500_000 && wait <= 3600_000, `retried in ${wait} ms`);
  const [host] = await t.app.db.query<{ blocked_until: Date }>('select blocked_until from fetch_hosts where host = $1', [
    new URL(sub.origin).host,
  ]);
  assert.ok(new Date(host.blocked_until).getTime() - Date.now() > 3500_000);
  // Clear the block so the next test can reach the host.
  await t.app.db.query('delete from websub_subscriptions where callback = $1', [`${sub.origin}/slow`]);
  await t.app.db.query('update fetch_hosts set blocked_until = null where host = $1', [new URL(sub.origin).host]);
});

test('a lease that ended gets no delivery and the sweep deletes the subscription', async () => {
  await subscribed('/brief', '1');
  assert.equal(sub.getsTo('/brief')[0].query.get('hub.lease_seconds'), '1');
  await waitForHub(t, async () => (await row('/brief')) === undefined, 'the lease to end', 5000);
  const before = sub.postsTo('/brief').length;
  await publish(t);
  await waitForHub(t, async () => (await queued(t)) === 0, 'the other deliveries');
  assert.equal(sub.postsTo('/brief').length, before);
  const [{ n }] = await t.app.db.query<{ n: number }>('select count(*)::int as n from websub_subscriptions where callback = $1', [
    `${sub.origin}/brief`,
  ]);
  assert.equal(n, 1, 'expired but not yet swept');
  assert.equal(await t.app.websub.sweep(), 1);
  const [{ m }] = await t.app.db.query<{ m: number }>('select count(*)::int as m from websub_subscriptions where callback = $1', [
    `${sub.origin}/brief`,
  ]);
  assert.equal(m, 0);
});
