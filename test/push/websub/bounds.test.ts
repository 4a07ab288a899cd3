// One client against the hub's room, before any request leaves it (WebSub §5.1): a callback host past
// WEBSUB_MAX_PER_HOST subscriptions gets 503; past WEBSUB_MAX_PENDING intents waiting for their request, per
// callback host and per client, 429; an unsubscribe of a pair that is not subscribed is answered 422 and
// sends nothing; at the hub's cap the 503 is not a count over every subscription. Callbacks on 127.0.0.39:9
// and 127.0.2.x:9 (nothing listens: their verifications fail and wait a minute, so they stay pending).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import type { TestApp } from '../../helpers/app.js';
import { claimTasks } from '../../../src/push/websub/task-repository.js';
import { FLOOD_REFUSALS, WINDOW_MS } from '../../../src/push/websub/refusal-memory.js';
import { waitFor } from '../../helpers/wait.js';
import { hubApp, metric, PUBLIC, queued, startSubscriber, waitForHub, type Subscriber } from './helpers.js';

const TOPIC = `${PUBLIC}/changes.xml`;

let t: TestApp;
let sub: Subscriber;
before(async () => {
  t = await hubApp({ WEBSUB_MAX_PER_HOST: 3, WEBSUB_MAX_PENDING: 5, WEBSUB_MAX_SUBSCRIPTIONS: 10_000 });
  sub = await startSubscriber('127.0.0.34');
});
after(async () => {
  await sub.close();
  await t.close();
});

/** The form, sent from `client` (the address the hub counts it under). */
function ask(form: Record<string, string>, client = '127.0.0.1') {
  return askOf(t, form, client);
}

async function askOf(
  app: TestApp,
  form: Record<string, string>,
  client = '127.0.0.1',
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const r = await app.app.inject({
    method: 'POST',
    url: '/websub',
    remoteAddress: client,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams(form).toString(),
  });
  return { status: r.statusCode, body: r.body, headers: r.headers };
}

const sub$ = (callback: string, more: Record<string, string> = {}) => ({
  'hub.callback': callback,
  'hub.mode': 'subscribe',
  'hub.topic': TOPIC,
  ...more,
});

test('one callback host cannot fill the hub: past WEBSUB_MAX_PER_HOST (any port) its new subscriptions get 503, other hosts still subscribe', async () => {
  // Each from a client of its own: the per-client bound is not what is tested here.
  for (const [i, port] of [9, 10, 11].entries())
    assert.equal((await ask(sub$(`http://127.0.0.39:${port}/cb${i}`), `127.0.1.${i + 1}`)).status, 202);
  const full = await ask(sub$('http://127.0.0.39:12/cb3'), '127.0.1.4');
  assert.equal(full.status, 503);
  assert.equal(full.headers['retry-after'], '3600');
  assert.equal(
    full.body,
    'this hub keeps at most 3 subscriptions with callbacks on one host and has no room for another on 127.0.0.39; try again later\n',
  );
  // The same host by another spelling is the same host.
  assert.equal((await ask(sub$('http://127.0.0.39:9/cb4'), '127.0.1.5')).status, 503);
  // A renewal of a pair it has still passes; another host has room.
  assert.equal((await ask(sub$('http://127.0.0.39:9/cb0'), '127.0.1.6')).status, 202);
  assert.equal((await ask(sub$('http://127.0.0.38:9/cb'), '127.0.1.7')).status, 202);
  const [{ n }] = await t.app.db.query<{ n: number }>(
    `select count(*)::int as n from websub_tasks where callback like 'http://127.0.0.39:%'`,
  );
  assert.equal(n, 3);
});

test('unsubscribing a pair that is not subscribed is answered 422 and sends no request (10,000 of them sent 10,000 GETs)', async () => {
  const before = await queued(t);
  for (let i = 0; i < 200; i++) {
    const topic = i % 2 ? TOPIC : `${PUBLIC}/not-ours-${i}.xml`;
    const r = await ask(
      { 'hub.callback': `${sub.origin}/never/${i}`, 'hub.mode': 'unsubscribe', 'hub.topic': topic },
      `127.0.3.${1 + (i % 250)}`,
    );
    assert.equal(r.status, 422, r.body);
    assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(r.headers['retry-after'], undefined);
    assert.equal(r.body, 'hub.callback has no subscription to hub.topic: there is nothing to unsubscribe\n');
  }
  // Nothing was queued, so nothing can be sent: no task, no request to the callback.
  assert.equal(await queued(t), before);
  assert.equal(sub.gets.length, 0);
  assert.equal(await metric(t, 'pingd_websub_refusals_total{reason="not_subscribed"}'), 200);

  // A subscribed pair is unsubscribed as before: 202, then the verification of intent.
  assert.equal((await ask(sub$(`${sub.origin}/real`), '127.0.4.1')).status, 202);
  await waitForHub(t, () => sub.getsTo('/real').length === 1, 'the verification of the subscription');
  await waitForHub(
    t,
    async () => (await t.app.db.query(`select 1 from websub_subscriptions where callback = $1`, [`${sub.origin}/real`])).length === 1,
    'the subscription',
  );
  assert.equal(
    (await ask({ 'hub.callback': `${sub.origin}/real`, 'hub.mode': 'unsubscribe', 'hub.topic': TOPIC }, '127.0.4.1')).status,
    202,
  );
  await waitForHub(t, () => sub.getsTo('/real').length === 2, 'the verification of the unsubscription');
  assert.equal(sub.getsTo('/real')[1].query.get('hub.mode'), 'unsubscribe');
  assert.equal(sub.gets.length, 2);
});

test('a flood of requests waiting for verification is bounded by WEBSUB_MAX_PENDING per callback host and per client: 429 with Retry-After', async () => {
  // Per callback host: five intents to 127.0.2.1 from five clients wait (three subscribes, the host's
  // WEBSUB_MAX_PER_HOST, and two denials: a topic that is not ours is a request to the callback too); the
  // sixth is refused.
  for (let i = 0; i < 3; i++) assert.equal((await ask(sub$(`http://127.0.2.1:9/p${i}`), `127.0.5.${i + 1}`)).status, 202);
  for (let i = 3; i < 5; i++)
    assert.equal(
      (await ask(sub$(`http://127.0.2.1:9/denied${i}`, { 'hub.topic': `${PUBLIC}/other.xml` }), `127.0.5.${i + 1}`)).status,
      202,
    );
  const host = await ask(sub$('http://127.0.2.1:9/p5'), '127.0.5.6');
  assert.equal(host.status, 429);
  assert.equal(host.headers['retry-after'], '60');
  assert.equal(host.body, 'at most 5 requests for callbacks on 127.0.2.1 may wait for their verification at once; try again later\n');
  assert.equal((await ask(sub$('http://127.0.2.1:9/denied6', { 'hub.topic': `${PUBLIC}/other.xml` }), '127.0.5.7')).status, 429);
  // The same request again is folded into the one waiting: no new request, so it passes.
  assert.equal((await ask(sub$('http://127.0.2.1:9/p0', { 'hub.lease_seconds': '7200' }), '127.0.5.8')).status, 202);

  // Per client: one address asking for five hosts' callbacks, then a sixth.
  for (let i = 0; i < 5; i++) assert.equal((await ask(sub$(`http://127.0.2.${10 + i}:9/c`), '127.0.6.1')).status, 202);
  const client = await ask(sub$('http://127.0.2.15:9/c'), '127.0.6.1');
  assert.equal(client.status, 429);
  assert.equal(client.headers['retry-after'], '60');
  assert.equal(client.body, 'at most 5 requests from one client may wait for their verification at once; try again later\n');
  // IPv6 clients are counted by their /64.
  for (let i = 0; i < 5; i++) assert.equal((await ask(sub$(`http://127.0.2.${20 + i}:9/c`), `2001:db8:0:7::${i + 1}`)).status, 202);
  assert.equal((await ask(sub$('http://127.0.2.25:9/c'), '2001:db8:0:7:ffff::1')).status, 429);
  // Another client still gets in.
  assert.equal((await ask(sub$('http://127.0.2.15:9/c'), '127.0.6.2')).status, 202);
});

test('a full hub refuses a new subscriber without counting every subscription for each refusal (15 ms each at 10,000)', async () => {
  const cap = await hubApp({ WEBSUB_MAX_SUBSCRIPTIONS: 40 });
  try {
    await cap.app.db.query(
      `insert into websub_subscriptions (topic, path, callback, lease_seconds, expires_at)
       select $1, '/changes.xml', 'http://127.0.0.39:9/full/' || i, 3600, now() + interval '1 hour' from generate_series(1, 40) i`,
      [TOPIC],
    );
    // Statements that count rows with no bound (no LIMIT): a count over every subscription.
    let unbounded = 0;
    const db = cap.app.db;
    const real = db.query.bind(db);
    db.query = ((sql: string, ...rest: unknown[]) => {
      if (/count\(\*\)/i.test(sql) && !/\blimit\b/i.test(sql)) unbounded++;
      return (real as (...a: unknown[]) => unknown)(sql, ...rest);
    }) as typeof db.query;
    const t0 = performance.now();
    const requests = 100;
    try {
      for (let i = 0; i < requests; i++) {
        const r = await cap.app.inject({
          method: 'POST',
          url: '/websub',
          remoteAddress: `127.0.7.${1 + (i % 250)}`,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: new URLSearchParams(sub$(`http://127.0.8.${1 + (i % 250)}:9/new${i}`)).toString(),
        });
        assert.equal(r.statusCode, 503);
        assert.equal(r.body, 'this hub keeps at most 40 subscriptions and has no room for another; try again later\n');
      }
    } finally {
      db.query = real;
    }
    const elapsed = performance.now() - t0;
    // The count is read at most once a second (whatever the rate of requests), never once per request.
    assert.ok(
      unbounded <= 1 + Math.ceil(elapsed / 1000),
      `${unbounded} unbounded counts for ${requests} refusals in ${Math.round(elapsed)} ms`,
    );
  } finally {
    await cap.close();
  }
});

/** Counts the statements that queue an intent (queueIntent's named statement) while `fn` runs. */
async function intentStatements(app: TestApp, fn: () => Promise<void>): Promise<number> {
  let n = 0;
  const db = app.app.db;
  const real = db.query.bind(db);
  db.query = ((sql: string, params?: unknown[], opts?: { name?: string }) => {
    if (opts?.name === 'pingd_queue_websub_intent') n++;
    return real(sql, params, opts);
  }) as typeof db.query;
  try {
    await fn();
  } finally {
    db.query = real;
  }
  return n;
}

test('a callback host flooding past its bound is refused from memory after FLOOD_REFUSALS refusals a second: the same 503, no statement', async () => {
  const f = await hubApp({ WEBSUB_MAX_PER_HOST: 2, WEBSUB_MAX_PENDING: 1000 });
  try {
    for (let i = 0; i < 2; i++) assert.equal((await askOf(f, sub$(`http://127.0.0.41:9/have${i}`), `127.0.9.${i + 1}`)).status, 202);
    const requests = 60;
    const t0 = performance.now();
    const statements = await intentStatements(f, async () => {
      for (let i = 0; i < requests; i++) {
        const r = await askOf(f, sub$(`http://127.0.0.41:9/flood${i}`), `127.0.10.${1 + (i % 250)}`);
        assert.equal(r.status, 503);
        assert.equal(r.headers['retry-after'], '3600');
        assert.equal(
          r.body,
          'this hub keeps at most 2 subscriptions with callbacks on one host and has no room for another on 127.0.0.41; try again later\n',
        );
      }
    });
    const windows = 1 + Math.ceil((performance.now() - t0) / WINDOW_MS);
    assert.ok(statements <= FLOOD_REFUSALS * windows, `${statements} statements for ${requests} refusals over ${windows} windows`);
    assert.ok(statements >= FLOOD_REFUSALS, `the first ${FLOOD_REFUSALS} were the database's: ${statements}`);
    assert.equal(await metric(f, 'pingd_websub_refusals_total{reason="host_full"}'), requests);
    // Other hosts are not touched by the memory, and nothing of the flood was queued.
    assert.equal((await askOf(f, sub$('http://127.0.0.42:9/cb'), '127.0.9.9')).status, 202);
    const [{ n }] = await f.app.db.query<{ n: number }>(`select count(*)::int as n from websub_tasks where callback like '%/flood%'`);
    assert.equal(n, 0);
  } finally {
    await f.close();
  }
});

test('a client flooding unsubscribes of pairs the hub does not have: 422 from the database, then 429 with Retry-After 1 from memory; other clients unaffected', async () => {
  const f = await hubApp();
  try {
    const statuses: number[] = [];
    let last = { status: 0, body: '', headers: {} as Record<string, unknown> };
    const statements = await intentStatements(f, async () => {
      for (let i = 0; i < 40; i++) {
        last = await askOf(
          f,
          { 'hub.callback': `http://127.0.0.43:9/never/${i}`, 'hub.mode': 'unsubscribe', 'hub.topic': TOPIC },
          '127.0.11.1',
        );
        statuses.push(last.status);
      }
    });
    // Each 422 is one statement; the 429s are memory's.
    const n422 = statuses.filter((s) => s === 422).length;
    assert.ok(n422 >= FLOOD_REFUSALS && n422 < 40, `statuses ${statuses.join(',')}`);
    assert.deepEqual(statuses.slice(0, FLOOD_REFUSALS), Array(FLOOD_REFUSALS).fill(422));
    assert.ok(
      statuses.every((s) => s === 422 || s === 429),
      statuses.join(','),
    );
    assert.equal(statements, n422);
    assert.equal(last.status, 429);
    assert.equal(last.headers['retry-after'], '1');
    assert.equal(
      last.body,
      'this client asked to end too many subscriptions this hub does not have within a second; try again in a second\n',
    );
    assert.equal(await metric(f, 'pingd_websub_refusals_total{reason="unknown_unsubscribes"}'), 40 - n422);
    // Another client's unsubscribe of an unknown pair is still the database's 422.
    assert.equal(
      (await askOf(f, { 'hub.callback': 'http://127.0.0.43:9/other', 'hub.mode': 'unsubscribe', 'hub.topic': TOPIC }, '127.0.11.2')).status,
      422,
    );
    // The window ends: the flooding client is asked of the database again.
    await waitFor(
      async () =>
        (await askOf(f, { 'hub.callback': 'http://127.0.0.43:9/later', 'hub.mode': 'unsubscribe', 'hub.topic': TOPIC }, '127.0.11.1'))
          .status === 422,
      { what: 'the window to end', timeoutMs: 5000, intervalMs: 200 },
    );
  } finally {
    await f.close();
  }
});

test('a claim takes intents in turn with a backlog of deliveries, and no more of one host than WEBSUB_HOST_CONCURRENCY', async () => {
  const q = await hubApp();
  try {
    // This test claims by hand: the app's own worker stops first.
    await q.app.websub.worker.close(0);
    await q.app.db.query(
      `insert into websub_subscriptions (topic, path, callback, lease_seconds, expires_at, callback_host)
       select $1, '/changes.xml', 'http://127.0.0.39:9/backlog/' || i, 3600, now() + interval '1 hour', '127.0.0.39' from generate_series(1, 40) i`,
      [TOPIC],
    );
    await q.app.db.query(
      `insert into websub_tasks (kind, coalesce_key, subscription_id, rendering_id, callback_host, due_at)
       select 'deliver', 'deliver ' || id, id, 1, callback_host, now() - interval '1 minute' from websub_subscriptions`,
    );
    await q.app.db.query(
      `insert into websub_tasks (kind, coalesce_key, topic, path, callback, mode, lease_seconds, callback_host)
       values ('verify', 'late intent', $1, '/changes.xml', 'http://127.0.0.38:9/new', 'subscribe', 3600, '127.0.0.38')`,
      [TOPIC],
    );
    const claimed = await claimTasks(q.app.db, 4, 60, [], 1);
    assert.deepEqual(claimed.map((c) => c.kind).sort(), ['deliver', 'verify'], 'one delivery of the backlog host, and the intent');
    // The backlog host's requests are in flight: its tasks are passed over.
    assert.deepEqual(await claimTasks(q.app.db, 4, 60, ['127.0.0.39'], 1), []);
  } finally {
    await q.close();
  }
});
