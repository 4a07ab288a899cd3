// /stream's connection cap under a burst: every connection of a burst is counted before anything yields,
// so STREAM_MAX_CLIENTS holds however many arrive at once, and each connection's place is given back on
// every path (refused after admission, the client gone while its stream started, closed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { startApp, type TestApp } from '../../helpers/app.js';
import { openStream, type SseConnection } from '../../helpers/sse-client.js';
import { waitFor } from '../../helpers/wait.js';

let t: TestApp;
let base: string;
const CAP = 20;

before(async () => {
  t = await startApp({ STREAM_MAX_CLIENTS: CAP, RENDER_SCHEDULER: false });
  base = await t.listen();
});

after(async () => {
  await t?.close();
});

const refusedMessage = `This server already serves ${CAP} streams; reconnect later.`;

/** Waits until a connection is either served (its stream's own `retry:`) or refused (ended). */
async function settled(c: SseConnection): Promise<'served' | 'refused'> {
  await c.waitUntil((x) => x.ended || x.retry === 3000, 30_000, 'the stream to be served or refused');
  return c.headers['x-pingd-refused'] === undefined ? 'served' : 'refused';
}

async function closeAll(cs: SseConnection[]): Promise<void> {
  for (const c of cs) c.close();
  await waitFor(() => t.app.stream.size === 0, {
    what: () => `every place given back once its connection closed (${t.app.stream.size} held)`,
    intervalMs: 10,
  });
}

test('300 simultaneous connections never exceed STREAM_MAX_CLIENTS', async () => {
  // REGRESSION: the count was checked before an await (the stream's start reads the database) and raised
  // only after it, so a burst all passed the check: 3,000 at once against a cap of 1,000 got 1,737 served.
  const burst = 300;
  const conns = await Promise.all(Array.from({ length: burst }, () => openStream(`${base}/stream`)));
  try {
    const outcomes = await Promise.all(conns.map(settled));
    const served = outcomes.filter((o) => o === 'served').length;
    assert.equal(served, CAP, `served ${served} of ${burst} with STREAM_MAX_CLIENTS=${CAP}`);
    assert.equal(t.app.stream.size, CAP);
    const refused = conns.filter((c) => c.headers['x-pingd-refused'] !== undefined);
    assert.equal(refused.length, burst - CAP);
    for (const c of refused) {
      assert.equal(c.status, 200);
      assert.equal(c.headers['x-pingd-refused'], 'max_clients');
      assert.equal(c.headers['retry-after'], '10');
      assert.equal(c.retry, 10_000);
      assert.deepEqual(c.events, [
        { id: '', event: 'refused', data: JSON.stringify({ reason: 'max_clients', message: refusedMessage, retryMs: 10_000 }) },
      ]);
    }
    const metrics = await t.app.inject({ method: 'GET', url: '/metrics' });
    assert.match(metrics.body, new RegExp(`pingd_stream_disconnects_total\\{reason="refused"\\} ${burst - CAP}\\n`));
    assert.match(metrics.body, new RegExp(`pingd_stream_clients ${CAP}\\n`));
  } finally {
    await closeAll(conns);
  }
  // Every place is free again: as many are served as the cap.
  const again = await Promise.all(Array.from({ length: CAP }, () => openStream(`${base}/stream`)));
  try {
    assert.deepEqual(await Promise.all(again.map(settled)), Array(CAP).fill('served'));
  } finally {
    await closeAll(again);
  }
});

test('a connection refused because the database is away gives its place back', async () => {
  const hub = t.app.stream;
  const start = hub.start;
  hub.start = async () => {
    throw new Error('connection refused');
  };
  try {
    const c = await openStream(`${base}/stream?since=0`);
    await c.waitUntil((x) => x.ended);
    assert.equal(c.headers['x-pingd-refused'], 'database_unavailable');
    assert.equal(c.retry, 5000);
    assert.deepEqual(c.events, [
      {
        id: '',
        event: 'refused',
        data: JSON.stringify({
          reason: 'database_unavailable',
          message: 'The database is unavailable; reconnect in a moment.',
          retryMs: 5000,
        }),
      },
    ]);
    assert.equal(hub.size, 0);
  } finally {
    hub.start = start;
  }
});

test('a client gone while its stream started gives its place back, and is never attached', async () => {
  const hub = t.app.stream;
  const start = hub.start;
  const attach = hub.attach;
  let reached!: () => void;
  const starting = new Promise<void>((r) => (reached = r));
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let started!: () => void;
  const done = new Promise<void>((r) => (started = r));
  let attached = 0;
  hub.start = async (from) => {
    reached();
    await released;
    const s = await start.call(hub, from);
    started();
    return s;
  };
  hub.attach = async (sub, s) => {
    attached++;
    return attach.call(hub, sub, s);
  };
  // Headers come only after the start: the request is sent raw and dropped while the start waits.
  const req = request(`${base}/stream`, { headers: { accept: 'text/event-stream' } });
  req.on('error', () => undefined);
  try {
    req.end();
    await starting;
    assert.equal(hub.size, 1, 'counted from admission, before the start');
    req.destroy();
    await waitFor(() => hub.size === 0, { what: 'the place to be back while the start still waits', timeoutMs: 10_000, intervalMs: 10 });
    release();
    await done;
    // The handler resumes in the microtasks after the start: past them it has returned or attached.
    await new Promise((r) => setImmediate(r));
    assert.equal(attached, 0, 'a connection whose client is gone is not attached');
    assert.equal(hub.size, 0);
  } finally {
    req.destroy();
    release();
    hub.start = start;
    hub.attach = attach;
  }
});
