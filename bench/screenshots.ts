// Owns `npm run screenshots`: the README's and docs' pictures of the three pages (docs/screenshots/*.png), taken in
// headless Chromium from a pingd on a fresh embedded database. The pings, refusals and lookups are real
// (sent over HTTP to that pingd); the statistics of the hours before the run are added through the
// statistics repository so the charts show a day's shape, and the captions say so.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/platform/config.js';
import { addMinuteCounts } from '../src/operations/stats/minute-repository.js';
import { MINUTE_MS, minuteOf, type HostCount, type SeriesCount } from '../src/operations/stats/minute-tally.js';

const OUT = join(import.meta.dirname, '..', 'docs', 'screenshots');
const dir = mkdtempSync(join(tmpdir(), 'pingd-shots-'));
const app = await buildApp({
  config: loadConfig({ LOG_LEVEL: 'warn', DATA_DIR: dir, VERIFY_PINGS: 'off', PING_HOST_BUDGET: '0' }),
  logger: false,
});
try {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  const base = `http://127.0.0.1:${addr.port}`;

  // A day's shape: more pings in the (UTC) afternoon, a few refusals, a throttling burst two hours ago.
  const now = minuteOf(Date.now());
  const counts: SeriesCount[] = [];
  const hosts: HostCount[] = [];
  for (let m = now - 24 * 60 * MINUTE_MS; m < now; m += MINUTE_MS) {
    const hour = new Date(m).getUTCHours() + new Date(m).getUTCMinutes() / 60;
    const accepted = Math.round(40 + 30 * Math.sin(((hour - 9) / 24) * 2 * Math.PI) + 6 * Math.sin(m / 1_500_000));
    counts.push({ minute: m, series: 'accepted', n: accepted });
    counts.push({
      minute: m,
      series: 'refused:throttled',
      n: Math.round(accepted / 12) + (now - m < 130 * MINUTE_MS && now - m > 110 * MINUTE_MS ? 25 : 0),
    });
    if ((m / MINUTE_MS) % 5 === 0) counts.push({ minute: m, series: 'refused:invalid', n: 2 });
    if (now - m < 60 * MINUTE_MS) {
      hosts.push({ minute: m, host: 'blogs.example.org', accepted: Math.round(accepted / 4), refused: 1 });
      hosts.push({ minute: m, host: 'news.example.net', accepted: Math.round(accepted / 9), refused: 0 });
      hosts.push({ minute: m, host: 'photos.example.com', accepted: 2, refused: 0 });
    }
  }
  await addMinuteCounts(app.db, counts, hosts);

  const rpc = (name: string, url: string, rss?: string) =>
    fetch(`${base}/RPC2`, {
      method: 'POST',
      headers: { 'content-type': 'text/xml' },
      body: `<?xml version="1.0"?><methodCall><methodName>weblogUpdates.${rss ? 'extendedPing' : 'ping'}</methodName><params><param><value>${name}</value></param><param><value>${url}</value></param>${rss ? `<param><value>${url}</value></param><param><value>${rss}</value></param>` : ''}</params></methodCall>`,
    }).then((r) => r.text());
  const names = [
    'Scripting News',
    'The Daily Bread',
    'Notes from the Garden',
    'A Developer Diary',
    'Photo a Day',
    'Cooking for Two',
    'Field Recordings',
    'Rust Weekly',
  ];
  for (let i = 0; i < 40; i++)
    await rpc(
      names[i % names.length] + (i >= names.length ? ` #${i}` : ''),
      `https://blog${i}.example.org/`,
      i % 3 === 0 ? `https://blog${i}.example.org/feed` : undefined,
    );
  await rpc('Scripting News', 'https://blog0.example.org/');
  await rpc('not a weblog', 'javascript:alert(1)');
  await app.renderer.tick();

  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const shots: [string, string, number][] = [
    ['home', '/', 1000],
    ['weblog', `/weblog?url=${encodeURIComponent('https://blog0.example.org/')}`, 1000],
    ['status', '/status', 1100],
  ];
  for (const [name, path, width] of shots) {
    const page = await browser.newPage({ viewport: { width, height: 900 }, deviceScaleFactor: 1 });
    await page.goto(`${base}${path}`);
    if (name === 'status') {
      await page.waitForSelector('#chart-24h[data-points="1440"]');
      await rpc('Just Now', 'https://justnow.example.org/');
      await page.waitForFunction(() => (document.getElementById('recent')?.textContent ?? '').includes('Just Now'));
    }
    await page.screenshot({ path: join(OUT, `${name}.png`), fullPage: name !== 'home' });
    await page.close();
    process.stderr.write(`docs/screenshots/${name}.png\n`);
  }
  await browser.close();
} finally {
  await app.close();
  rmSync(dir, { recursive: true, force: true });
}
