// Owns the `wrk` scenario of `npm run bench`: the issue's HTTP ratios measured with wrk (C, one thread, so
// the load generator takes far less of the 2 shared cores than autocannon does), per backend:
//   304        GET /shortChanges.xml with If-None-Match of the current rendering and Accept-Encoding: gzip,
//              against the baseline answering the same 304 head (validators, Cache-Control, Vary, Link);
//   200-gzip   the full gzip document (BENCH_SHORT_WEBLOGS weblogs in it) against the baseline sending the
//              same bytes;
//   ping       durable XML-RPC weblogUpdates.ping, a new weblog (on a host of its own) per request, against
//              the baseline's fixed XML-RPC reply.
// pingd and the baseline alternate (warm-up each, then BENCH_RUNS pairs, the order swapped every pair);
// medians, ratio = median of the per-pair ratios. Each case waits for pingd to be idle first (lib/cpu.ts's waitIdle). The
// document is rendered beforehand by another pingd
// process on the same database; then every case is measured with pingd as deployed (renderer on its
// schedule, verification on, the pings naming weblogs on loopback weblog hosts) and with the renderer and
// verification stopped (BENCH_WRK_CONFIGS, both by default), so the cost of what runs beside the requests
// shows. With BENCH_PROFILE=1, pingd and the baseline are then profiled
// (node --cpu-prof) under wrk, one case at a time (BENCH_WRK_PROFILE_CASES), and the
// profiles summarised: µs per request by module and by the nearest pingd source file on the stack.
// About 2½ minutes per backend with 4 s runs (plus ~30 s to compile pingd, and ~1½ minutes per backend to
// profile); not in the default set (it installs a Debian package when wrk is missing): only when named.
//
//   BENCH_SCENARIOS=wrk npm run bench [-- --write]        (or: node --import tsx bench/wrk.ts [--write])
//   node --import tsx bench/wrk.ts --analyse DIR_PINGD [DIR_BASELINE]   (re-reads a profiled run's window.json)
//
// Environment: BENCH_BACKENDS, BENCH_DATABASE_URL, BENCH_DURATION (s per run, 4), BENCH_RUNS (3),
// BENCH_WARMUP (s, 3), BENCH_CONNECTIONS (64), BENCH_WRK_THREADS (1), BENCH_WRK_CASES (304,200-gzip,ping),
// BENCH_SHORT_WEBLOGS (5000), BENCH_WRK_CONFIGS (deployed,stopped), BENCH_PROFILE=1, BENCH_WRK_PROFILE_CASES (304,200-gzip,ping), BENCH_WRK_PROFILE_SECONDS
// (10), BENCH_WRK_PINGD (compiled: tsc's output run by node, as the image runs it, the default; tsx: src/ under
// tsx as the other scenarios run it, which adds esbuild's helpers, __name among them, to every closure made per
// request), BENCH_PINGD_<VAR> (passed to pingd as <VAR>).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpus, loadavg, totalmem } from 'node:os';
import { execFileSync } from 'node:child_process';
import { gunzipSync } from 'node:zlib';
import { envNumber } from './lib/env.js';
import {
  ROOT,
  PINGD_ROOT,
  startBaseline,
  setBaselineAnswer,
  createPostgresDatabase,
  createPgliteDatabase,
  type Child,
  type BenchDatabase,
} from './lib/servers.js';
import { runLoad, median } from './lib/load.js';
import { pingSpec, documentSpec, sample } from './lib/scenarios.js';
import { snapshot, diff, waitIdle, IDLE_SHARE, IDLE_WINDOW_MS } from './lib/cpu.js';
import { recordRun } from './lib/results.js';
import { ensureWrk, fixedScript, pingScript, runWrk, scriptFile, type WrkRun } from './lib/wrk.js';
import { window, normalise, latestProfile, threadProfiles, workerLines, monoUs, profileText, analyse } from './lib/cpu-profile.js';
import { startProfiledBaseline, tsxLauncher, compiledLauncher, type Launcher } from './lib/launcher.js';
import { git } from './lib/git.js';
import { isMain, runDirect } from './lib/run-direct.js';
import { spreadWeblogHosts, type SpreadHosts } from './lib/feed-hosts.js';

const env = process.env;
const num = (name: string, def: number) => envNumber(name, def);
const log = (s: string) => process.stderr.write(`${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface WrkBenchOptions {
  databaseUrl: string;
  backends: ('postgres' | 'pglite')[];
  write: boolean;
}

type CaseId = '304' | '200-gzip' | 'ping';

function settings() {
  return {
    duration: num('BENCH_DURATION', 4),
    runs: Math.round(num('BENCH_RUNS', 3)),
    // Longer than the other scenarios' 2 s: compiled pingd starts cold, and a 304 is cheap enough that JIT warm-up shows.
    warmup: num('BENCH_WARMUP', 3),
    connections: Math.round(num('BENCH_CONNECTIONS', 64)),
    threads: Math.round(num('BENCH_WRK_THREADS', 1)),
    weblogs: Math.round(num('BENCH_SHORT_WEBLOGS', 5000)),
    cases: (env.BENCH_WRK_CASES || '304,200-gzip,ping').split(',').map((s) => s.trim()) as CaseId[],
    profile: env.BENCH_PROFILE === '1',
    profileCases: (env.BENCH_WRK_PROFILE_CASES || '304,200-gzip,ping').split(',').map((s) => s.trim()) as CaseId[],
    profileSeconds: num('BENCH_WRK_PROFILE_SECONDS', 10),
    pingd: (env.BENCH_WRK_PINGD || 'compiled') as 'compiled' | 'tsx',
    // As deployed first: the renderer then renders an hour holding this configuration's pings only. After the
    // stopped configuration's ping run (~120,000 new weblogs in the hour, nothing rendered meanwhile) the
    // renderer's catching up cost PostgreSQL 287 µs a ping, and intake fell to 20.7% (34.7% alone); what a
    // render costs as the hour grows is bench/render-tick.ts's to measure.
    configs: (env.BENCH_WRK_CONFIGS || 'deployed,stopped').split(',').map((x) => x.trim()) as ConfigId[],
  };
}
type Settings = ReturnType<typeof settings>;

type ConfigId = 'deployed' | 'stopped';
/**
 * How pingd runs while measured. As deployed: the renderer on its default schedule and verification on (the
 * pinged weblogs are on loopback weblog hosts, FETCH_ALLOW_PRIVATE=true lets verification reach them, and
 * nothing else differs from the defaults). Stopped: neither runs, so the 304's ETag stays the current one
 * and nothing but the measured requests costs CPU.
 */
const CONFIGS: Record<ConfigId, { label: string; env: Record<string, string> }> = {
  deployed: { label: 'as deployed', env: { VERIFY_PINGS: 'mark', FETCH_ALLOW_PRIVATE: 'true' } },
  stopped: { label: 'renderer and verification stopped', env: { RENDER_SCHEDULER: 'false' } },
};

/** The issue's targets ("Polling and intake at the stack's speed"). */
function target(id: CaseId, backend: 'postgres' | 'pglite'): { ratio: number; p99?: number } {
  if (id === '304') return { ratio: 0.85 };
  if (id === '200-gzip') return { ratio: 0.6 };
  return backend === 'postgres' ? { ratio: 0.35, p99: 50 } : { ratio: 0.15, p99: 100 };
}

/** pingd's environment: the scenario's settings, then every BENCH_PINGD_<VAR> (except ROOT), then the database. */
function pingdEnv(extra: Record<string, string>, db: BenchDatabase): Record<string, string> {
  const out: Record<string, string> = { LOG_LEVEL: 'warn', ...extra };
  for (const [k, v] of Object.entries(env))
    if (k.startsWith('BENCH_PINGD_') && k !== 'BENCH_PINGD_ROOT' && v !== undefined) out[k.slice(12)] = v;
  return { ...out, ...db.env };
}

const PATH = '/shortChanges.xml';
/** The loopback weblog hosts pingd as deployed verifies the pinged weblogs on (started by runWrkBench). */
let feedHosts: SpreadHosts | undefined;
// Headers the baseline copies from pingd's answer, so that both send the same head (pingd's own X-Request-Id
// and Date aside) and the same body.
const COPIED = ['content-type', 'content-encoding', 'etag', 'last-modified', 'cache-control', 'im', 'vary', 'link'];

/** Waits until PATH is rendered holding at least `entries` weblogs; returns its ETag (gzip). */
async function waitRendered(url: string, entries: number, timeoutMs = 60_000): Promise<string> {
  const until = Date.now() + timeoutMs;
  let last: string;
  for (;;) {
    const s = await sample(url, documentSpec(PATH, { 'accept-encoding': 'gzip' }, 200));
    if (s.status === 200 && s.headers.etag) {
      const n = gunzipSync(s.body).toString('utf8').split('<weblog ').length - 1;
      if (n >= entries) return s.headers.etag;
      last = `${n} entries`;
    } else last = `status ${s.status}`;
    if (Date.now() > until) throw new Error(`${PATH} did not hold ${entries} weblogs within ${timeoutMs} ms (last: ${last})`);
    await sleep(250);
  }
}

/**
 * PATH's ETag once no rendering changes it: the same for 12 s, longer than the default render period (10 s),
 * so that a pingd as deployed has rendered what the database holds and 304s stay 304s while measured.
 */
async function settledEtag(url: string, timeoutMs = 90_000): Promise<string> {
  const until = Date.now() + timeoutMs;
  let etag = '';
  let since = Date.now();
  for (;;) {
    const s = await sample(url, documentSpec(PATH, { 'accept-encoding': 'gzip' }, 200));
    if (s.status !== 200 || !s.headers.etag) throw new Error(`${PATH} answered ${s.status} without an ETag`);
    if (s.headers.etag !== etag) {
      etag = s.headers.etag;
      since = Date.now();
    } else if (Date.now() - since >= 12_000) return etag;
    if (Date.now() > until) throw new Error(`${PATH} was still re-rendered with new ETags after ${timeoutMs} ms`);
    await sleep(1000);
  }
}

interface Pair {
  t: WrkRun;
  b: WrkRun;
  pingdUs: number;
  dbUs: number;
  baselineUs: number;
}

export interface WrkRow {
  id: CaseId;
  backend: 'postgres' | 'pglite';
  /** How pingd ran: as deployed, or with the renderer and verification stopped. */
  config?: string;
  label: string;
  rps: number;
  p50: number;
  p99: number;
  baselineRps: number;
  baselineP50: number;
  baselineP99: number;
  ratio: number;
  ratioMin: number;
  ratioMax: number;
  pingdUs: number;
  dbUs: number;
  baselineUs: number;
  bytes: number;
  baselineBytes: number;
  /** wrk's CPU per request (µs), against pingd and against the baseline. */
  loadgenUs: number;
  baselineLoadgenUs: number;
  failures: number;
  target: string;
  pass: boolean;
  runs: string;
  note?: string;
}

interface CaseDef {
  id: CaseId;
  label: string;
  /** wrk script (Lua) and, per run, its arguments. */
  lua: string;
  args?: (run: string) => string[];
  /** Sets the baseline's answer from a sample of pingd's. */
  prime(pingd: Child, baseline: Child): Promise<string>;
}

async function primeFrom(
  pingd: Child,
  baseline: Child,
  spec: Parameters<typeof sample>[1],
  expect: number,
): Promise<{ body: Buffer; headers: Record<string, string> }> {
  const s = await sample(pingd.url, spec);
  if (s.status !== expect) throw new Error(`pingd answered ${s.status} to ${spec.method} ${spec.path}, expected ${expect}`);
  const headers: Record<string, string> = {};
  for (const h of COPIED) if (s.headers[h]) headers[h] = s.headers[h];
  await setBaselineAnswer(baseline, s.status, headers, s.body);
  return s;
}

function cases(etag: string, tag: string, hostsPort?: number): CaseDef[] {
  const gzip = { 'Accept-Encoding': 'gzip', 'User-Agent': 'bench-poller/1.0' };
  return [
    {
      id: '304',
      label: `GET ${PATH} 304 (If-None-Match current, gzip)`,
      lua: fixedScript({ method: 'GET', path: PATH, headers: { ...gzip, 'If-None-Match': etag } }),
      async prime(pingd, baseline) {
        await primeFrom(
          pingd,
          baseline,
          documentSpec(PATH, { 'accept-encoding': 'gzip', 'if-none-match': etag, 'user-agent': 'bench-poller/1.0' }, 304),
          304,
        );
        return '';
      },
    },
    {
      id: '200-gzip',
      label: `GET ${PATH} 200 gzip`,
      lua: fixedScript({ method: 'GET', path: PATH, headers: gzip }),
      async prime(pingd, baseline) {
        const s = await primeFrom(
          pingd,
          baseline,
          documentSpec(PATH, { 'accept-encoding': 'gzip', 'user-agent': 'bench-poller/1.0' }, 200),
          200,
        );
        return `${(s.body.length / 1024).toFixed(1)} KB gzip`;
      },
    },
    {
      id: 'ping',
      label: 'XML-RPC weblogUpdates.ping, a new weblog per request (durable)',
      lua: pingScript(hostsPort),
      // A tag per run and per server: no weblog is pinged twice (the throttle would refuse it).
      args: (run) => [`${tag}${run}`],
      async prime(pingd, baseline) {
        await primeFrom(pingd, baseline, pingSpec(), 200);
        return '';
      },
    },
  ];
}

/** Accepted and refused pings so far, from pingd's /metrics (pingd_pings_total by outcome). */
async function pingOutcomes(
  url: string,
): Promise<{ accepted: number; refused: number; batches: number; batchPings: number; commitSec: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let accepted = 0;
  let refused = 0;
  for (const m of text.matchAll(/^pingd_pings_total\{([^}]*)\} (\S+)$/gm)) {
    if (/outcome="accepted"/.test(m[1])) accepted += Number(m[2]);
    else refused += Number(m[2]);
  }
  const one = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
  return {
    accepted,
    refused,
    batches: one(/^pingd_commit_batch_size_count (\S+)$/m),
    batchPings: one(/^pingd_commit_batch_size_sum (\S+)$/m),
    commitSec: [...text.matchAll(/^pingd_commit_duration_seconds_sum(?:\{[^}]*\})? (\S+)$/gm)].reduce((a, m) => a + Number(m[1]), 0),
  };
}

async function measureCase(
  c: CaseDef,
  backend: 'postgres' | 'pglite',
  pingd: Child,
  baseline: Child,
  db: BenchDatabase,
  s: Settings,
): Promise<{ row: WrkRow; completed: number }> {
  const note = await c.prime(pingd, baseline);
  const sf = scriptFile(c.lua);
  try {
    let completed = 0;
    const wrk = (url: string, seconds: number, run: string) =>
      runWrk(url, { script: sf.path, connections: s.connections, threads: s.threads, seconds, timeoutSec: 10, args: c.args?.(run) });
    const w1 = await wrk(baseline.url, s.warmup, 'wb');
    const w2 = await wrk(pingd.url, s.warmup, 'wp');
    completed += w2.requests;
    log(`  ${c.id}/${backend} warm-up: pingd ${Math.round(w2.rps)} req/s, baseline ${Math.round(w1.rps)} req/s`);
    const pairs: Pair[] = [];
    for (let i = 0; i < s.runs; i++) {
      const runPingd = async () => {
        const c0 = await snapshot(pingd.proc.pid!, () => db.backendPids());
        const r = await wrk(pingd.url, s.duration, `p${i}`);
        const d = diff(c0, await snapshot(pingd.proc.pid!, () => db.backendPids()));
        completed += r.requests;
        return { r, us: d.serverUs / r.requests, dbUs: d.dbUs / r.requests };
      };
      const runBaseline = async () => {
        const c0 = await snapshot(baseline.proc.pid!, () => Promise.resolve([]));
        const r = await wrk(baseline.url, s.duration, `b${i}`);
        const d = diff(c0, await snapshot(baseline.proc.pid!, () => Promise.resolve([])));
        return { r, us: d.serverUs / r.requests };
      };
      let t;
      let b;
      if (i % 2 === 0) {
        t = await runPingd();
        b = await runBaseline();
      } else {
        b = await runBaseline();
        t = await runPingd();
      }
      pairs.push({ t: t.r, b: b.r, pingdUs: t.us, dbUs: t.dbUs, baselineUs: b.us });
      log(
        `  ${c.id}/${backend} run ${i + 1}: pingd ${Math.round(t.r.rps)} req/s (p50 ${t.r.p50.toFixed(1)}, p99 ${t.r.p99.toFixed(1)} ms), baseline ${Math.round(b.r.rps)} req/s (p99 ${b.r.p99.toFixed(1)} ms), ratio ${(t.r.rps / b.r.rps).toFixed(3)}`,
      );
    }
    const ratios = pairs.map((p) => p.t.rps / p.b.rps);
    const tg = target(c.id, backend);
    const row: WrkRow = {
      id: c.id,
      backend,
      label: c.label,
      rps: median(pairs.map((p) => p.t.rps)),
      p50: median(pairs.map((p) => p.t.p50)),
      p99: median(pairs.map((p) => p.t.p99)),
      baselineRps: median(pairs.map((p) => p.b.rps)),
      baselineP50: median(pairs.map((p) => p.b.p50)),
      baselineP99: median(pairs.map((p) => p.b.p99)),
      ratio: median(ratios),
      ratioMin: Math.min(...ratios),
      ratioMax: Math.max(...ratios),
      pingdUs: median(pairs.map((p) => p.pingdUs)),
      dbUs: median(pairs.map((p) => p.dbUs)),
      baselineUs: median(pairs.map((p) => p.baselineUs)),
      bytes: median(pairs.map((p) => p.t.bytesPerReq)),
      loadgenUs: median(pairs.map((p) => p.t.loadgenUs)),
      baselineLoadgenUs: median(pairs.map((p) => p.b.loadgenUs)),
      baselineBytes: median(pairs.map((p) => p.b.bytesPerReq)),
      failures: pairs.reduce((a, p) => a + p.t.errors + p.t.timeouts + p.t.status4xx5xx, 0),
      target: `≥ ${Math.round(tg.ratio * 100)}%${tg.p99 ? `, p99 ≤ ${tg.p99} ms` : ''}`,
      pass: false,
      runs: ratios.map((r) => `${(100 * r).toFixed(0)}%`).join(' '),
      note: note || undefined,
    };
    row.pass = row.ratio >= tg.ratio && (tg.p99 === undefined || row.p99 <= tg.p99);
    return { row, completed };
  } finally {
    sf.dispose();
  }
}

function profileDir(tag: string): string {
  const dir = join(ROOT, 'bench', 'profiles', `${new Date().toISOString().replace(/[:.]/g, '-')}-wrk-${tag}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * Profiles one case: a fresh pingd (same database, in the configuration given) and a fresh baseline, each
 * under --cpu-prof while wrk sends only that case's requests; returns the two summaries.
 */
async function profileCase(
  id: CaseId,
  backend: 'postgres' | 'pglite',
  db: BenchDatabase,
  s: Settings,
  launcher: Launcher,
  config: ConfigId,
): Promise<string> {
  const dirP = profileDir(`${backend}-${config}-${id}-pingd`);
  const dirB = profileDir(`${backend}-${config}-${id}-baseline`);
  let sf: ReturnType<typeof scriptFile> | undefined;
  let pingd: Child | undefined;
  let baseline: Child | undefined;
  try {
    pingd = await launcher.start(pingdEnv(CONFIGS[config].env, db), ['--cpu-prof', `--cpu-prof-dir=${dirP}`]);
    // The current rendering's ETag: as deployed, the renderer has re-rendered since the measured runs' pings.
    const etag = id === 'ping' ? '' : await settledEtag(pingd.url);
    const c = cases(etag, 'p', config === 'deployed' ? feedHosts?.port : undefined).find((x) => x.id === id)!;
    sf = scriptFile(c.lua);
    const script = sf.path;
    baseline = await startProfiledBaseline(dirB);
    await c.prime(pingd, baseline);
    const tag = `q${Date.now().toString(36)}`;
    const go = async (url: string, run: string) => {
      // A short warm-up first (JIT), then the profiled window.
      await runWrk(url, { script, connections: s.connections, threads: s.threads, seconds: 2, args: c.args?.(`${tag}${run}w`) });
      const t0 = monoUs();
      const r = await runWrk(url, {
        script,
        connections: s.connections,
        threads: s.threads,
        seconds: s.profileSeconds,
        args: c.args?.(`${tag}${run}`),
      });
      return { r, t0, t1: monoUs() };
    };
    const tp = await go(pingd.url, 'p');
    const tb = await go(baseline.url, 'b');
    await pingd.stop();
    pingd = undefined;
    await baseline.stop();
    baseline = undefined;
    const threads = threadProfiles(dirP);
    const pp = threads.main;
    const pb = latestProfile(dirB);
    if (!pp) return `(no profile written in ${dirP})`;
    const wp = window(normalise(pp, launcher.dist), tp.t0, tp.t1);
    const wb = pb ? window(normalise(pb, undefined), tb.t0, tb.t1) : undefined;
    const head = `${c.label} on ${backend}, ${CONFIGS[config].label}: pingd ${Math.round(tp.r.rps)} req/s, baseline ${Math.round(tb.r.rps)} req/s under the profiler (${s.profileSeconds} s each${wp.windowed ? ', samples of the timed window only' : ', whole process: startup included'}); profiles in ${dirP} and ${dirB}`;
    // The timed window, frames named by source line, and the request count: `bench/wrk.ts --analyse DIR_PINGD DIR_BASELINE` re-reads them.
    writeFileSync(join(dirP, 'window.json'), JSON.stringify({ requests: tp.r.requests, profile: wp.p }));
    if (wb) writeFileSync(join(dirB, 'window.json'), JSON.stringify({ requests: tb.r.requests, profile: wb.p }));
    const text = profileText(head, { requests: tp.r.requests, profile: wp.p }, wb ? { requests: tb.r.requests, profile: wb.p } : undefined);
    const workers = workerLines(threads.workers, tp.t0, tp.t1, tp.r.requests);
    return workers ? `${text}\n\n${workers}` : text;
  } finally {
    sf?.dispose();
    await pingd?.stop();
    await baseline?.stop();
  }
}

// ---------------------------------------------------------------------------------------------------------

interface BackendResult {
  rows: WrkRow[];
  check: string;
  ok: boolean;
  profiles: string[];
}

async function runBackend(backend: 'postgres' | 'pglite', s: Settings, databaseUrl: string, launcher: Launcher): Promise<BackendResult> {
  const db = backend === 'postgres' ? await createPostgresDatabase(databaseUrl) : await createPgliteDatabase();
  let pingd: Child | undefined;
  let baseline: Child | undefined;
  try {
    // 1. A rendering of shortChanges.xml holding BENCH_SHORT_WEBLOGS weblogs, by a pingd rendering every 2 s.
    const needDoc = s.cases.some((c) => c !== 'ping') || (s.profile && s.profileCases.some((c) => c !== 'ping'));
    if (needDoc) {
      pingd = await launcher.start(pingdEnv({ RENDER_CRON: '*/2 * * * * *' }, db));
      const seeded = await runLoad(pingd.url, pingSpec(), { connections: 64, amount: s.weblogs });
      await waitRendered(pingd.url, seeded.acks);
      log(`${backend}: seeded ${seeded.acks} weblogs into ${PATH}`);
      await pingd.stop();
      pingd = undefined;
    }
    // A fresh database has no pings table before pingd's first start (it migrates): nothing stored yet.
    const storedBefore = needDoc ? await db.countPings() : 0;

    // 2. pingd serving, in each configuration in turn (a fresh process on the same database).
    baseline = await startBaseline();
    const tag = `r${Date.now().toString(36)}`;
    const rows: WrkRow[] = [];
    const profiles: string[] = [];
    let completedPings = 0;
    let intake: Awaited<ReturnType<typeof pingOutcomes>> | undefined;
    for (const config of s.configs) {
      pingd = await launcher.start(pingdEnv(CONFIGS[config].env, db));
      const pid = pingd.proc.pid!;
      let etag = '';
      if (needDoc) {
        etag = await settledEtag(pingd.url);
        log(`${backend}, ${CONFIGS[config].label}: ${PATH} ETag ${etag}`);
      }
      const all = cases(etag, `${tag}${config[0]}`, config === 'deployed' ? feedHosts?.port : undefined);
      for (const c of all.filter((x) => s.cases.includes(x.id))) {
        const idle = await waitIdle(
          () => [pid],
          () => db.backendPids(),
          'pingd',
        );
        if (idle) log(`${backend}, ${CONFIGS[config].label}, ${c.id}: ${idle}`);
        const before = c.id === 'ping' ? await pingOutcomes(pingd.url) : undefined;
        const m = await measureCase(c, backend, pingd, baseline, db, s);
        m.row.config = CONFIGS[config].label;
        if (idle) m.row.note = m.row.note ? `${m.row.note}; ${idle}` : idle;
        if (before) {
          completedPings += m.completed;
          await sleep(1500); // requests wrk cut off at the end of a run still commit
          const after = await pingOutcomes(pingd.url);
          const batches = after.batches - before.batches;
          if (batches > 0)
            m.row.note = `${m.row.note ? `${m.row.note}; ` : ''}batches of ${((after.batchPings - before.batchPings) / batches).toFixed(1)}, ${(((after.commitSec - before.commitSec) / batches) * 1000).toFixed(1)} ms a commit`;
          const accepted = (intake?.accepted ?? 0) + after.accepted - before.accepted;
          const refused = (intake?.refused ?? 0) + after.refused - before.refused;
          intake = { ...after, accepted, refused };
        }
        rows.push(m.row);
      }
      const code = await pingd.stop();
      pingd = undefined;
      if (code !== 0) log(`${backend}: pingd (${CONFIGS[config].label}) exited with ${code}`);
      for (const c of s.profile ? all.filter((x) => s.profileCases.includes(x.id)) : []) {
        log(`${backend}, ${CONFIGS[config].label}: profiling ${c.id}`);
        profiles.push(await profileCase(c.id, backend, db, s, launcher, config));
      }
    }
    await baseline.stop();
    baseline = undefined;

    let check = '';
    let ok = true;
    if (intake) {
      const stored = (await db.countPings()) - storedBefore;
      // Every answer wrk read was a stored ping (stored ≥ answered), every stored ping was accepted and none refused.
      ok = stored >= completedPings && stored === intake.accepted && intake.refused === 0;
      check = `${backend}: ${completedPings.toLocaleString('en-US')} ping answers read by wrk, ${intake.accepted.toLocaleString('en-US')} accepted and ${intake.refused} refused by pingd, ${stored.toLocaleString('en-US')} rows stored ${ok ? '✅' : '❌'}`;
    }

    return { rows, check, ok, profiles };
  } finally {
    await baseline?.stop();
    await pingd?.stop();
    await db.drop();
  }
}

const f0 = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');
const f1 = (n: number) => (!Number.isFinite(n) ? '–' : n < 10 ? n.toFixed(1) : Math.round(n).toString());
const pct = (n: number) => `${(100 * n).toFixed(1)}%`;

export function wrkTable(rows: WrkRow[]): string {
  const out = [
    '| case | backend | pingd req/s | p50 / p99 ms | baseline req/s | baseline p50 / p99 ms | ratio (min–max; runs) | target | CPU µs/req pingd (baseline) | PostgreSQL µs/req | wrk µs/req (baseline) | bytes/answer pingd (baseline) | failures | note |',
    '| --- | --- | ---: | --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const r of rows) {
    out.push(
      `| ${r.id} | ${r.backend}${r.config ? `, ${r.config}` : ''} | ${f0(r.rps)} | ${f1(r.p50)} / **${f1(r.p99)}** | ${f0(r.baselineRps)} | ${f1(r.baselineP50)} / ${f1(r.baselineP99)} | **${pct(r.ratio)}** (${pct(r.ratioMin)}–${pct(r.ratioMax)}; ${r.runs}) | ${r.target} ${r.pass ? '✅ met' : '❌ not met'} | ${f0(r.pingdUs)} (${f0(r.baselineUs)}) | ${r.backend === 'postgres' ? f0(r.dbUs) : '–'} | ${f1(r.loadgenUs)} (${f1(r.baselineLoadgenUs)}) | ${f0(r.bytes)} (${f0(r.baselineBytes)}) | ${r.failures} | ${r.note ?? ''} |`,
    );
  }
  return out.join('\n');
}

export async function runWrkBench(opts: WrkBenchOptions): Promise<boolean> {
  const s = settings();
  ensureWrk(log);
  const wrkVersion = execFileSync('sh', ['-c', 'wrk --version 2>&1 | head -1'], { encoding: 'utf8' }).trim().split(' Copyright')[0];
  const started = new Date();
  const load0 = loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
  const commit = git(PINGD_ROOT, ['rev-parse', '--short', 'HEAD']);
  const dirty = git(PINGD_ROOT, ['status', '--porcelain', '--', 'src']);
  log(
    `wrk scenario: ${wrkVersion}, ${s.threads} thread(s), ${s.connections} connections, warm-up ${s.warmup} s, ${s.runs} runs of ${s.duration} s each (pingd and baseline in turn)`,
  );
  const rows: WrkRow[] = [];
  const checks: string[] = [];
  const profiles: string[] = [];
  let ok = true;
  const launcher = s.pingd === 'tsx' ? tsxLauncher : compiledLauncher(log);
  feedHosts = s.configs.includes('deployed') ? await spreadWeblogHosts() : undefined;
  try {
    for (const backend of opts.backends) {
      try {
        const r = await runBackend(backend, s, opts.databaseUrl, launcher);
        rows.push(...r.rows);
        if (r.check) checks.push(r.check);
        profiles.push(...r.profiles);
        ok &&= r.ok;
      } catch (err) {
        log(`${backend}: failed: ${(err as Error).stack ?? err}`);
        checks.push(`${backend}: failed: ${(err as Error).message.split('\n')[0]}`);
        ok = false;
      }
    }
  } finally {
    launcher.dispose();
    if (feedHosts) log(`weblog hosts served ${feedHosts.served.pages} homepages and ${feedHosts.served.feeds} feeds to verification`);
    await feedHosts?.close();
    feedHosts = undefined;
  }
  const cpu = cpus();
  const md = [
    `### wrk benchmark ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `pingd of ${PINGD_ROOT === ROOT ? 'this checkout' : PINGD_ROOT} at ${commit || '?'}, ${launcher.kind === 'compiled' ? 'compiled by tsc and run as `node dist/cli.js serve` (as the image runs it)' : 'run under tsx from src/'}${dirty ? ` (uncommitted changes in ${dirty.split('\n').length} file(s) under src/)` : ''}. ` +
      `Machine: ${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}; load average at start ${load0}, at end ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}. ` +
      `Load generator: ${wrkVersion}, ${s.threads} thread, ${s.connections} connections, on the same machine. Each case starts once pingd (with its PostgreSQL backends) stayed under ${IDLE_SHARE * 100}% of a core for ${IDLE_WINDOW_MS / 1000} s: as deployed, the earlier cases' pings are rendered, verified and rescored first. Warm-up ${s.warmup} s each, then ${s.runs} runs of ${s.duration} s of pingd and of the baseline in turn (order swapped every pair); medians, ratio = median of the per-pair ratios. ` +
      `${PATH} holds ${s.weblogs.toLocaleString('en-US')} weblogs. Wall time ${Math.round((Date.now() - started.getTime()) / 1000)} s.`,
    '',
    wrkTable(rows),
    '',
    ...(checks.length ? [`Acknowledged vs stored: ${checks.join('; ')}.`, ''] : []),
    ...(profiles.length ? ['#### Profiles', '', ...profiles.flatMap((p) => [p, ''])] : []),
  ].join('\n');
  console.log(md);
  if (opts.write)
    log(
      `results written to ${recordRun({ scenario: 'wrk', title: 'HTTP ratios with wrk', started, markdown: md, backends: opts.backends }).join(', ')}`,
    );
  return ok && rows.length > 0;
}

// Run directly: node --import tsx bench/wrk.ts [--write]
if (isMain(import.meta.url) && process.argv[2] === '--analyse') console.log(analyse(process.argv[3], process.argv[4]));
else if (isMain(import.meta.url)) runDirect('wrk', runWrkBench);
