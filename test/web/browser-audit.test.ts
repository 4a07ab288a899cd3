// What Lighthouse and axe found on the pages, checked in a real browser (headless Chromium; the markup and
// the bytes are checked through the app in test/web/compression.test.ts): on a phone, every box that scrolls
// sideways (code examples, tables) is reached and scrolled with the keyboard and shows the focus; /status, its assets and
// /api/stats reach the browser compressed. axe itself runs in `node --import tsx bench/web-audit.ts`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { methodCall, startApp, type TestApp } from '../helpers/app.js';
import { closeClean, launchBrowser, watchedPage } from '../helpers/browser.js';

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

test("at 375 px the home page's code examples and the status page's tables scrolled sideways but could not be reached by keyboard (axe scrollable-region-focusable): Tab reaches each, the arrow keys scroll it, the focus shows", async () => {
  // A long host name in the busiest hosts' table (a table that has no link to focus instead).
  const long = 'https://a-weblog-with-a-rather-long-host-name-for-a-phone.example.org/';
  const ping = await fetch(`${base}/RPC2`, {
    method: 'POST',
    headers: { 'content-type': 'text/xml' },
    body: methodCall('weblogUpdates.ping', ['Long', long]),
  });
  assert.match(await ping.text(), /<boolean>0<\/boolean>/);
  const pages: [string, number][] = [
    ['/', 2],
    // The documents' table (five columns) always scrolls at 375 px; the hosts' table with long names may.
    ['/status', 1],
    [`/weblog?url=${encodeURIComponent(long)}`, 0],
  ];
  for (const [path, atLeast] of pages) {
    const w = await watchedPage(browser, { width: 375, height: 700 });
    await w.page.goto(`${base}${path}`);
    if (path === '/status') await w.page.waitForSelector('#chart-1h canvas');
    // Every box that scrolls sideways, marked by its order in the page.
    const boxes = await w.page.evaluate(() =>
      [...document.querySelectorAll<HTMLElement>('body *')]
        .filter((el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX) && el.scrollWidth > el.clientWidth)
        .map((el, i) => {
          el.dataset.box = String(i);
          return { label: el.getAttribute('aria-label') ?? '', role: el.getAttribute('role') ?? '', tabindex: el.getAttribute('tabindex') };
        }),
    );
    assert.ok(boxes.length >= atLeast, `${path}: ${JSON.stringify(boxes)}`);
    for (const b of boxes) {
      assert.equal(b.tabindex, '0', `${path} ${b.label}`);
      assert.equal(
        await w.page.getByRole('region', { name: b.label, exact: true }).count(),
        1,
        `${path}: a region named ${JSON.stringify(b.label)}`,
      );
    }
    const reached: string[] = [];
    for (let i = 0; i < 80 && reached.length < boxes.length; i++) {
      await w.page.keyboard.press('Tab');
      const focused = await w.page.evaluate(() => {
        const el = document.activeElement as HTMLElement | null;
        if (!el?.dataset.box) return null;
        const s = getComputedStyle(el);
        return { label: el.getAttribute('aria-label') ?? '', outline: `${s.outlineStyle} ${s.outlineWidth}` };
      });
      if (!focused) continue;
      reached.push(focused.label);
      assert.equal(focused.outline, 'solid 2px', `${path} ${focused.label}: the focus is visible`);
      await w.page.keyboard.press('ArrowRight');
      await w.page.waitForFunction(() => (document.activeElement as HTMLElement).scrollLeft > 0, undefined, { timeout: 5000 });
    }
    assert.deepEqual(
      reached,
      boxes.map((b) => b.label),
      `${path}: every box that scrolls is reached with Tab, in order`,
    );
    await closeClean(w);
  }
});

test('the status page, its assets and /api/stats reached the browser uncompressed (Lighthouse counted 101 KiB to save): Chromium gets each in brotli, smaller than half, and the page still draws', async () => {
  const w = await watchedPage(browser);
  const seen = new Map<string, Promise<{ encoding: string | undefined; wire: number; decoded: number }>>();
  w.page.on('response', (r) => {
    const u = new URL(r.url());
    if (u.pathname !== '/status' && !u.pathname.startsWith('/assets/') && u.pathname !== '/api/stats') return;
    seen.set(
      u.pathname + u.search,
      (async () => ({
        encoding: (await r.allHeaders())['content-encoding'],
        wire: (await r.request().sizes()).responseBodySize,
        decoded: (await r.body()).length,
      }))(),
    );
  });
  await w.page.goto(`${base}/status`);
  await w.page.waitForSelector('#chart-1h[data-points="60"]');
  await w.page.waitForSelector('#chart-24h[data-points="1440"]');
  const paths = [...seen.keys()].map((p) => p.replace(/\.[0-9a-f]{12}\./, '.*.')).sort();
  assert.deepEqual(paths, [
    '/api/stats?window=1h',
    '/api/stats?window=24h',
    '/assets/site.*.css',
    '/assets/status.*.js',
    '/assets/uPlot.iife.min.*.js',
    '/assets/uPlot.min.*.css',
    '/status',
  ]);
  for (const [path, p] of seen) {
    const r = await p;
    assert.equal(r.encoding, 'br', path);
    assert.ok(r.wire > 0 && r.wire < r.decoded / 2, `${path}: ${r.wire} bytes on the wire for ${r.decoded}`);
  }
  await closeClean(w);
});
