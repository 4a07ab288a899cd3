// Callbacks that hang, drip or flood against the hub's worker: a host holds at most WEBSUB_HOST_CONCURRENCY
// of the WEBSUB_CONCURRENCY places while the others serve everyone else; hundreds of hanging verifications
// from one client wait no longer than WEBSUB_MAX_PENDING of them; and a delivery is received only when a 2xx
// comes in full, within WEBSUB_ANSWER_TIMEOUT_MS and WEBSUB_ANSWER_MAX_BYTES. Real servers on loopback
// (127.0.0.35–.38, .40) play the callbacks.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SafeFetcher, FetchError } from '../../../src/platform/fetch/safe-fetch.js';
import type { TestApp } from '../../helpers/app.js';
import { hubApp, metric, publish, PUBLIC, queued, startSubscriber, subscribe, waitForHub } from './helpers.js';

const TOPIC = `${PUBLIC}/changes.xml`;

interface Callbacks {
  origin: string;
  /** Requests open now, and the most open at once, by method. */
  open: { GET: number; POST: number };
  maxOpen: { GET: number; POST: number };
  seen: { method: string; path: string }[];
  close(): Promise<void>;
}

/**
 * A callback host: GETs echo the challenge unless `hangGet`; POSTs go to `onPost(path, res)` (which may never
 * answer). Counts the requests open at once.
 */
async function callbacks(
  address: string,
  o: { hangGet?: boolean; onPost: (path: string, res: http.ServerResponse) => void },
): Promise<Callbacks> {
  const c: Callbacks = { origin: '', open: { GET: 0, POST: 0 }, maxOpen: { GET: 0, POST: 0 }, seen: [], close: async () => undefined };
  const server = http.createServer((req, res) => {
    const m = req.method === 'POST' ? 'POST' : 'GET';
    const u = new URL(req.url ?? '/', 'http://x');
    c.seen.push({ method: m, path: u.pathname });
    c.open[m]++;
    c.maxOpen[m] = Math.max(c.maxOpen[m], c.open[m]);
    res.on('close', () => void c.open[m]--);
    req.resume();
    req.on('end', () => {
      if (m === 'GET') {
        if (!o.hangGet) res.writeHead(200, { 'content-type': 'text/plain' }).end(u.searchParams.get('hub.challenge') ?? '');
      } else o.onPost(u.pathname, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, address, r));
  c.origin = `http://${address}:${(server.address() as AddressInfo).port}`;
  c.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return c;
}

const hang = () => undefined;

async function subscribeFrom(t: TestApp, callback: string, client: string): Promise<number> {
  const r = await t.app.inject({
    method: 'POST',
    url: '/websub',
    remoteAddress: client,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ 'hub.callback': callback, 'hub.mode': 'subscribe', 'hub.topic': TOPIC }).toString(),
  });
  return r.statusCode;
}

// Four places, and callbacks that may hang for a minute: only the hub's own bounds keep it serving.
let t: TestApp;
before(async () => {
  t = await hubApp({ WEBSUB_CONCURRENCY: 4, WEBSUB_ANSWER_TIMEOUT_MS: 60_000, FETCH_TIMEOUT_MS: 60_000 });
});
after(async () => {
  await t.close();
});

const stored = async (t: TestApp, callback: string) =>
  (await t.app.db.query('select 1 from websub_subscriptions where callback = $1', [callback])).length === 1;

test('slow subscribers on a few hosts cannot hold every WEBSUB_CONCURRENCY place (300 stopped deliveries to 500 healthy ones for 60 s): a healthy subscriber is verified and delivered to while they hang', async () => {
  // Two hosts whose callbacks never answer a delivery: each may hold one of the four places.
  const slow = [await callbacks('127.0.0.36', { onPost: hang }), await callbacks('127.0.0.37', { onPost: hang })];
  const healthy = await startSubscriber('127.0.0.38');
  try {
    for (const [h, host] of slow.entries())
      for (let i = 0; i < 5; i++) assert.equal(await subscribeFrom(t, `${host.origin}/slow${i}`, `127.0.9.${h + 1}`), 202);
    await waitForHub(t, async () => (await queued(t)) === 0, 'the verifications of the slow subscribers');
    await publish(t);
    await waitForHub(t, () => slow.every((h) => h.open.POST >= 1), 'a delivery hanging at each slow host');

    assert.equal(await subscribeFrom(t, `${healthy.origin}/cb`, '127.0.9.9'), 202);
    await waitForHub(t, () => stored(t, `${healthy.origin}/cb`), 'the healthy subscriber to be verified while the slow ones hang', 25_000);
    await publish(t);
    await waitForHub(t, () => healthy.postsTo('/cb').length === 1, 'a delivery to the healthy subscriber while the slow ones hang', 25_000);
    assert.ok(
      slow.every((h) => h.open.POST >= 1),
      'the slow deliveries were still hanging',
    );
    for (const h of slow) assert.equal(h.maxOpen.POST, 1, `${h.origin}: at most WEBSUB_HOST_CONCURRENCY (1) deliveries in flight`);
  } finally {
    // The hanging sockets first: the worker's requests end with them, and the app closes at once.
    for (const h of slow) await h.close();
    await healthy.close();
  }
});

test('400 callbacks that hang during verification hold no legitimate subscriber back: past WEBSUB_MAX_PENDING the client gets 429', async () => {
  const hanging = await callbacks('127.0.0.35', { hangGet: true, onPost: hang });
  const legit = await startSubscriber('127.0.0.40');
  try {
    const answers: number[] = [];
    for (let i = 0; i < 400; i++) answers.push(await subscribeFrom(t, `${hanging.origin}/h${i}`, '127.0.0.1'));
    assert.equal(answers.filter((s) => s === 202).length, 20, 'WEBSUB_MAX_PENDING (20) of them wait');
    assert.equal(answers.filter((s) => s === 429).length, 380);
    const refused = await t.app.inject({
      method: 'POST',
      url: '/websub',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ 'hub.callback': `${hanging.origin}/again`, 'hub.mode': 'subscribe', 'hub.topic': TOPIC }).toString(),
    });
    assert.equal(refused.statusCode, 429);
    assert.equal(
      refused.body,
      'at most 20 requests for callbacks on 127.0.0.35 may wait for their verification at once; try again later\n',
    );
    await waitForHub(t, () => hanging.open.GET >= 1, 'a verification hanging');

    assert.equal(await subscribeFrom(t, `${legit.origin}/cb`, '127.0.0.2'), 202);
    await waitForHub(t, () => stored(t, `${legit.origin}/cb`), 'the legitimate subscriber to be verified while the others hang', 10_000);
    assert.ok(hanging.open.GET >= 1, 'the hanging verifications were still hanging');
    assert.equal(hanging.maxOpen.GET, 1, 'at most WEBSUB_HOST_CONCURRENCY (1) verifications in flight to the hanging host');
  } finally {
    await hanging.close();
    await legit.close();
  }
});

test('a 2xx that floods past WEBSUB_ANSWER_MAX_BYTES or drips past WEBSUB_ANSWER_TIMEOUT_MS is a failed delivery, not delivered', async () => {
  const t = await hubApp({ WEBSUB_ANSWER_TIMEOUT_MS: 1000 });
  // (An app of its own: a one-second deadline.)
  const big = Buffer.alloc(1024 * 1024, 'x');
  const drips = new Set<NodeJS.Timeout>();
  const host = await callbacks('127.0.0.41', {
    onPost(path, res) {
      if (path === '/flood') res.writeHead(200, { 'content-type': 'text/plain', 'content-length': big.length }).end(big);
      else if (path === '/flood-chunked') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        for (let i = 0; i < 16; i++) res.write(big.subarray(0, 65536));
        res.end();
      } else if (path === '/drip') {
        // 64 bytes every 20 ms, never ending: 4 KiB (what used to be read) in 1.3 s, the cap never.
        res.writeHead(200, { 'content-type': 'text/plain' });
        const timer = setInterval(() => res.write(big.subarray(0, 64)), 20);
        drips.add(timer);
        res.on('close', () => clearInterval(timer));
      } else if (path === '/exact') res.writeHead(200, { 'content-type': 'text/plain' }).end(big.subarray(0, 65536));
      else res.writeHead(204).end();
    },
  });
  try {
    const paths = ['/flood', '/flood-chunked', '/drip', '/exact', '/ok'];
    for (const p of paths)
      assert.equal((await subscribe(t, { 'hub.callback': `${host.origin}${p}`, 'hub.mode': 'subscribe', 'hub.topic': TOPIC })).status, 202);
    await waitForHub(t, async () => (await queued(t)) === 0, 'the verifications');
    await publish(t);
    const rows = async () =>
      t.app.db.query<{
        callback: string;
        failures: number;
        last_status: number | null;
        last_error: string | null;
        last_success_at: Date | null;
      }>('select callback, failures, last_status, last_error, last_success_at from websub_subscriptions');
    await waitForHub(
      t,
      async () => (await rows()).every((r) => r.last_success_at !== null || r.failures > 0),
      'every delivery to be tried',
    );
    const by = new Map((await rows()).map((r) => [new URL(r.callback).pathname, r]));
    for (const p of ['/flood', '/flood-chunked']) {
      assert.deepEqual(
        { ...by.get(p) },
        {
          callback: `${host.origin}${p}`,
          failures: 1,
          last_status: null,
          last_error: 'the answer is larger than 65536 bytes',
          last_success_at: null,
        },
        p,
      );
    }
    assert.equal(by.get('/drip')!.failures, 1);
    assert.equal(by.get('/drip')!.last_success_at, null);
    assert.match(by.get('/drip')!.last_error ?? '', /within 1000 ms/);
    for (const p of ['/exact', '/ok']) assert.equal(Number(by.get(p)!.failures), 0, p);
    assert.equal(await metric(t, 'pingd_websub_deliveries_total{outcome="delivered"}'), 2);
    assert.equal(await metric(t, 'pingd_websub_deliveries_total{outcome="failed"}'), 3);
  } finally {
    for (const d of drips) clearInterval(d);
    await host.close();
    await t.close();
  }
});

test("SafeFetcher.post with oversize 'fail': an answer past maxBytes is FETCH_TOO_LARGE; by default it is cut short and succeeds", async () => {
  const body = Buffer.alloc(10_000, 'y');
  const host = await callbacks('127.0.0.42', {
    onPost(path, res) {
      if (path === '/declared') res.writeHead(200, { 'content-length': body.length }).end(body);
      else {
        res.writeHead(200);
        res.write(body.subarray(0, 5000));
        res.end(body.subarray(5000));
      }
    },
  });
  const f = new SafeFetcher({ policy: { allowPrivate: true, allow: [] }, userAgent: 'pingd-test', timeoutMs: 5000 });
  try {
    for (const p of ['/declared', '/chunked']) {
      await assert.rejects(
        f.post(`${host.origin}${p}`, { body: Buffer.from('x'), contentType: 'text/plain', maxBytes: 4096, oversize: 'fail' }),
        (err: unknown) => {
          assert.ok(err instanceof FetchError);
          assert.equal(err.code, 'FETCH_TOO_LARGE');
          assert.equal(err.message, 'the answer is larger than 4096 bytes');
          return true;
        },
      );
      const cut = await f.post(`${host.origin}${p}`, { body: Buffer.from('x'), contentType: 'text/plain', maxBytes: 4096 });
      assert.equal(cut.status, 200);
      assert.equal(cut.body.length, 4096);
      const whole = await f.post(`${host.origin}${p}`, {
        body: Buffer.from('x'),
        contentType: 'text/plain',
        maxBytes: 10_000,
        oversize: 'fail',
      });
      assert.equal(whole.body.length, 10_000, 'an answer of exactly maxBytes is whole');
    }
  } finally {
    await host.close();
  }
});
