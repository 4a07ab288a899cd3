// Owns the pages' audit: axe-core on every page at 375 and 1280 px, light and dark (zero violations is the
// bar), what /status costs on the wire in headless Chromium (each resource's bytes as sent, compressed and
// with compression refused), and, when given a Lighthouse binary, its four scores for /, /weblog?url= and
// /status. One pingd in-process on a fresh embedded database, with real pings and a day of per-minute
// statistics added through the statistics repository (so /api/stats?window=24h is a day's size).
//
//   node --import tsx bench/web-audit.ts [--write]
//
// axe-core and Lighthouse are not dependencies of pingd: install them outside the checkout and point here.
// BENCH_AXE_CORE (axe.min.js, or the axe-core package directory; default: axe-core if it is installed),
// BENCH_LIGHTHOUSE (the lighthouse CLI, 12.x runs on Node 20; unset: no Lighthouse), BENCH_CHROMIUM
// (/usr/bin/chromium). For example:
//   mkdir -p /tmp/audit && npm i --prefix /tmp/audit axe-core@4 lighthouse@12
//   BENCH_AXE_CORE=/tmp/audit/node_modules/axe-core BENCH_LIGHTHOUSE=/tmp/audit/node_modules/.bin/lighthouse node --import tsx bench/web-audit.ts
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/platform/config.js';
import { addMinuteCounts } from '../src/operations/stats/minute-repository.js';
import { MINUTE_MS, minuteOf, type SeriesCount } from '../src/operations/stats/minute-tally.js';
import { ROOT } from './lib/servers.js';
import { recordRun } from './lib/results.js';
import { ARGS as BROWSER_ARGS, EXECUTABLE } from './lib/browser.js';

const env = process.env;
const log = (s: string) => process.stderr.write(`${s}\n`);
const CHROMIUM = EXECUTABLE;
// The benchmarks' browser flags (bench/lib/browser.ts), and no default apps or extensions for the audit.
const ARGS = [...BROWSER_ARGS, '--disable-default-apps', '--disable-extensions'];
const WIDTHS = [375, 1280];
const SCHEMES = ['light', 'dark'] as const;

function axeSource(): string {
  const given = env.BENCH_AXE_CORE;
  let path: string | undefined;
  if (given) path = existsSync(given) && statSync(given).isDirectory() ? join(given, 'axe.min.js') : given;
  else {
    try {
      path = createRequire(join(ROOT, 'package.json')).resolve('axe-core/axe.min.js');
    } catch {
      path = undefined;
    }
  }
  if (!path || !existsSync(path))
    throw new Error('axe-core not found: `npm i --prefix /tmp/audit axe-core@4` and set BENCH_AXE_CORE=/tmp/audit/node_modules/axe-core');
  return readFileSync(path, 'utf8');
}

/** A day's shape in the per-minute statistics: what a dashboard of a running server reads. */
async function addDay(app: Awaited<ReturnType<typeof buildApp>>): Promise<void> {
  const now = minuteOf(Date.now());
  const counts: SeriesCount[] = [];
  for (let m = now - 24 * 60 * MINUTE_MS; m < now; m += MINUTE_MS) {
    const hour = new Date(m).getUTCHours() + new Date(m).getUTCMinutes() / 60;
    const accepted = Math.round(40 + 30 * Math.sin(((hour - 9) / 24) * 2 * Math.PI) + 6 * Math.sin(m / 1_500_000));
    counts.push({ minute: m, series: 'accepted', n: accepted }, { minute: m, series: 'refused:throttled', n: Math.round(accepted / 12) });
    if ((m / MINUTE_MS) % 5 === 0) counts.push({ minute: m, series: 'refused:invalid', n: 2 });
  }
  await addMinuteCounts(app.db, counts, []);
}

interface AxeResult {
  page: string;
  width: number;
  scheme: string;
  violations: string[];
}

async function runAxe(browser: Browser, base: string, paths: string[], source: string): Promise<AxeResult[]> {
  const out: AxeResult[] = [];
  for (const width of WIDTHS) {
    for (const scheme of SCHEMES) {
      for (const path of paths) {
        const context = await browser.newContext({ viewport: { width, height: 800 }, colorScheme: scheme });
        const page = await context.newPage();
        await page.goto(`${base}${path}`);
        if (path === '/status') await page.waitForSelector('#chart-24h canvas');
        // Evaluated through the devtools protocol: the pages' CSP (script-src 'self') would refuse a <script>.
        await page.evaluate(source);
        const violations = await page.evaluate(async () => {
          const r = await (
            window as unknown as { axe: { run(): Promise<{ violations: { id: string; nodes: { target: string[] }[] }[] }> } }
          ).axe.run();
          return r.violations.map((v) => `${v.id} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
        });
        out.push({ page: path, width, scheme, violations });
        await context.close();
      }
    }
  }
  return out;
}

interface Transfer {
  path: string;
  encoding: string;
  /** Body bytes as sent, and with their headers. */
  body: number;
  total: number;
  decoded: number;
}

/** Every response of /status until its charts are drawn, as the browser received them. */
async function statusTransfers(browser: Browser, base: string, acceptEncoding?: string): Promise<Transfer[]> {
  const context = await browser.newContext({
    viewport: { width: 1280, height: 900 },
    ...(acceptEncoding ? { extraHTTPHeaders: { 'accept-encoding': acceptEncoding } } : {}),
  });
  const page = await context.newPage();
  const pending: Promise<Transfer>[] = [];
  page.on('response', (r) => {
    const u = new URL(r.url());
    if (u.pathname === '/stream') return;
    pending.push(
      (async () => {
        const sizes = await r.request().sizes();
        return {
          path: u.pathname + u.search,
          encoding: (await r.allHeaders())['content-encoding'] ?? 'identity',
          body: sizes.responseBodySize,
          total: sizes.responseBodySize + sizes.responseHeadersSize,
          decoded: (await r.body()).length,
        };
      })(),
    );
  });
  await page.goto(`${base}/status`);
  await page.waitForSelector('#chart-1h[data-points="60"]');
  await page.waitForSelector('#chart-24h[data-points="1440"]');
  const out = await Promise.all(pending);
  await context.close();
  return out;
}

const CATEGORIES = ['performance', 'accessibility', 'best-practices', 'seo'] as const;

/** Lighthouse's four scores of one URL (its default: a mobile device, simulated throttling). */
async function lighthouse(bin: string, url: string): Promise<{ scores: number[]; failed: string[] }> {
  const flags = `--headless=new ${ARGS.join(' ')}`;
  const p = spawn(bin, [url, '--quiet', '--output=json', '--output-path=stdout', `--chrome-flags=${flags}`], {
    env: { ...env, CHROME_PATH: CHROMIUM },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const chunks: Buffer[] = [];
  let err = '';
  p.stdout.on('data', (d: Buffer) => chunks.push(d));
  p.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((r) => p.on('exit', r));
  if (code !== 0) throw new Error(`lighthouse ${url} exited with ${code}: ${err.trim().slice(-500)}`);
  const report = JSON.parse(Buffer.concat(chunks).toString()) as {
    categories: Record<string, { score: number; auditRefs: { id: string; weight: number }[] }>;
    audits: Record<string, { score: number | null }>;
  };
  const scores = CATEGORIES.map((c) => Math.round(report.categories[c].score * 100));
  const failed = CATEGORIES.flatMap((c) =>
    report.categories[c].auditRefs.filter((a) => a.weight > 0 && (report.audits[a.id]?.score ?? 1) < 1).map((a) => a.id),
  );
  return { scores, failed };
}

async function main(): Promise<boolean> {
  const started = new Date();
  const source = axeSource();
  const dir = mkdtempSync(join(tmpdir(), 'pingd-audit-'));
  const app = await buildApp({ config: loadConfig({ LOG_LEVEL: 'warn', DATA_DIR: dir, VERIFY_PINGS: 'off' }), logger: false });
  let browser: Browser | undefined;
  try {
    await app.listen({ host: '127.0.0.1', port: 0 });
    const addr = app.server.address();
    if (!addr || typeof addr === 'string') throw new Error('no address');
    const base = `http://127.0.0.1:${addr.port}`;
    await addDay(app);
    const rpc = (name: string, url: string) =>
      fetch(`${base}/RPC2`, {
        method: 'POST',
        headers: { 'content-type': 'text/xml' },
        body: `<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName><params><param><value>${name}</value></param><param><value>${url}</value></param></params></methodCall>`,
      }).then((r) => r.text());
    for (let i = 0; i < 25; i++) await rpc(`Audit weblog ${i}`, `https://audit${i}.example.org/`);
    await rpc('Audit weblog 0', 'https://audit0.example.org/');
    const known = `/weblog?url=${encodeURIComponent('https://audit0.example.org/')}`;
    const paths = ['/', '/weblog', known, `/weblog?url=${encodeURIComponent('https://never.example.org/')}`, '/status', '/pingSiteForm'];

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
    log('axe…');
    const axe = await runAxe(browser, base, paths, source);
    log('/status transfers…');
    const compressed = await statusTransfers(browser, base);
    const identity = await statusTransfers(browser, base, 'identity');
    const lhBin = env.BENCH_LIGHTHOUSE;
    const lh: { path: string; scores: number[]; failed: string[] }[] = [];
    if (lhBin) {
      for (const path of ['/', known, '/status']) {
        log(`lighthouse ${path}…`);
        lh.push({ path, ...(await lighthouse(lhBin, `${base}${path}`)) });
      }
    }

    const md: string[] = [`# Web pages audit, ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`, ''];
    md.push(
      `axe-core ${/axe v([\d.]+)/.exec(source)?.[1] ?? '?'} on ${paths.length} pages × ${WIDTHS.join(' and ')} px × light and dark: **${axe.reduce((n, r) => n + r.violations.length, 0)} violations**.`,
      '',
    );
    for (const r of axe.filter((x) => x.violations.length))
      md.push(`- ${r.page} at ${r.width} px, ${r.scheme}: ${r.violations.join('; ')}`);
    if (axe.some((x) => x.violations.length)) md.push('');
    md.push(
      '`/status` until both charts are drawn, headless Chromium (bytes of the body as sent / with headers; decoded):',
      '',
      '| resource | compressed | as sent | with headers | refusing compression | decoded |',
      '| --- | --- | ---: | ---: | ---: | ---: |',
    );
    const byPath = new Map(identity.map((x) => [x.path.replace(/\.[0-9a-f]{12}\./, '.*.'), x]));
    let sum = 0;
    let sumTotal = 0;
    let sumIdentity = 0;
    for (const x of compressed) {
      const key = x.path.replace(/\.[0-9a-f]{12}\./, '.*.');
      const id = byPath.get(key);
      sum += x.body;
      sumTotal += x.total;
      sumIdentity += id?.total ?? 0;
      md.push(
        `| \`${key}\` | ${x.encoding} | ${x.body.toLocaleString('en')} | ${x.total.toLocaleString('en')} | ${id ? id.total.toLocaleString('en') : '–'} | ${x.decoded.toLocaleString('en')} |`,
      );
    }
    md.push(`| all | | ${sum.toLocaleString('en')} | ${sumTotal.toLocaleString('en')} | ${sumIdentity.toLocaleString('en')} | |`, '');
    if (lh.length) {
      md.push(
        'Lighthouse (mobile, simulated throttling): performance / accessibility / best practices / SEO',
        '',
        '| page | scores | audits below 1 |',
        '| --- | --- | --- |',
      );
      for (const r of lh) md.push(`| \`${r.path.replace(/url=.*/, 'url=…')}\` | ${r.scores.join(' / ')} | ${r.failed.join(', ') || '–'} |`);
      md.push('');
    }
    const text = md.join('\n');
    console.log(text);
    if (process.argv.includes('--write'))
      log(
        `results written to ${recordRun({ scenario: 'web-audit', title: 'Web pages audit', started, markdown: text, backends: [] }).join(', ')}`,
      );
    return axe.every((r) => r.violations.length === 0) && lh.every((r) => r.scores.every((s) => s === 100));
  } finally {
    await browser?.close();
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  (ok) => process.exit(ok ? 0 : 1),
  (err: Error) => {
    console.error(`web audit failed: ${err.stack ?? err.message}`);
    process.exit(1);
  },
);
