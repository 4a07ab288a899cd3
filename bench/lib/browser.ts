// Owns the headless browser of the `web` benchmark: Debian's Chromium driven by playwright-core, one page
// open on pingd's /status dashboard, and what the page did meanwhile: /api/stats requests, console
// errors, and the CPU and memory of the browser's processes (they share the 2 cores with pingd).
import { readFileSync, readdirSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { cpuMicros } from './cpu.js';

export const EXECUTABLE = process.env.BENCH_CHROMIUM || '/usr/bin/chromium';
// No network beyond loopback, no background work of the browser's own that would blur the CPU figures.
export const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Installed before the page's own scripts: counts the /api/stats fetches the page starts and the stream
 * events its listeners receive, and samples the main thread's lag (how late a 100 ms timer fires): what a
 * person looking at the dashboard would feel while events pour in.
 */
const PROBE = `(() => {
  const b = (window.__bench = { stats: 0, events: 0, lags: [] });
  const f = window.fetch;
  window.fetch = function (input, init) {
    if (String(input && input.url ? input.url : input).includes('/api/stats')) b.stats++;
    return f.call(this, input, init);
  };
  if (window.EventSource) {
    const add = EventSource.prototype.addEventListener;
    EventSource.prototype.addEventListener = function (type, fn, opts) {
      if (typeof fn !== 'function') return add.call(this, type, fn, opts);
      return add.call(this, type, function (e) { b.events++; return fn.call(this, e); }, opts);
    };
  }
  let due = performance.now() + 100;
  setInterval(() => {
    const now = performance.now();
    b.lags.push(Math.max(0, now - due));
    if (b.lags.length > 100000) b.lags.length = 0;
    due = now + 100;
  }, 100);
})();`;

/** What the page's probe counted so far. */
export interface PageCounts {
  stats: number;
  events: number;
  /** Timer lags sampled so far (ms); the caller slices the run's part. */
  lags: number[];
}

export interface Dashboard {
  /** ms from navigation to the load event, and to the first /api/stats answer. */
  loadMs: number;
  firstStatsMs: number;
  /** /api/stats requests the page made so far (reset by the caller between readings). */
  statsRequests: number;
  /** /api/stats answers that were not 200. */
  statsFailures: number;
  /** /stream requests (one, unless the page reconnected). */
  streamRequests: number;
  consoleErrors: string[];
  /** CPU µs of the browser's processes so far, and their summed RSS (KiB). */
  /** The probe's counters (undefined when the page no longer answers). */
  counts(): Promise<PageCounts | undefined>;
  cpuUs(): number;
  rssKb(): number;
  close(): Promise<void>;
}

/** Every process under `root` (itself included), from /proc. */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const s = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(name));
      children.set(ppid, list);
    } catch {
      /* exited meanwhile */
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    out.push(p);
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(root);
  return out;
}

/** The browser's processes: Chromium processes among this process's descendants (pingd is not one). */
function browserPids(): number[] {
  return descendants(process.pid).filter((p) => {
    try {
      return /chrom/i.test(readFileSync(`/proc/${p}/comm`, 'utf8'));
    } catch {
      return false;
    }
  });
}

function procRssKb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** True when pingd serves a /status page (the web face); false while only /api/stats exists. */
export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: EXECUTABLE, args: ARGS, headless: true });
}

/**
 * Opens `${baseUrl}/status` in a fresh context and waits until it has loaded and its first /api/stats
 * answer arrived (or 15 s passed), then 1 s more so that the page's start-up work is over before a run.
 */
export async function openDashboard(browser: Browser, baseUrl: string): Promise<Dashboard> {
  const context = await browser.newContext();
  const page: Page = await context.newPage();
  await page.addInitScript(PROBE);
  const d = {
    loadMs: NaN,
    firstStatsMs: NaN,
    statsRequests: 0,
    statsFailures: 0,
    streamRequests: 0,
    consoleErrors: [] as string[],
  };
  const started = performance.now();
  let firstStats: () => void = () => undefined;
  const statsSeen = new Promise<void>((r) => (firstStats = r));
  page.on('request', (req) => {
    const u = new URL(req.url());
    if (u.pathname === '/api/stats') d.statsRequests++;
    else if (u.pathname === '/stream') d.streamRequests++;
  });
  page.on('response', (res) => {
    if (new URL(res.url()).pathname !== '/api/stats') return;
    if (res.status() !== 200) d.statsFailures++;
    if (Number.isNaN(d.firstStatsMs)) d.firstStatsMs = performance.now() - started;
    firstStats();
  });
  const keep = (s: string) => {
    if (d.consoleErrors.length < 50) d.consoleErrors.push(s.slice(0, 300));
  };
  page.on('console', (m) => {
    if (m.type() === 'error') keep(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => keep(`pageerror: ${e.message}`));
  await page.goto(`${baseUrl}/status`, { waitUntil: 'load', timeout: 30_000 });
  d.loadMs = performance.now() - started;
  await Promise.race([statsSeen, new Promise((r) => setTimeout(r, 15_000))]);
  await new Promise((r) => setTimeout(r, 1000));
  return Object.assign(d, {
    counts: () =>
      page
        .evaluate(() => {
          const b = (window as unknown as { __bench?: PageCounts }).__bench;
          return b ? { stats: b.stats, events: b.events, lags: b.lags.slice() } : undefined;
        })
        .catch(() => undefined),
    cpuUs: () => browserPids().reduce((a, p) => a + cpuMicros(p), 0),
    rssKb: () => browserPids().reduce((a, p) => a + procRssKb(p), 0),
    close: () => context.close(),
  });
}
