// GET /stream read by real EventSource clients (Chromium's own, through playwright-core, and the npm
// `eventsource` client): a refused connection must look like a dropped one, so the client comes back by
// itself. Both follow the WHATWG rules: any answer but a 200 event stream is final.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { launchBrowser, watchedPage } from '../../helpers/browser.js';
import { openStream } from '../../helpers/sse-client.js';
import { waitFor } from '../../helpers/wait.js';
import { EventSource as NpmEventSource } from 'eventsource';

let t: TestApp;
let base: string;
let browser: Browser;
before(async () => {
  t = await startApp({ PING_MIN_INTERVAL: 0, RENDER_SCHEDULER: false, STREAM_MAX_CLIENTS: 1 });
  base = await t.listen();
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await t?.close();
});

/**
 * Opens the stream that takes the only place. A refusal is a 200 stream with `retry:` too, so "served"
 * is the hub counting it, after the previous test's connections are gone (a browser's EventSource closed
 * with its page frees its place a moment later: the holder was refused and the client under test served).
 */
async function servedHolder() {
  await waitFor(() => t.app.stream.size === 0, { what: 'the previous streams to be gone', timeoutMs: 10_000 });
  const holder = await openStream(`${base}/stream`);
  await holder.waitUntil((x) => x.retry !== null, 10_000, 'the holder to be answered');
  assert.equal(t.app.stream.size, 1, `the holder is served, not refused: ${JSON.stringify(holder.comments)}`);
  return holder;
}

interface Seen {
  log: { what: string; state: number; at: number; data?: string }[];
  pings: string[];
}

test('an EventSource refused beyond STREAM_MAX_CLIENTS comes back by itself once a place is free (a 503 closed it for good)', async () => {
  const holder = await servedHolder();
  const w = await watchedPage(browser);
  try {
    // Any page of the origin: the EventSource is same-origin, as the status page's is.
    await w.page.goto(`${base}/healthz`);
    // As a string: tsx would wrap named functions in a helper the page does not have.
    await w.page.evaluate(`(() => {
      const seen = { log: [], pings: [] };
      window.seen = seen;
      const es = new EventSource('/stream');
      const note = (what, data) => seen.log.push({ what, state: es.readyState, at: Date.now(), data });
      es.addEventListener('open', () => note('open'));
      es.addEventListener('error', () => note('error'));
      es.addEventListener('refused', (e) => note('refused', e.data));
      es.addEventListener('ping', (e) => seen.pings.push(JSON.parse(e.data).url));
    })()`);
    const seen = () => w.page.evaluate(() => (window as unknown as { seen: Seen }).seen);

    // Refused: the error leaves it CONNECTING (0), never CLOSED (2).
    await w.page.waitForFunction(() => (window as unknown as { seen: Seen }).seen.log.some((l) => l.what === 'error'), undefined, {
      timeout: 10_000,
    });
    const refused = await seen();
    const error = refused.log.find((l) => l.what === 'error')!;
    assert.deepEqual(
      refused.log.map((l) => l.what),
      ['open', 'refused', 'error'],
    );
    assert.equal(error.state, 0, `after the refusal the EventSource is CONNECTING, not CLOSED: ${JSON.stringify(refused.log)}`);
    assert.deepEqual(JSON.parse(refused.log.find((l) => l.what === 'refused')?.data ?? 'null'), {
      reason: 'max_clients',
      message: 'This server already serves 1 streams; reconnect later.',
      retryMs: 10_000,
    });

    holder.close();
    await holder.waitUntil(() => t.app.stream.size === 0, 5000, 'the place to be freed');
    // It reconnects after the refusal's `retry:` (10 s), by itself.
    // (A refusal is a 200 stream too: it fires `open` before its `error`; the reconnection is the next one.)
    await w.page.waitForFunction(
      () => {
        const log = (window as unknown as { seen: Seen }).seen.log;
        return log.filter((l) => l.what === 'open').length >= 2;
      },
      undefined,
      { timeout: 20_000 },
    );
    const url = uniqueUrl('after-refusal');
    const r = await fetch(`${base}/pingSiteForm?name=Back&url=${encodeURIComponent(url)}`);
    assert.equal(r.status, 200);
    await r.arrayBuffer();
    await w.page.waitForFunction((u) => (window as unknown as { seen: Seen }).seen.pings.includes(u), url, { timeout: 10_000 });
    const back = await seen();
    const opens = back.log.filter((l) => l.what === 'open');
    const open = opens[opens.length - 1];
    console.log(
      `# refused at +0 ms, reconnected by itself at +${open.at - error.at} ms: ${JSON.stringify(back.log.map((l) => [l.what, l.state]))}`,
    );
    assert.ok(open.at - error.at >= 9_000, `it waited the refusal's retry (${open.at - error.at} ms)`);
    assert.deepEqual(w.errors, [], 'console errors');
    assert.deepEqual(w.offLoopback, []);
  } finally {
    holder.close();
    await w.close();
  }
});

test(
  'the npm eventsource client refused beyond STREAM_MAX_CLIENTS comes back by itself once a place is free (a 503 closed it for good)',
  { timeout: 60_000 },
  async () => {
    const holder = await servedHolder();
    const log: { what: string; state: number; at: number }[] = [];
    const pings: string[] = [];
    let changed: () => void = () => undefined;
    const note = (what: string) => {
      log.push({ what, state: es.readyState, at: Date.now() });
      changed();
    };
    const until = (ok: () => boolean, ms: number, what: string) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms: ${JSON.stringify(log)}`)), ms);
        changed = () => {
          if (ok()) {
            clearTimeout(timer);
            resolve();
          }
        };
        changed();
      });
    const es = new NpmEventSource(`${base}/stream`);
    try {
      es.addEventListener('open', () => note('open'));
      es.addEventListener('error', () => note('error'));
      es.addEventListener('refused', () => note('refused'));
      es.addEventListener('ping', (e) => {
        pings.push(JSON.parse(e.data).url);
        note('ping');
      });
      await until(() => log.some((l) => l.what === 'error'), 10_000, 'the refusal');
      const error = log.find((l) => l.what === 'error')!;
      assert.equal(error.state, NpmEventSource.CONNECTING, `after the refusal it reconnects, it is not CLOSED: ${JSON.stringify(log)}`);
      holder.close();
      await holder.waitUntil(() => t.app.stream.size === 0, 5000, 'the place to be freed');
      await until(() => log.filter((l) => l.what === 'open').length >= 2, 20_000, 'the reconnection');
      const url = uniqueUrl('npm-after-refusal');
      const r = await fetch(`${base}/pingSiteForm?name=Back&url=${encodeURIComponent(url)}`);
      assert.equal(r.status, 200);
      await r.arrayBuffer();
      await until(() => pings.includes(url), 10_000, 'the ping after the reconnection');
      const opens = log.filter((l) => l.what === 'open');
      console.log(`# npm eventsource: refused, reconnected by itself after ${opens[opens.length - 1].at - error.at} ms`);
    } finally {
      es.close();
      holder.close();
    }
  },
);
