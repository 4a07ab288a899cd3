// The pages in a real browser (headless Chromium): the form pings and lands on the success page, a weblog
// is looked up, and the status page's charts and latest pings change as pings arrive, without a reload, and
// come back by themselves after the stream is refused or fails. On every page: no console error, no request off loopback, nothing moves when data arrives, and a phone's
// width needs no sideways scrolling.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { methodCall, startApp, uniqueUrl, type TestApp } from '../helpers/app.js';
import { closeClean, launchBrowser, watchedPage, type WatchedPage } from '../helpers/browser.js';
import { openStream } from '../helpers/sse-client.js';

let t: TestApp;
let base: string;
let browser: Browser;
before(async () => {
  t = await startApp();
  base = await t.listen();
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await t?.close();
});

async function xmlrpcPing(name: string, url: string): Promise<void> {
  const res = await fetch(`${base}/RPC2`, {
    method: 'POST',
    headers: { 'content-type': 'text/xml' },
    body: methodCall('weblogUpdates.ping', [name, url]),
  });
  const body = await res.text();
  assert.match(body, /<name>flerror<\/name><value><boolean>0<\/boolean>/, body);
}

/** Asserts what every page must hold to, then closes it. */
test('the home page: fill in the form, submit, see the success page and what pingd saw', async () => {
  const w = await watchedPage(browser);
  const url = uniqueUrl('form');
  await w.page.goto(`${base}/`);
  assert.equal(await w.page.title(), 'A weblogUpdates ping server · pingd');
  assert.match((await w.page.locator('pre').first().textContent()) ?? '', new RegExp(`^${base}/RPC2$`));
  // Every field has a label a screen reader reads.
  assert.equal(await w.page.getByLabel(/Weblog name|Weblog URL|Changes URL|RSS URL/).count(), 4);
  for (const name of ['name', 'url', 'changesURL', 'rssUrl']) {
    assert.equal(await w.page.locator(`label input[name="${name}"]`).count(), 1, `${name} sits in its label`);
  }
  await w.page.getByLabel('Weblog name').fill('Form <Blog>');
  await w.page.getByLabel('Weblog URL').fill(url);
  await Promise.all([w.page.waitForURL(/\/pingSiteForm\?/), w.page.getByRole('button', { name: 'Ping' }).click()]);
  assert.equal(await w.page.title(), 'Ping received · pingd');
  assert.match((await w.page.locator('p.ok').textContent()) ?? '', /^Thanks for the ping\. We have recorded that Form <Blog> \(/);
  await Promise.all([w.page.waitForURL(/\/weblog\?url=/), w.page.getByRole('link', { name: 'See what pingd saw of it' }).click()]);
  assert.equal(await w.page.locator('h2').first().textContent(), 'Yes: Form <Blog>');
  assert.match((await w.page.locator('tbody tr').first().textContent()) ?? '', /GET \/pingSiteForm\s*accepted/);
  await closeClean(w);
});

test('the weblog page: look a weblog up and see its pings, names shown as text, never markup', async () => {
  const url = uniqueUrl('lookup');
  const name = '<img src=x id=injected> Lookup';
  await xmlrpcPing(name, url);
  const again = await fetch(`${base}/RPC2`, {
    method: 'POST',
    headers: { 'content-type': 'text/xml' },
    body: methodCall('weblogUpdates.ping', [name, url]),
  });
  assert.match(await again.text(), /<boolean>1<\/boolean>/, 'the second ping is throttled');
  const w = await watchedPage(browser);
  await w.page.goto(`${base}/weblog`);
  await w.page.getByLabel('Weblog URL').fill(url);
  await Promise.all([w.page.waitForURL(/\/weblog\?url=/), w.page.getByRole('button', { name: 'Look it up' }).click()]);
  assert.equal(await w.page.locator('h2').first().textContent(), `Yes: ${name}`);
  assert.equal(await w.page.locator('#injected').count(), 0, 'the name was not parsed as HTML');
  const rows = await w.page.locator('tbody tr').allTextContents();
  assert.equal(rows.length, 2, rows.join('\n'));
  assert.match(rows[0], /weblogUpdates\.ping\s*refused: throttled/);
  assert.match(rows[1], /weblogUpdates\.ping\s*accepted/);
  assert.match((await w.page.locator('tbody tr').nth(1).locator('a').getAttribute('href')) ?? '', /^\/\d{4}\/\d{2}\/\d{2}\/\d{2}\.xml$/);
  // An unknown weblog: the helpful 404.
  const unknown = `${base}/weblog?url=${encodeURIComponent(uniqueUrl('never'))}`;
  const res = await w.page.goto(unknown);
  assert.equal(res?.status(), 404);
  assert.match((await w.page.locator('p.err').first().textContent()) ?? '', /^pingd has no ping from http:\/\/never-/);
  // The browser reports the page's own 404 status; nothing else went wrong.
  assert.deepEqual(w.errors.splice(0), [
    `console: Failed to load resource: the server responded with a status of 404 (Not Found) (${unknown})`,
  ]);
  await closeClean(w);
});

test('the status page: charts drawn, then pings sent from here change the chart data and the latest pings without a reload', async () => {
  const w = await watchedPage(browser);
  // Layout shifts, counted from the first paint.
  await w.page.addInitScript(() => {
    (window as unknown as { cls: number }).cls = 0;
    new PerformanceObserver((list) => {
      for (const e of list.getEntries() as (PerformanceEntry & { value: number; hadRecentInput: boolean })[])
        if (!e.hadRecentInput) (window as unknown as { cls: number }).cls += e.value;
    }).observe({ type: 'layout-shift', buffered: true });
  });
  await w.page.goto(`${base}/status`);
  await w.page.waitForSelector('#chart-1h[data-points="60"]');
  await w.page.waitForSelector('#chart-24h[data-points="1440"]');
  await w.page.waitForSelector('#chart-latency canvas');
  await w.page.waitForFunction(() => document.getElementById('recent-state')?.textContent === 'live');
  const before = Number(await w.page.locator('#chart-1h').getAttribute('data-accepted'));
  const cls = await w.page.evaluate(() => (window as unknown as { cls: number }).cls);
  assert.ok(cls < 0.01, `nothing moves when the data arrives (cumulative layout shift ${cls})`);
  await w.page.evaluate(() => ((window as unknown as { marker: number }).marker = 42));

  const names = ['Live One', 'Live Two', 'Live Three'];
  for (const n of names) await xmlrpcPing(n, uniqueUrl('live'));
  await w.page.waitForFunction((want) => Number(document.getElementById('chart-1h')?.dataset.accepted) >= want, before + names.length, {
    timeout: 15_000,
  });
  const recent = (await w.page.locator('#recent').textContent()) ?? '';
  for (const n of names) assert.ok(recent.includes(n), `${n} is in the latest pings: ${recent}`);
  assert.equal(await w.page.evaluate(() => (window as unknown as { marker?: number }).marker), 42, 'the page was not reloaded');
  // The next poll of /api/stats agrees with what the stream added.
  await w.page.waitForFunction((want) => Number(document.getElementById('accepted-total')?.textContent) >= want, before + names.length, {
    timeout: 15_000,
  });
  await closeClean(w);
});

test('on a phone in the dark scheme, no page needs sideways scrolling', async () => {
  const url = uniqueUrl('phone');
  await xmlrpcPing('A weblog with a rather long name that has to wrap on a small screen', url);
  for (const path of ['/', `/weblog?url=${encodeURIComponent(url)}`, '/status']) {
    const w = await watchedPage(browser, { width: 375, height: 700, colorScheme: 'dark' });
    await w.page.goto(`${base}${path}`);
    if (path === '/status') await w.page.waitForSelector('#chart-1h canvas');
    const overflow = await w.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `${path} is ${overflow} px wider than the screen`);
    const bg = await w.page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.equal(bg, 'rgb(20, 22, 24)', `${path} follows the dark scheme`);
    await closeClean(w);
  }
});

/** The text of an element of the status page, read in the page. */
function stateOf(w: WatchedPage, id: string): Promise<string> {
  return w.page.evaluate((i) => document.getElementById(i)?.textContent ?? '', id);
}

test('the status page: a stream refused beyond STREAM_MAX_CLIENTS shows reconnecting, then goes live again once a place is free (it stayed "reconnecting" forever)', async () => {
  const small = await startApp({ STREAM_MAX_CLIENTS: 1, RENDER_SCHEDULER: false });
  const smallBase = await small.listen();
  const holder = await openStream(`${smallBase}/stream`);
  const w = await watchedPage(browser);
  try {
    await holder.waitUntil((x) => x.retry !== null, 10_000, 'the holder to be served');
    await w.page.goto(`${smallBase}/status`);
    await w.page.waitForFunction(() => document.getElementById('recent-state')?.textContent === 'reconnecting', undefined, {
      timeout: 10_000,
    });
    await w.page.waitForFunction(() => /refused/.test(document.getElementById('live-state')?.textContent ?? ''), undefined, {
      timeout: 10_000,
    });
    assert.equal(
      await stateOf(w, 'live-state'),
      'Live updates refused: This server already serves 1 streams; reconnect later. Retrying in 10 s.',
    );

    holder.close();
    await holder.waitUntil(() => small.app.stream.size === 0, 5000, 'the place to be freed');
    // The refusal's `retry:` is 10 s; the page's EventSource takes the place back by itself.
    await holder.waitUntil(() => small.app.stream.size === 1, 20_000, 'the page to reconnect');
    await w.page.waitForFunction(() => document.getElementById('recent-state')?.textContent === 'live', undefined, { timeout: 5000 });
    assert.equal(await stateOf(w, 'live-state'), 'Live: updates every few seconds.');
    const res = await fetch(`${smallBase}/RPC2`, {
      method: 'POST',
      headers: { 'content-type': 'text/xml' },
      body: methodCall('weblogUpdates.ping', ['Back Again', uniqueUrl('back')]),
    });
    assert.match(await res.text(), /<boolean>0<\/boolean>/);
    await w.page.waitForFunction(() => (document.getElementById('recent')?.textContent ?? '').includes('Back Again'), undefined, {
      timeout: 10_000,
    });
    await closeClean(w);
  } finally {
    holder.close();
    await w.close();
    await small.close();
  }
});

test("the status page: a stream closed for good by a non-200 answer (a proxy's 502) is opened again, 1 s then 2 s later (the page stayed 'reconnecting' forever)", async () => {
  const w = await watchedPage(browser);
  // A proxy in front answers the first two connections with 502; EventSource closes on each for good.
  const asked: number[] = [];
  await w.page.route('**/stream', (route) => {
    asked.push(Date.now());
    if (asked.length <= 2) return route.fulfill({ status: 502, contentType: 'text/plain', body: 'Bad Gateway\n' });
    return route.continue();
  });
  await w.page.goto(`${base}/status`);
  await w.page.waitForFunction(() => document.getElementById('recent-state')?.textContent === 'live', undefined, { timeout: 15_000 });
  assert.equal(asked.length, 3, 'two refused, the third served');
  const gaps = [asked[1] - asked[0], asked[2] - asked[1]];
  assert.ok(gaps[0] >= 900 && gaps[1] >= 1900 && gaps[1] < 5000, `backoff 1 s then 2 s: ${gaps.join(', ')} ms`);
  const name = 'After The Proxy';
  await xmlrpcPing(name, uniqueUrl('proxy'));
  await w.page.waitForFunction((n) => (document.getElementById('recent')?.textContent ?? '').includes(n), name, { timeout: 10_000 });
  const errors = w.errors.splice(0);
  assert.ok(errors.length <= 2 && errors.every((e) => /502/.test(e)), `only the proxy's two answers were errors: ${errors.join('\n')}`);
  await closeClean(w);
});
