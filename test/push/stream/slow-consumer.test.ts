// The slow-consumer rule: a live connection whose client lets STREAM_BUFFER_BYTES wait goes back to
// catching up from the database instead of being cut; a connection is cut only when it is behind (bytes
// waiting for it while it catches up) and reads below STREAM_SLOW_MIN_BYTES_PER_SECOND for a whole
// STREAM_SLOW_WINDOW_MS. The rule on a hub with a sink whose reading the test controls, then end to end
// with clients that read when told: one that stops reading (cut a window later, its memory released) and one that reads
// slowly but steadily (never cut, every event once and in order).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { openStream, type SseConnection } from '../../helpers/sse-client.js';
import { waitFor } from '../../helpers/wait.js';
import { Subscriber } from '../../../src/push/stream/subscriber.js';
import { tooSlow } from '../../../src/push/stream/slow-consumer.js';
import type { Sink } from '../../../src/push/stream/sink.js';
import { ALL_EVENTS } from '../../../src/push/stream/events.js';

const apps: TestApp[] = [];
const conns: SseConnection[] = [];
after(async () => {
  for (const c of conns) c.close();
  for (const a of apps) await a.close();
});

async function ping(base: string, url: string, name = `Blog ${url}`): Promise<void> {
  const r = await fetch(`${base}/pingSiteForm?name=${encodeURIComponent(name)}&url=${encodeURIComponent(url)}`);
  assert.equal(r.status, 200, await r.text());
}

const rule = { floorBytesPerSecond: 1000, windowMs: 10_000 };

test('tooSlow: only a whole window below the floor cuts', () => {
  const s = (at: number, delivered: number) => ({ at, delivered });
  assert.equal(tooSlow([], 50_000, 0, rule), false, 'never behind');
  assert.equal(tooSlow([s(0, 0)], 9_999, 0, rule), false, 'behind for less than a window');
  assert.equal(tooSlow([s(0, 0)], 10_000, 9_999, rule), true, 'a window at 999.9 B/s');
  assert.equal(tooSlow([s(0, 0)], 10_000, 10_000, rule), false, 'a window at the floor');
  assert.equal(tooSlow([s(0, 0), s(5_000, 0)], 20_000, 25_000, rule), false, 'far behind, reading 1250 B/s');
});

/** A sink whose client the test plays: bytes wait until the test says they were taken. */
class PlayedSink implements Sink {
  waiting = 0;
  delivered = 0;
  closed = false;
  cutAt: number | null = null;
  write(text: string): boolean {
    if (this.closed) return false;
    this.waiting += Buffer.byteLength(text);
    return true;
  }
  drained(): Promise<void> {
    return new Promise(() => {});
  }
  take(bytes: number): void {
    const n = Math.min(bytes, this.waiting);
    this.waiting -= n;
    this.delivered += n;
  }
  end(): void {
    this.closed = true;
  }
  cut(): void {
    this.closed = true;
  }
}

test('on the hub: a catching-up connection reading above the floor is kept for many windows; below it, cut after one; not waited on, never', async () => {
  const t = await startApp({
    PING_MIN_INTERVAL: 0,
    RENDER_SCHEDULER: false,
    STREAM_SLOW_MIN_BYTES_PER_SECOND: 1000,
    STREAM_SLOW_WINDOW_MS: 10_000,
  });
  apps.push(t);
  const hub = t.app.stream;
  // Something to replay, so each connection is catching up and blocked on its client.
  const base = await t.listen();
  for (let i = 0; i < 3; i++) await ping(base, uniqueUrl('slow-hub'));
  const steady = new PlayedSink();
  const slow = new PlayedSink();
  const idle = new PlayedSink();
  const subs = [steady, slow, idle].map((s) => new Subscriber(ALL_EVENTS, s));
  for (const sub of subs) void hub.attach(sub, { from: 0, latest: await latestId(t) });
  await waitFor(() => subs.every((s) => s.catchingUp && s.sink.waiting > 0), { what: 'the replays to wait on their clients' });
  steady.waiting = slow.waiting = 1_000_000;
  idle.waiting = 0;
  // The plugin's own once-a-second tick (on the real clock) may have sampled already: this one's clock
  // starts here, and nothing below yields to it.
  for (const sub of subs) sub.behind.length = 0;
  const t0 = performance.now() + 1e6;
  for (let s = 0; s <= 60; s++) {
    hub.tick(t0 + s * 1000);
    steady.take(1200);
    slow.take(800);
  }
  assert.equal(steady.closed, false, 'reading 1200 B/s while 1 MB behind: kept for 6 windows');
  assert.equal(idle.closed, false, 'nothing waiting for it: the server is not waiting on it');
  assert.equal(slow.closed, true, 'reading 800 B/s: cut');
  for (const sub of subs) hub.detach(sub);
  const metrics = await t.app.inject({ method: 'GET', url: '/metrics' });
  assert.match(metrics.body, /pingd_stream_disconnects_total\{reason="slow"\} 1\n/);
});

async function latestId(t: TestApp): Promise<number> {
  const [r] = await t.app.db.query<{ m: number }>('select max(id) as m from pings');
  return Number(r.m);
}

/** A client that reads only when told to (its response stays paused otherwise), counting the ping events it read. */
async function pausedClient(base: string) {
  const c = {
    res: null as unknown as http.IncomingMessage,
    ids: [] as number[],
    closed: false,
    req: null as unknown as http.ClientRequest,
  };
  await new Promise<void>((resolve, reject) => {
    c.req = http.get(`${base}/stream`, { headers: { accept: 'text/event-stream' } }, (res) => {
      c.res = res;
      res.pause();
      res.setEncoding('utf8');
      let text = '';
      res.on('data', (chunk: string) => {
        text += chunk;
        let i: number;
        while ((i = text.indexOf('\n\n')) >= 0) {
          const m = /^id: (\d+)\nevent: ping\n/.exec(text.slice(0, i));
          if (m) c.ids.push(Number(m[1]));
          text = text.slice(i + 2);
        }
      });
      res.on('close', () => (c.closed = true));
      res.on('error', () => undefined);
      resolve();
    });
    c.req.on('error', reject);
  });
  return c;
}

test('end to end: a stalled client falls back to catching up (not cut), then is cut a window later; a slow steady reader catches up and is never cut', async () => {
  // REGRESSION: a consumer was cut as soon as STREAM_BUFFER_BYTES waited for it, so a client catching up
  // over a slow link, reading steadily but always behind, was cut again after every reconnect.
  const t = await startApp({
    PING_MIN_INTERVAL: 0,
    RENDER_SCHEDULER: false,
    STREAM_BUFFER_BYTES: 16384,
    STREAM_SLOW_MIN_BYTES_PER_SECOND: 2048,
    STREAM_SLOW_WINDOW_MS: 2000,
  });
  apps.push(t);
  const base = await t.listen();
  const stalled = await pausedClient(base);
  const slow = await pausedClient(base);
  const reader = await openStream(`${base}/stream`);
  conns.push(reader);
  await reader.waitUntil(() => t.app.stream.size === 3, 5000, 'the three connections');
  const metric = async (re: RegExp) => Number(re.exec((await t.app.inject({ method: 'GET', url: '/metrics' })).body)?.[1] ?? NaN);
  const fellBehind = () => metric(/pingd_stream_fell_behind_total (\d+)/);

  // Big events (~4.5 kB: a name of 1,000 three-byte characters and a long URL) until the kernel's buffers
  // are full and both paused clients have fallen behind.
  let sent = 0;
  const name = '€'.repeat(1000);
  const long = `${'p'.repeat(1400)}/`;
  while ((await fellBehind()) < 2 && sent < 20_000) {
    await Promise.all(Array.from({ length: 50 }, () => ping(base, `${uniqueUrl('stall')}${long}`, name)));
    sent += 50;
  }
  assert.equal(await fellBehind(), 2, `both paused clients fell behind after ${sent} events`);
  assert.equal(t.app.stream.size, 3, 'falling behind cuts no one');
  // The slow one now reads ~64 kB every 100 ms (well above the 2 kB/s floor, far below the server's pace).
  const pump = setInterval(() => {
    slow.res.resume();
    setTimeout(() => slow.res.pause(), 5).unref();
  }, 100);
  try {
    // (A paused response sees no end: the server's count says it.)
    await waitFor(() => t.app.stream.size === 2, { what: 'the stalled client to be cut', timeoutMs: 20_000 });
    assert.equal(await metric(/pingd_stream_disconnects_total\{reason="slow"\} (\d+)/), 1);
    // A few more while the slow one still catches up: it gets them too.
    for (let i = 0; i < 20; i++) await ping(base, `${uniqueUrl('after')}${long}`, name);
    sent += 20;
    await waitFor(() => slow.ids.length >= sent, {
      what: () => `the slow reader to catch up (${slow.ids.length}/${sent})`,
      timeoutMs: 120_000,
    });
  } finally {
    clearInterval(pump);
  }
  assert.equal(slow.closed, false, 'the slow steady reader was never cut');
  assert.equal(new Set(slow.ids).size, slow.ids.length, 'no event twice');
  assert.deepEqual(
    slow.ids,
    [...slow.ids].sort((a, b) => a - b),
    'in order',
  );
  await reader.waitFor(sent, 20_000);
  assert.deepEqual(
    slow.ids,
    reader.events.map((e) => Number(e.id)),
    'the slow reader got exactly what the fast one got',
  );
  slow.req.destroy();
  stalled.req.destroy();
});
