// Owns the `web` scenario of `npm run bench`: what pingd's web face costs and how fast it answers, on each
// backend. (1) Durable XML-RPC intake (a new weblog per ping, 64 connections, as the `ping` scenario) in
// rotating runs with nothing open, with /status open in headless Chromium (Debian's /usr/bin/chromium
// through playwright-core) on the same cores, and with the page's traffic but no browser (a Node process
// reading /stream, /api/stats polled on the page's schedule; a real browser runs elsewhere): pings/s, p50,
// p99, ratios, the /api/stats requests the page made, whether it keeps up with the stream. (2) A database filled with a day of traffic (1M pings of 200k weblogs, with the
// per-minute statistics), then /api/stats?window=1h|24h cold (requests > 2 s apart, past the in-process
// cache) and cached under 16 connections, and "did my ping arrive?" (/weblog?url=, or /api/weblogs?url=
// while that page does not exist) for a weblog with 20k pings. (3) pingd's RSS at the end of each.
// About 4–5 minutes per backend with the defaults (4.1 on PostgreSQL, 4.7 on PGlite, measured on a busy machine),
// so it runs in the default `npm run bench` set; it needs Chromium for part (1), which is skipped without it.
//
//   BENCH_SCENARIOS=web npm run bench [-- --write]      (or: node --import tsx bench/web.ts [--write])
//
// Environment: BENCH_BACKENDS (postgres,pglite), BENCH_DATABASE_URL, BENCH_WEB_PARTS (intake,stats),
// BENCH_WEB_RUNS (rounds of the three intake runs, 3), BENCH_WEB_SECONDS (per intake run, 8: the page polls every few
// seconds), BENCH_WEB_CONNECTIONS (64), BENCH_WEB_PINGS (1000000), BENCH_WEB_PGLITE_PINGS (BENCH_WEB_PINGS),
// BENCH_WEB_WEBLOGS (200000), BENCH_WEB_COLD_SAMPLES (20 per window), BENCH_WEB_LOAD_SECONDS (5),
// BENCH_CHROMIUM (/usr/bin/chromium), BENCH_PINGD_<VAR> (passed to pingd as <VAR>).
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpus, loadavg, totalmem } from 'node:os';
import { envNumber } from './lib/env.js';
import { recordRun } from './lib/results.js';
import {
  ROOT,
  PINGD_ROOT,
  startPingd,
  createPostgresDatabase,
  createPgliteDatabase,
  track,
  type Child,
  type BenchDatabase,
} from './lib/servers.js';
import { runLoad, median, type LoadRun } from './lib/load.js';
import { pingSpec, documentSpec, sample } from './lib/scenarios.js';
import { cpuMicros } from './lib/cpu.js';
import { launchBrowser, openDashboard } from './lib/browser.js';
import { fillPostgres, HOT_WEBLOG, TYPICAL_WEBLOG, type FillTimings } from './lib/web-fill.js';
import { describeConfig } from '../src/platform/config.js';
import { git } from './lib/git.js';
import { isMain, runDirect } from './lib/run-direct.js';

const env = process.env;
const num = (name: string, def: number) => Math.round(envNumber(name, def));
const log = (s: string) => process.stderr.write(`${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const CHROMIUM = env.BENCH_CHROMIUM || '/usr/bin/chromium';

export interface WebOptions {
  databaseUrl: string;
  backends: ('postgres' | 'pglite')[];
  write: boolean;
}

function settings() {
  const pings = num('BENCH_WEB_PINGS', 1_000_000);
  return {
    parts: (env.BENCH_WEB_PARTS || 'intake,stats').split(',').map((s) => s.trim()),
    runs: num('BENCH_WEB_RUNS', 3),
    seconds: num('BENCH_WEB_SECONDS', 8),
    connections: num('BENCH_WEB_CONNECTIONS', 64),
    pings,
    pglitePings: num('BENCH_WEB_PGLITE_PINGS', pings),
    weblogs: num('BENCH_WEB_WEBLOGS', 200_000),
    coldSamples: num('BENCH_WEB_COLD_SAMPLES', 20),
    loadSeconds: num('BENCH_WEB_LOAD_SECONDS', 5),
  };
}
type Settings = ReturnType<typeof settings>;

/** pingd's environment: the part's settings, then every BENCH_PINGD_<VAR> (except ROOT), then the database. */
function pingdEnv(extra: Record<string, string>, db: BenchDatabase): Record<string, string> {
  const out: Record<string, string> = { ...extra };
  for (const [k, v] of Object.entries(env))
    if (k.startsWith('BENCH_PINGD_') && k !== 'BENCH_PINGD_ROOT' && v !== undefined) out[k.slice(12)] = v;
  return { ...out, ...db.env };
}

/** VmRSS and VmHWM (peak) of a process, MB. */
function memory(pid: number): { rss: number; peak: number } {
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(s)?.[1] ?? NaN);
    return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
  } catch {
    return { rss: NaN, peak: NaN };
  }
}

async function metrics(url: string): Promise<string> {
  try {
    const r = await fetch(`${url}/metrics`);
    return r.ok ? await r.text() : '';
  } catch {
    return '';
  }
}
/** A counter's value in a Prometheus text exposition (`labels` exactly as written, e.g. `reason="slow"`). */
function metric(text: string, name: string, labels?: string): number {
  const re = new RegExp(`^${name}${labels ? `\\{${labels.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\}` : ''} (\\S+)$`, 'm');
  const m = re.exec(text);
  return m ? Number(m[1]) : 0;
}

/** `pingd migrate` of the measured checkout on the database (as pingd serve would on start). */
async function migrate(pingdEnvVars: Record<string, string>): Promise<void> {
  const inherited: Record<string, string | undefined> = { ...env };
  for (const { name } of describeConfig()) delete inherited[name];
  const p = spawn(process.execPath, ['--import', 'tsx', join(PINGD_ROOT, 'src/cli.ts'), 'migrate'], {
    cwd: PINGD_ROOT,
    env: { ...inherited, LOG_LEVEL: 'warn', ...pingdEnvVars },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  track(p);
  let err = '';
  p.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((r) => p.on('exit', r));
  if (code !== 0) throw new Error(`pingd migrate exited with ${code}: ${err.trim().slice(-500)}`);
}

/** The embedded database is filled in a child process: PGlite's heap stays out of the load generator. */
async function fillPgliteChild(dir: string, pings: number, weblogs: number): Promise<FillTimings> {
  const p = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'bench/lib/web-fill.ts'), dir, String(pings), String(weblogs)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(p);
  let out = '';
  let err = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  p.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((r) => p.on('exit', r));
  if (code !== 0) throw new Error(`filling the embedded database failed (${code}): ${err.trim().slice(-500)}`);
  return JSON.parse(out.trim().split('\n').pop()!) as FillTimings;
}

// ---------------------------------------------------------------------------------------------------------
// (1) Intake with and without the dashboard open.

interface IntakeRun {
  load: LoadRun;
  /** pingd CPU µs per request. */
  pingdUs: number;
  /** Cores the browser's processes used on average (with-runs). */
  browserCores?: number;
  /** /api/stats fetches the page started during the run (its own count), and those Playwright saw. */
  statsRequests?: number;
  statsSeen?: number;
  streamEvents?: number;
  /** Stream events the page's listeners received. */
  pageEvents?: number;
  /** The page's main-thread lag during the run (a 100 ms timer's lateness), p50 and max, ms. */
  lagP50?: number;
  lagMax?: number;
  /** How long the page took to answer once the run ended: the backlog of events it was still working through. */
  behindMs?: number;
  slowDisconnects?: number;
}

interface IntakeResult {
  without: IntakeRun[];
  with: IntakeRun[];
  /** The page's traffic without the page: /stream read by a Node process, /api/stats polled as the page polls. */
  reader: IntakeRun[];
  ratios: number[];
  readerRatios: number[];
  loadMs: number[];
  firstStatsMs: number[];
  consoleErrors: string[];
  statsFailures: number;
  streamRequests: number;
  pingd: { rss: number; peak: number };
  browserRssMb: number[];
  seconds: number;
}

async function intakePart(backend: 'postgres' | 'pglite', s: Settings, databaseUrl: string): Promise<IntakeResult> {
  const t0 = performance.now();
  const db = backend === 'postgres' ? await createPostgresDatabase(databaseUrl) : await createPgliteDatabase();
  let pingd: Child | undefined;
  try {
    // As the `ping` scenario: the renderer stopped (a bench minute holds far more pings than a real hour),
    // verification off. Every ping names a new host, so PING_HOST_BUDGET never refuses one.
    pingd = await startPingd({ env: pingdEnv({ RENDER_SCHEDULER: 'false' }, db) });
    log(`web/${backend}: intake at ${pingd.url}`);
    const spec = pingSpec();
    const { connections } = s;
    await runLoad(pingd.url, spec, { connections, amount: connections * 40 });
    // Bounded by time, not by a count: a with-run then lasts as long as a without-run, so that the page's
    // polls per run compare (nothing here counts acknowledgements, which is what a count bound is for).
    const duration = s.seconds;
    const r: IntakeResult = {
      without: [],
      with: [],
      reader: [],
      ratios: [],
      readerRatios: [],
      loadMs: [],
      firstStatsMs: [],
      consoleErrors: [],
      statsFailures: 0,
      streamRequests: 0,
      pingd: { rss: NaN, peak: NaN },
      browserRssMb: [],
      seconds: 0,
    };
    const p = pingd;

    const runWithout = async (): Promise<IntakeRun> => {
      const c0 = cpuMicros(p.proc.pid!);
      const load = await runLoad(p.url, spec, { connections, duration });
      return { load, pingdUs: (cpuMicros(p.proc.pid!) - c0) / Math.max(1, load.requests) };
    };
    const runWith = async (): Promise<IntakeRun> => {
      const browser = await launchBrowser();
      try {
        const dash = await openDashboard(browser, p.url);
        r.loadMs.push(dash.loadMs);
        r.firstStatsMs.push(dash.firstStatsMs);
        const m0 = await metrics(p.url);
        const stats0 = dash.statsRequests;
        const k0 = await dash.counts();
        const b0 = dash.cpuUs();
        const w0 = performance.now();
        const c0 = cpuMicros(p.proc.pid!);
        const load = await runLoad(p.url, spec, { connections, duration });
        const pingdUs = (cpuMicros(p.proc.pid!) - c0) / Math.max(1, load.requests);
        const browserCores = (dash.cpuUs() - b0) / ((performance.now() - w0) * 1000);
        const statsSeen = dash.statsRequests - stats0;
        const e0 = performance.now();
        const k1 = await dash.counts();
        const behindMs = performance.now() - e0;
        const lags = k0 && k1 ? k1.lags.slice(k0.lags.length).sort((x, y) => x - y) : [];
        r.browserRssMb.push(dash.rssKb() / 1024);
        const m1 = await metrics(p.url);
        r.consoleErrors.push(...dash.consoleErrors.filter((e) => !r.consoleErrors.includes(e)));
        r.statsFailures += dash.statsFailures;
        r.streamRequests = Math.max(r.streamRequests, dash.streamRequests);
        await dash.close();
        return {
          load,
          pingdUs,
          browserCores,
          statsRequests: k0 && k1 ? k1.stats - k0.stats : undefined,
          statsSeen,
          pageEvents: k0 && k1 ? k1.events - k0.events : undefined,
          lagP50: percentile(lags, 0.5),
          lagMax: lags[lags.length - 1],
          behindMs,
          streamEvents: metric(m1, 'pingd_stream_events_read_total') - metric(m0, 'pingd_stream_events_read_total'),
          slowDisconnects:
            metric(m1, 'pingd_stream_disconnects_total', 'reason="slow"') - metric(m0, 'pingd_stream_disconnects_total', 'reason="slow"'),
        };
      } finally {
        await browser.close();
      }
    };

    // What the page asks of pingd, with the browser elsewhere (as it would be): one /stream connection read
    // by a process of its own (bench/lib/stream-clients.ts), and /api/stats polled on the page's schedule
    // (1h every 5 s, 24h every 30 s, both at once first).
    const runReader = async (): Promise<IntakeRun> => {
      const reader = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'bench/lib/stream-clients.ts'), p.url, '1'], {
        cwd: ROOT,
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      track(reader);
      let out = '';
      reader.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      const exited = new Promise((res) => reader.once('exit', res));
      try {
        const until = Date.now() + 10_000;
        while (!out.includes('"ready"') && Date.now() < until && reader.exitCode === null) await sleep(20);
        const m0 = await metrics(p.url);
        const poll = (w: string) =>
          fetch(`${p.url}/api/stats?window=${w}`).then(
            (x) => x.arrayBuffer(),
            () => undefined,
          );
        void poll('1h');
        void poll('24h');
        let polls = 2;
        const t1h = setInterval(() => (polls++, void poll('1h')), 5000);
        const t24 = setInterval(() => (polls++, void poll('24h')), 30_000);
        const c0 = cpuMicros(p.proc.pid!);
        const load = await runLoad(p.url, spec, { connections, duration });
        const pingdUs = (cpuMicros(p.proc.pid!) - c0) / Math.max(1, load.requests);
        clearInterval(t1h);
        clearInterval(t24);
        const m1 = await metrics(p.url);
        return {
          load,
          pingdUs,
          statsRequests: polls,
          streamEvents: metric(m1, 'pingd_stream_events_read_total') - metric(m0, 'pingd_stream_events_read_total'),
          slowDisconnects:
            metric(m1, 'pingd_stream_disconnects_total', 'reason="slow"') - metric(m0, 'pingd_stream_disconnects_total', 'reason="slow"'),
        };
      } finally {
        reader.stdin!.end();
        await exited;
      }
    };

    // Rotated, so that a drift of the machine's load favours no variant.
    const order: ('none' | 'page' | 'reader')[][] = [
      ['none', 'page', 'reader'],
      ['page', 'reader', 'none'],
      ['reader', 'none', 'page'],
    ];
    for (let i = 0; i < s.runs; i++) {
      const got: Partial<Record<'none' | 'page' | 'reader', IntakeRun>> = {};
      for (const v of order[i % 3]) {
        got[v] = v === 'none' ? await runWithout() : v === 'page' ? await runWith() : await runReader();
        await sleep(1000);
      }
      const a = got.none!;
      const b = got.page!;
      const c = got.reader!;
      r.without.push(a);
      r.with.push(b);
      r.reader.push(c);
      r.ratios.push(b.load.rps / a.load.rps);
      r.readerRatios.push(c.load.rps / a.load.rps);
      log(
        `  run ${i + 1}: no browser ${Math.round(a.load.rps)}/s (p99 ${a.load.p99} ms), with /status ${Math.round(b.load.rps)}/s (p99 ${b.load.p99} ms), ratio ${(b.load.rps / a.load.rps).toFixed(3)}; ` +
          `stream reader + polls ${Math.round(c.load.rps)}/s (p99 ${c.load.p99} ms), ratio ${(c.load.rps / a.load.rps).toFixed(3)}, ${c.streamEvents} events; ` +
          `page: ${b.statsRequests} /api/stats requests (${b.statsSeen} seen), ${b.streamEvents} stream events read, ${b.pageEvents} received, timer lag p50 ${f0(b.lagP50)} max ${f0(b.lagMax)} ms, answered ${f0(b.behindMs)} ms after the run, browser ${b.browserCores!.toFixed(2)} cores`,
      );
    }
    r.pingd = memory(pingd.proc.pid!);
    const code = await pingd.stop();
    pingd = undefined;
    if (code !== 0) log(`  pingd exited with ${code}`);
    r.seconds = (performance.now() - t0) / 1000;
    return r;
  } catch (err) {
    throw withPingdState(err as Error, pingd);
  } finally {
    await pingd?.stop();
    await db.drop();
  }
}

// ---------------------------------------------------------------------------------------------------------
// (2) A day of traffic in the database: /api/stats cold and cached, "did my ping arrive?".

interface Latency {
  n: number;
  p50: number;
  p99: number;
  max: number;
  bytes: number;
  /** Answers computed afresh (a new generatedAt), of n: the cache had expired. */
  fresh?: number;
  statuses: string;
}

interface StatsResult {
  pings: number;
  fill: FillTimings;
  cold: Record<string, Latency>;
  cached: Record<string, LoadRun>;
  weblogPath: string;
  weblog: { hot: Latency; typical: Latency; load: LoadRun };
  pages: Record<string, Latency>;
  dashboard?: { loadMs: number; firstStatsMs: number; consoleErrors: string[] };
  pingd: { rss: number; peak: number; afterStart: number };
  seconds: number;
}

function percentile(sorted: number[], q: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

function summarize(ms: number[], bytes: number, statuses: Map<number, number>, fresh?: number): Latency {
  const s = [...ms].sort((a, b) => a - b);
  return {
    n: s.length,
    p50: percentile(s, 0.5),
    p99: percentile(s, 0.99),
    max: s[s.length - 1],
    bytes,
    fresh,
    statuses: [...statuses].map(([k, v]) => `${v}×${k}`).join(', '),
  };
}

/** One GET, timed to the last byte. */
async function timed(url: string, path: string): Promise<{ ms: number; status: number; body: Buffer }> {
  const t = performance.now();
  const r = await sample(url, documentSpec(path, {}, 200));
  return { ms: performance.now() - t, status: r.status, body: r.body };
}

/** `n` requests one after another (after `warm` untimed ones). */
async function sequential(url: string, path: string, n: number, warm = 5): Promise<Latency> {
  for (let i = 0; i < warm; i++) await timed(url, path);
  const ms: number[] = [];
  const statuses = new Map<number, number>();
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const r = await timed(url, path);
    ms.push(r.ms);
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    bytes = r.body.length;
  }
  return summarize(ms, bytes, statuses);
}

async function statsPart(backend: 'postgres' | 'pglite', s: Settings, databaseUrl: string): Promise<StatsResult> {
  const t0 = performance.now();
  const pings = backend === 'pglite' ? s.pglitePings : s.pings;
  const db = backend === 'postgres' ? await createPostgresDatabase(databaseUrl) : await createPgliteDatabase();
  let pingd: Child | undefined;
  try {
    // The renderer stays stopped: on start it would render the day's 24 archive hours (40k pings each),
    // minutes of work that would share the cores (and PGlite's one session) with what is measured here.
    const vars = pingdEnv({ RENDER_SCHEDULER: 'false' }, db);
    await migrate(vars);
    log(`web/${backend}: filling ${pings.toLocaleString('en-US')} pings of ${s.weblogs.toLocaleString('en-US')} weblogs…`);
    const fill =
      backend === 'postgres'
        ? await fillPostgres(db.env.DATABASE_URL, { pings, weblogs: s.weblogs })
        : await fillPgliteChild(db.env.DATA_DIR, pings, s.weblogs);
    log(
      `  filled in ${fill.seconds.toFixed(1)} s: ${fill.pings} pings, ${fill.weblogs} weblogs, ${fill.statsMinutes} stats_minutes rows, ${fill.statsHosts} stats_minute_hosts rows`,
    );
    pingd = await startPingd({ env: vars });
    const url = pingd.url;
    await sleep(1000);
    const afterStart = memory(pingd.proc.pid!).rss;

    // Cold: both windows in turn, each request more than CACHE_MS (2 s) after the previous one of its window.
    // One untimed request per window first (the first answer pays for compiling the route's code).
    const windows = ['1h', '24h'];
    for (const w of windows) await timed(url, `/api/stats?window=${w}`);
    await sleep(2200);
    const coldMs: Record<string, number[]> = { '1h': [], '24h': [] };
    const coldStatus: Record<string, Map<number, number>> = { '1h': new Map(), '24h': new Map() };
    const coldBytes: Record<string, number> = {};
    const fresh: Record<string, number> = { '1h': 0, '24h': 0 };
    const lastGenerated: Record<string, string> = {};
    for (let i = 0; i < s.coldSamples; i++) {
      const round = performance.now();
      for (const w of windows) {
        const r = await timed(url, `/api/stats?window=${w}`);
        coldMs[w].push(r.ms);
        coldStatus[w].set(r.status, (coldStatus[w].get(r.status) ?? 0) + 1);
        coldBytes[w] = r.body.length;
        try {
          const g = (JSON.parse(r.body.toString('utf8')) as { generatedAt?: string }).generatedAt ?? '';
          if (g && g !== lastGenerated[w]) fresh[w]++;
          lastGenerated[w] = g;
        } catch {
          /* not JSON: counted by its status */
        }
      }
      await sleep(Math.max(0, 2200 - (performance.now() - round)));
    }
    const cold: Record<string, Latency> = {};
    for (const w of windows) cold[w] = summarize(coldMs[w], coldBytes[w], coldStatus[w], fresh[w]);
    log(
      `  cold /api/stats: ${windows.map((w) => `${w} p50 ${cold[w].p50.toFixed(1)} p99 ${cold[w].p99.toFixed(1)} max ${cold[w].max.toFixed(1)} ms (${cold[w].fresh}/${cold[w].n} fresh)`).join('; ')}`,
    );

    const cached: Record<string, LoadRun> = {};
    for (const w of windows) {
      cached[w] = await runLoad(url, documentSpec(`/api/stats?window=${w}`, {}, 200), { connections: 16, duration: s.loadSeconds });
      log(
        `  cached /api/stats?window=${w}: ${Math.round(cached[w].rps)} req/s, p50 ${cached[w].p50} p99 ${cached[w].p99} ms, ${cached[w].bad + cached[w].errors + cached[w].timeouts} failed`,
      );
    }

    // "Did my ping arrive?".
    const base = '/weblog';
    const hotPath = `${base}?url=${encodeURIComponent(HOT_WEBLOG)}`;
    const hot = await sequential(url, hotPath, 100);
    const typical = await sequential(url, `${base}?url=${encodeURIComponent(TYPICAL_WEBLOG)}`, 50);
    const wload = await runLoad(url, documentSpec(hotPath, {}, 200), { connections: 16, duration: s.loadSeconds });
    log(
      `  ${base} (hot weblog, ${fill.hotPings} pings): p50 ${hot.p50.toFixed(1)} p99 ${hot.p99.toFixed(1)} ms (${hot.statuses}); 16 connections ${Math.round(wload.rps)} req/s p99 ${wload.p99} ms`,
    );

    // The other pages of the web face, when they exist (one at a time).
    const pages: Record<string, Latency> = {};
    for (const path of ['/', '/status']) {
      const probe = await timed(url, path);
      if (probe.status === 200 && probe.body.length > 0) pages[path] = await sequential(url, path, 50);
    }

    // The dashboard's first load on the big database (its first /api/stats answer may be a cold one).
    let dashboard: StatsResult['dashboard'];
    if (existsSync(CHROMIUM)) {
      await sleep(2200);
      const browser = await launchBrowser();
      try {
        const d = await openDashboard(browser, url);
        dashboard = { loadMs: d.loadMs, firstStatsMs: d.firstStatsMs, consoleErrors: d.consoleErrors };
        await d.close();
      } finally {
        await browser.close();
      }
    }

    const mem = memory(pingd.proc.pid!);
    const code = await pingd.stop();
    pingd = undefined;
    if (code !== 0) log(`  pingd exited with ${code}`);
    return {
      pings,
      fill,
      cold,
      cached,
      weblogPath: base,
      weblog: { hot, typical, load: wload },
      pages,
      dashboard,
      pingd: { ...mem, afterStart },
      seconds: (performance.now() - t0) / 1000,
    };
  } catch (err) {
    throw withPingdState(err as Error, pingd);
  } finally {
    await pingd?.stop();
    await db.drop();
  }
}

/** A failure with what pingd said: it may be the reason (a crash shows as a refused connection). */
function withPingdState(err: Error, pingd: Child | undefined): Error {
  if (!pingd) return err;
  const said = ((pingd as Child & { stderr?: string }).stderr ?? '').trim().split('\n').slice(-15).join('\n');
  const state =
    pingd.proc.exitCode !== null || pingd.proc.signalCode
      ? `pingd had exited (${pingd.proc.exitCode ?? pingd.proc.signalCode})`
      : 'pingd still running';
  err.message = `${err.message}\n[${state}; its last stderr lines:]\n${said || '(none)'}`;
  return err;
}

// ---------------------------------------------------------------------------------------------------------
// Report.

const f0 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : Math.round(n).toLocaleString('en-US'));
const f1 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : n < 100 ? n.toFixed(1) : f0(n));
const f2 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : n.toFixed(2));
const kb = (b: number) => (b < 1024 ? `${b} B` : `${(b / 1024).toFixed(1)} KiB`);

interface BackendResult {
  backend: string;
  intake?: IntakeResult;
  stats?: StatsResult;
  errors: string[];
}

function intakeTable(all: BackendResult[]): string[] {
  const rows = all.filter((a) => a.intake);
  if (!rows.length) return [];
  const out = [
    "| backend | open during the run | pings/s | p50 / p99 ms | ratio to nothing open (min–max) | pingd CPU µs/ping | browser CPU, cores | /api/stats requests per run | stream events per run: read by pingd / received by the page (slow disconnects) | page's timer lag p50 / max, and its answer delay after the run, ms, per run |",
    '| --- | --- | ---: | --- | --- | ---: | ---: | --- | --- | --- |',
  ];
  const m = (xs: IntakeRun[], k: (x: IntakeRun) => number) => median(xs.map(k));
  const ratio = (xs: number[]) => `**${f2(median(xs))}** (${f2(Math.min(...xs))}–${f2(Math.max(...xs))})`;
  const slow = (xs: IntakeRun[]) => xs.reduce((a, x) => a + (x.slowDisconnects ?? 0), 0);
  for (const { backend, intake: r } of rows) {
    const base = (xs: IntakeRun[]) => `**${f0(m(xs, (x) => x.load.rps))}** | ${m(xs, (x) => x.load.p50)} / ${m(xs, (x) => x.load.p99)}`;
    out.push(`| ${backend} | nothing | ${base(r!.without)} | 1 | ${f0(m(r!.without, (x) => x.pingdUs))} | – | – | – | – |`);
    out.push(
      `| ${backend} | /status in headless Chromium, on the same 2 cores | ${base(r!.with)} | ${ratio(r!.ratios)} | ${f0(m(r!.with, (x) => x.pingdUs))} | ${f2(m(r!.with, (x) => x.browserCores ?? NaN))} | ` +
        `${r!.with.map((x) => x.statsRequests ?? '–').join(', ')} | ${r!.with.map((x) => `${f0(x.streamEvents)} / ${f0(x.pageEvents)}`).join(', ')} (${slow(r!.with)}) | ${r!.with.map((x) => `${f0(x.lagP50)} / ${f0(x.lagMax)}, ${f0(x.behindMs)}`).join('; ')} |`,
    );
    out.push(
      `| ${backend} | the page's traffic, no browser: /stream read by a Node process, /api/stats polled on the page's schedule | ${base(r!.reader)} | ${ratio(r!.readerRatios)} | ${f0(m(r!.reader, (x) => x.pingdUs))} | – | ` +
        `${r!.reader.map((x) => x.statsRequests ?? '–').join(', ')} | ${r!.reader.map((x) => f0(x.streamEvents)).join(', ')} (${slow(r!.reader)}) | – |`,
    );
  }
  return out;
}

function statsTable(all: BackendResult[]): string[] {
  const rows = all.filter((a) => a.stats);
  if (!rows.length) return [];
  const out = [
    '| backend | pings in the log | request | answer | cold (cache expired): p50 / p99 / max ms (fresh/samples) | cached, 16 connections 5 s: req/s, p50 / p99 ms |',
    '| --- | --- | --- | --- | --- | --- |',
  ];
  for (const { backend, stats: r } of rows) {
    for (const w of ['1h', '24h']) {
      const c = r!.cold[w];
      const l = r!.cached[w];
      out.push(
        `| ${backend} | ${f0(r!.pings)} | \`/api/stats?window=${w}\` | ${kb(c.bytes)} | **${f1(c.p50)}** / ${f1(c.p99)} / ${f1(c.max)} (${c.fresh}/${c.n}${c.statuses !== `${c.n}×200` ? `; ${c.statuses}` : ''}) | **${f0(l.rps)}**, ${l.p50} / ${l.p99}${l.bad + l.errors + l.timeouts ? ` (${l.bad + l.errors + l.timeouts} failed)` : ''} |`,
      );
    }
    const w = r!.weblog;
    out.push(
      `| ${backend} | ${f0(r!.pings)} | \`${r!.weblogPath}?url=\` a weblog with ${f0(r!.fill.hotPings)} pings | ${kb(w.hot.bytes)} | one at a time: **${f1(w.hot.p50)}** / ${f1(w.hot.p99)} / ${f1(w.hot.max)} (${w.hot.n}; ${w.hot.statuses}) | **${f0(w.load.rps)}**, ${w.load.p50} / ${w.load.p99} |`,
    );
    out.push(
      `| ${backend} | ${f0(r!.pings)} | \`${r!.weblogPath}?url=\` a weblog with ~${f0(r!.pings / r!.fill.weblogs)} pings | ${kb(w.typical.bytes)} | one at a time: **${f1(w.typical.p50)}** / ${f1(w.typical.p99)} / ${f1(w.typical.max)} (${w.typical.n}; ${w.typical.statuses}) | – |`,
    );
    for (const [path, p] of Object.entries(r!.pages))
      out.push(
        `| ${backend} | ${f0(r!.pings)} | \`GET ${path}\` | ${kb(p.bytes)} | one at a time: **${f1(p.p50)}** / ${f1(p.p99)} / ${f1(p.max)} (${p.n}) | – |`,
      );
  }
  return out;
}

function memoryTable(all: BackendResult[]): string[] {
  const out = [
    '| backend | pingd RSS MB after the intake runs (peak) | pingd RSS MB with the 1M-ping database: after start → at the end (peak) | Chromium RSS MB, all processes, /status open | wall time s: intake, stats (fill) |',
    '| --- | --- | --- | --- | --- |',
  ];
  for (const { backend, intake, stats } of all) {
    out.push(
      `| ${backend} | ${intake ? `**${f0(intake.pingd.rss)}** (${f0(intake.pingd.peak)})` : '–'} | ${stats ? `${f0(stats.pingd.afterStart)} → **${f0(stats.pingd.rss)}** (${f0(stats.pingd.peak)})` : '–'} | ${intake ? f0(median(intake.browserRssMb)) : '–'} | ${f0(intake?.seconds)}, ${f0(stats?.seconds)} (${f0(stats?.fill.seconds)}) |`,
    );
  }
  return out;
}

function notes(all: BackendResult[]): string[] {
  const out: string[] = [];
  for (const { backend, intake, stats, errors } of all) {
    for (const e of errors) out.push(`- ${backend}: **failed**: ${e}`);
    if (intake) {
      const runs = (xs: IntakeRun[]) => xs.map((x) => `${f0(x.load.rps)} (p99 ${x.load.p99})`).join(', ');
      out.push(
        `- ${backend}, pings/s per round: nothing open ${runs(intake.without)}; /status open ${runs(intake.with)}; stream reader and polls ${runs(intake.reader)}.`,
      );
      out.push(
        `- ${backend}, pingd /status: load event ${intake.loadMs.map((x) => f0(x)).join(', ')} ms after navigation, first /api/stats answer ${intake.firstStatsMs.map((x) => f0(x)).join(', ')} ms (on the empty database, one per with-run); ` +
          `${intake.statsFailures} /api/stats answers other than 200; ${intake.streamRequests} /stream request(s) per page load; console errors: ${intake.consoleErrors.length ? intake.consoleErrors.map((e) => `\`${e.replace(/`/g, "'")}\``).join('; ') : 'none'}.`,
      );
    }
    if (stats) {
      const steps = Object.entries(stats.fill.steps)
        .filter(([, v]) => v >= 0.1)
        .map(([k, v]) => `${k} ${v.toFixed(1)} s`)
        .join(', ');
      out.push(
        `- ${backend}: fill of ${f0(stats.fill.pings)} pings, ${f0(stats.fill.weblogs)} weblogs, ${f0(stats.fill.statsMinutes)} stats_minutes and ${f0(stats.fill.statsHosts)} stats_minute_hosts rows in ${f1(stats.fill.seconds)} s (${steps}).`,
      );
      if (stats.dashboard) {
        out.push(
          `- ${backend}, pingd /status on the 1M-ping database: load event ${f0(stats.dashboard.loadMs)} ms, first /api/stats answer ${f0(stats.dashboard.firstStatsMs)} ms; console errors: ${stats.dashboard.consoleErrors.length ? stats.dashboard.consoleErrors.map((e) => `\`${e.replace(/`/g, "'")}\``).join('; ') : 'none'}.`,
        );
      }
    }
  }
  return out;
}

function method(s: Settings): string {
  return [
    '**How measured.** pingd (`pingd serve`, a child process, LOG_LEVEL=warn, VERIFY_PINGS=off, RENDER_SCHEDULER=false, otherwise defaults plus any BENCH_PINGD_<VAR>) on a fresh database per part and backend; the load generator is autocannon in the bench process (bench/lib/load.ts), on the same 2 cores as pingd, PostgreSQL and Chromium.',
    '',
    `(1) **Intake**: XML-RPC \`weblogUpdates.ping\` as WordPress sends it, a new weblog (and host) on every ping, so every answer is a durable commit and PING_HOST_BUDGET never refuses (as the \`ping\` scenario), ${s.connections} connections. Warm-up, then ${s.runs} rounds of three runs of ${s.seconds} s, the order rotating each round: nothing open; /status open in Chromium; the page's traffic without a browser (one /stream connection read by a Node process of its own, bench/lib/stream-clients.ts, and /api/stats?window=1h every 5 s and 24h every 30 s from the bench process, as status.js polls). Medians; ratio = median of the per-round ratios of pings/s to the "nothing open" run. ` +
      'For a "/status open" run, Chromium (Debian\'s `/usr/bin/chromium`, headless, through playwright-core, `--no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking --disable-component-update --disable-sync`) is started, the page is loaded and its first /api/stats answer awaited, 1 s passes, then the run starts with the page open (it polls and streams by itself); Chromium is closed after the run, so "no browser" runs have none. ' +
      'Stream events = `pingd_stream_events_read_total` over the run (one consumer: the page), slow disconnects = `pingd_stream_disconnects_total{reason="slow"}`. Browser CPU = utime+stime of the Chromium processes over the run. ' +
      'A probe script added before the page\'s own (Playwright addInitScript) counts the /api/stats fetches the page starts and the stream events its listeners receive, and samples its main thread\'s lag (how late a 100 ms interval fires); "answer delay" = how long a page.evaluate sent right after the run took to come back: the event backlog the page was still working through.',
    '',
    `(2) **A day in the log**: \`pingd migrate\`, then SQL with generate_series (bench/lib/web-fill.ts) writes the weblogs and pings (received_at evenly over the last 24 hours in id order; weblog 1 gets every 50th ping, the others share the rest round robin; FK triggers off during the fill), each weblog's first/last ping and count (and the running total, ping_totals), the sequences past the ids, \`stats_minutes\` (accepted per minute counted from the pings, so they sum to the log; refused:* and verification:* rows varying by minute) and 20 \`stats_minute_hosts\` rows per minute from a pool of 200 hosts, then ANALYZE (as autovacuum would; PGlite has none). pingd then starts on it. ` +
      `Cold: one untimed request per window, then ${s.coldSamples} rounds of \`?window=1h\` then \`?window=24h\`, rounds 2.2 s apart so that each answer is past the 2 s in-process cache; "fresh" counts answers whose generatedAt changed (computed, not cached); latency = request to last byte on a keep-alive connection. ` +
      `Cached: autocannon, 16 connections, ${s.loadSeconds} s, the same URL (all but one answer per 2 s come from the cache). "Did my ping arrive?": 5 untimed then 100 (hot weblog) / 50 (typical weblog) requests one at a time, and 16 connections for ${s.loadSeconds} s on the hot one. ` +
      'The dashboard row: Chromium opening /status on this database, load event and first /api/stats answer.',
    '',
    "(3) **Memory**: VmRSS (and VmHWM, the peak) of pingd from /proc just before it is stopped; Chromium's is the sum of its processes' VmRSS at the end of a run.",
  ].join('\n');
}

export async function runWeb(opts: WebOptions): Promise<boolean> {
  const s = settings();
  const started = new Date();
  const load0 = loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
  // Which code was measured: the working tree is shared, and pingd is started from it for every part.
  const commit = git(PINGD_ROOT, ['rev-parse', '--short', 'HEAD']);
  const dirty = git(PINGD_ROOT, ['status', '--porcelain', '--', 'src', 'migrations']);
  const measured = `${PINGD_ROOT === ROOT ? 'this checkout' : PINGD_ROOT} at ${commit || 'an unknown commit'} (${git(PINGD_ROOT, ['log', '-1', '--format=%s']).slice(0, 100)})${
    dirty
      ? `, with uncommitted changes in ${dirty
          .split('\n')
          .map((l) => l.slice(3))
          .join(', ')}`
      : ''
  }`;
  log(`web: pingd of ${measured}`);
  const all: BackendResult[] = [];
  const browserOk = existsSync(CHROMIUM);
  if (!browserOk) log(`web: ${CHROMIUM} does not exist (apt-get install chromium, or BENCH_CHROMIUM=…): the intake part is skipped`);
  for (const backend of opts.backends) {
    const r: BackendResult = { backend, errors: [] };
    if (s.parts.includes('intake') && browserOk) {
      try {
        r.intake = await intakePart(backend, s, opts.databaseUrl);
        log(`  pingd RSS after the intake runs: ${f0(r.intake.pingd.rss)} MB (peak ${f0(r.intake.pingd.peak)} MB)`);
      } catch (err) {
        log(`  intake part failed: ${(err as Error).stack ?? err}`);
        r.errors.push(`intake: ${(err as Error).message.split('\n')[0].slice(0, 200)}`);
      }
    }
    if (s.parts.includes('stats')) {
      try {
        r.stats = await statsPart(backend, s, opts.databaseUrl);
        log(`  pingd RSS at the end of the stats runs: ${f0(r.stats.pingd.rss)} MB (peak ${f0(r.stats.pingd.peak)} MB)`);
      } catch (err) {
        log(`  stats part failed: ${(err as Error).stack ?? err}`);
        r.errors.push(`stats: ${(err as Error).message.split('\n')[0].slice(0, 200)}`);
      }
    }
    all.push(r);
  }
  const cpu = cpus();
  const md = [
    `### Web face benchmark ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `pingd: ${measured}. Machine: ${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}; load average at start ${load0}, at end ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}. Wall time ${Math.round((Date.now() - started.getTime()) / 1000)} s.`,
    '',
    ...intakeTable(all),
    '',
    ...statsTable(all),
    '',
    ...memoryTable(all),
    '',
    ...notes(all),
    '',
    method(s),
    '',
  ].join('\n');
  console.log(md);
  if (opts.write) {
    log(
      `results written to ${recordRun({ scenario: 'web', title: 'The web pages under load', started, markdown: md, backends: opts.backends }).join(', ')}`,
    );
  }
  return all.every((r) => r.errors.length === 0);
}

// Run directly: node --import tsx bench/web.ts [--write]
if (isMain(import.meta.url)) runDirect('web', runWeb);
