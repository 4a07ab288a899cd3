// POST /websub's answers before any request leaves the hub (WebSub §5.1): every malformed request is a
// 400 text/plain with its one-line reason and queues nothing; a request that is not a form is a 415; the
// subscription cap is a 503 with Retry-After for a new subscriber but not for a renewal or an unsubscribe;
// a well-formed request is a 202 with its task committed.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import type { TestApp } from '../../helpers/app.js';
import { ADMIN_TOKEN, hubApp, PUBLIC, queued, subscribe } from './helpers.js';

// Nothing listens on this address: the worker's requests fail (and are retried a minute later, after the test).
const CALLBACK = 'http://127.0.0.39:9/cb';
const TOPIC = `${PUBLIC}/changes.xml`;

let t: TestApp;
before(async () => {
  t = await hubApp({ WEBSUB_MAX_SUBSCRIPTIONS: 2 });
});
after(async () => {
  await t.close();
});

const ok = { 'hub.callback': CALLBACK, 'hub.mode': 'subscribe', 'hub.topic': TOPIC };

const malformed: [string, Record<string, string>, string][] = [
  ['no callback', { 'hub.mode': 'subscribe', 'hub.topic': TOPIC }, 'hub.callback is required'],
  ['a relative callback', { ...ok, 'hub.callback': '/cb' }, 'hub.callback must be an absolute http or https URL'],
  ['an ftp callback', { ...ok, 'hub.callback': 'ftp://127.0.0.39/cb' }, 'hub.callback must be an absolute http or https URL'],
  [
    'a callback with credentials',
    { ...ok, 'hub.callback': 'http://user:pw@127.0.0.39/cb' },
    'hub.callback must not contain a user name or password',
  ],
  ['a callback with a fragment', { ...ok, 'hub.callback': 'http://127.0.0.39/cb#x' }, 'hub.callback must not contain a fragment'],
  ['no mode', { 'hub.callback': CALLBACK, 'hub.topic': TOPIC }, 'hub.mode is required'],
  ['an unknown mode', { ...ok, 'hub.mode': 'notify' }, 'hub.mode must be subscribe, unsubscribe or publish'],
  ['no topic', { 'hub.callback': CALLBACK, 'hub.mode': 'subscribe' }, 'hub.topic is required'],
  ['a relative topic', { ...ok, 'hub.topic': '/changes.xml' }, 'hub.topic must be an absolute URL'],
  ['a zero lease', { ...ok, 'hub.lease_seconds': '0' }, 'hub.lease_seconds must be a positive integer'],
  ['a negative lease', { ...ok, 'hub.lease_seconds': '-5' }, 'hub.lease_seconds must be a positive integer'],
  ['a fractional lease', { ...ok, 'hub.lease_seconds': '1.5' }, 'hub.lease_seconds must be a positive integer'],
  ['a secret of 200 bytes', { ...ok, 'hub.secret': 'é'.repeat(100) }, 'hub.secret must be less than 200 bytes'],
];

for (const [what, form, reason] of malformed) {
  test(`400 for ${what}: "${reason}"`, async () => {
    const r = await subscribe(t, form);
    assert.equal(r.status, 400);
    assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(r.body, `${reason}\n`);
  });
}

test('400 for a parameter given twice, naming it', async () => {
  const r = await t.app.inject({
    method: 'POST',
    url: '/websub',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: `hub.callback=${encodeURIComponent(CALLBACK)}&hub.mode=subscribe&hub.mode=unsubscribe&hub.topic=${encodeURIComponent(TOPIC)}`,
  });
  assert.equal(r.statusCode, 400);
  assert.equal(r.body, 'hub.mode must be given once, and be at most 64 characters\n');
});

test('an empty POST hears about the first missing parameter', async () => {
  const r = await t.app.inject({ method: 'POST', url: '/websub' });
  assert.equal(r.statusCode, 400);
  assert.equal(r.body, 'hub.callback is required\n');
});

test('415 for a body that is not a form, with the reason as text', async () => {
  const r = await t.app.inject({
    method: 'POST',
    url: '/websub',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify(ok),
  });
  assert.equal(r.statusCode, 415);
  assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8');
  assert.equal(r.body, 'send the parameters as application/x-www-form-urlencoded (WebSub §5.1)\n');
});

test('malformed requests queued nothing', async () => {
  assert.equal(await queued(t), 0);
});

test('unknown parameters are ignored; a secret of 199 bytes is taken; 202 with the task committed', async () => {
  const r = await subscribe(t, { ...ok, 'hub.secret': 's'.repeat(199), 'hub.verify': 'sync', extra: 'x' });
  assert.equal(r.status, 202);
  assert.equal(r.body, '');
  const rows = await t.app.db.query<{ kind: string; topic: string; callback: string; mode: string; lease_seconds: number; secret: string }>(
    'select kind, topic, callback, mode, lease_seconds, secret from websub_tasks',
  );
  assert.deepEqual(rows, [
    {
      kind: 'verify',
      topic: TOPIC,
      callback: CALLBACK,
      mode: 'subscribe',
      lease_seconds: t.config.WEBSUB_LEASE_DEFAULT,
      secret: 's'.repeat(199),
    },
  ]);
});

test('the same subscriber asking again is folded into its waiting request (one task, the latest wins)', async () => {
  const r = await subscribe(t, { ...ok, 'hub.lease_seconds': '7200' });
  assert.equal(r.status, 202);
  const rows = await t.app.db.query<{ lease_seconds: number; secret: string | null; seq: number }>(
    'select lease_seconds, secret, seq from websub_tasks',
  );
  assert.deepEqual(rows, [{ lease_seconds: 7200, secret: null, seq: 1 }]);
});

test('at the cap (active + pending), a new subscriber gets 503 with Retry-After; a renewal and an unsubscribe do not', async () => {
  assert.equal((await subscribe(t, { ...ok, 'hub.callback': 'http://127.0.0.39:9/second' })).status, 202);
  const full = await subscribe(t, { ...ok, 'hub.callback': 'http://127.0.0.39:9/third' });
  assert.equal(full.status, 503);
  assert.equal(full.headers['retry-after'], '3600');
  assert.equal(full.body, 'this hub keeps at most 2 subscriptions and has no room for another; try again later\n');
  assert.equal((await subscribe(t, { ...ok, 'hub.callback': 'http://127.0.0.39:9/second' })).status, 202);
  assert.equal((await subscribe(t, { ...ok, 'hub.callback': 'http://127.0.0.39:9/second', 'hub.mode': 'unsubscribe' })).status, 202);
  // A topic that is not ours is denied, not counted.
  assert.equal(
    (await subscribe(t, { ...ok, 'hub.callback': 'http://127.0.0.39:9/fourth', 'hub.topic': `${PUBLIC}/other.xml` })).status,
    202,
  );
});

test('the operator API lists subscriptions without their secrets, to the operator only', async () => {
  // Open to anyone before: a callback's path and its delivery health are the operator's business.
  const anonymous = await t.app.inject({ method: 'GET', url: '/api/websub/subscriptions' });
  assert.equal(anonymous.statusCode, 401);
  assert.deepEqual(anonymous.json(), {
    error: 'ADMIN_UNAUTHORIZED',
    message: 'This needs ADMIN_TOKEN: send "Authorization: Bearer <token>".',
  });
  const operator = { authorization: `Bearer ${ADMIN_TOKEN}` };
  await t.app.db.query(
    `insert into websub_subscriptions (topic, path, callback, secret, lease_seconds, expires_at, last_status) values ($1, '/changes.xml', 'http://127.0.0.39:9/api', 'hush', 3600, now() + interval '1 hour', 204)`,
    [TOPIC],
  );
  const r = await t.app.inject({ method: 'GET', url: '/api/websub/subscriptions', headers: operator });
  assert.equal(r.statusCode, 200);
  assert.doesNotMatch(r.body, /hush/);
  const [s] = r.json().subscriptions;
  assert.deepEqual(Object.keys(s).sort(), [
    'callback',
    'expires_at',
    'failures',
    'last_error',
    'last_status',
    'last_success_at',
    'state',
    'topic',
  ]);
  assert.deepEqual(
    { ...s, expires_at: undefined },
    {
      topic: TOPIC,
      callback: 'http://127.0.0.39:9/api',
      state: 'active',
      expires_at: undefined,
      failures: 0,
      last_status: 204,
      last_error: null,
      last_success_at: null,
    },
  );
  assert.ok(Math.abs(Date.parse(s.expires_at) - Date.now() - 3600_000) < 60_000, s.expires_at);
  // A callback's query (often the subscriber's own token) is not shown.
  await t.app.db.query(
    `insert into websub_subscriptions (topic, path, callback, lease_seconds, expires_at) values ($1, '/changes.xml', 'http://127.0.0.39:9/cb?key=s3cr3t', 3600, now() + interval '1 hour')`,
    [TOPIC],
  );
  const again = await t.app.inject({ method: 'GET', url: '/api/websub/subscriptions', headers: operator });
  assert.doesNotMatch(again.body, /s3cr3t/);
  assert.ok(again.json().subscriptions.some((x: { callback: string }) => x.callback === 'http://127.0.0.39:9/cb?…'));
  // The same answer under the operator API's own prefix.
  const admin = await t.app.inject({ method: 'GET', url: '/api/admin/websub/subscriptions', headers: operator });
  assert.equal(admin.statusCode, 200);
  assert.deepEqual(admin.json(), again.json());
});
