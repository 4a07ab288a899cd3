// Owns the `wrk` scenario of `npm run bench`: the issue's HTTP ratios measured with wrk (C, one thread, so
// the load generator takes far less of the 2 shared cores than autocannon does), per backend:
//   304        GET /shortChanges.xml with If-None-Match of the current rendering and Accept-Encoding: gzip,
//              against the baseline answering the same 304 head (validators, Cache-Control, Vary, Link);
//   200-gzip   the full gzip document (BENCH_SHORT_WEBLOGS weblogs in it) against the baseline sending the
//              same bytes;
//   ping       durable XML-RPC weblogUpdates.ping, a new weblog (on a host of its own) per request, against
//              the baseline's fixed XML-RPC reply.
// pingd and the baseline alternate (warm-up each, then BENCH_RUNS pairs, the order swapped every pair);
// medians, ratio = median of the per-pair ratios. pingd serves with RENDER_SCHEDULER=false (the document is
// rendered beforehand by another pingd process on the same database), so the 304's ETag stays current and
// nothing but the measured requests runs. With BENCH_PROFILE=1, pingd and the baseline are then profiled
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
// BENCH_SHORT_WEBLOGS (5000), BENCH_PROFILE=1, BENCH_WRK_PROFILE_CASES (304,200-gzip,ping), BENCH_WRK_PROFILE_SECONDS
// (10), BENCH_WRK_PINGD (compiled: tsc's output run by node, as the image runs it, the default; tsx: src/ under
// tsx as the other scenarios run it, which adds esbuild's helpers, __name among them, to every closure made per
// request), BENCH_PINGD_<VAR> (passed to pingd as <VAR>).
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SourceMap, type SourceMapPayload } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cpus, loadavg, totalmem, tmpdir } from 'node:os';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { gunzipSync } from 'node:zlib';
import { envNumber } from './lib/env.js';
import {
  ROOT,
  PINGD_ROOT,
  track,
  startPingd,
  compilePingd,
  startBaseline,
  setBaselineAnswer,
  createPostgresDatabase,
  createPgliteDatabase,
  type Child,
  type BenchDatabase,
} from './lib/servers.js';
import { runLoad, median } from './lib/load.js';
import { pingSpec, documentSpec, sample } from './lib/scenarios.js';
import { snapshot, diff } from './lib/cpu.js';
import { writeResultsFile } from './lib/report.js';
import { ensureWrk, fixedScript, pingScript, runWrk, scriptFile, type WrkRun } from './lib/wrk.js';
import { summarize, moduleOf } from './profile-summary.js';
import { git } from './lib/git.js';
import { isMain, runDirect } from './lib/run-direct.js';

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
  };
}
type Settings = ReturnType<typeof settings>;

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

function cases(etag: string, tag: string): CaseDef[] {
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
      lua: pingScript(),
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

// ---------------------------------------------------------------------------------------------------------
// Profiles

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount: number;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** The profile's samples taken between t0 and t1 (µs, CLOCK_MONOTONIC, V8's clock on Linux); all of them when none fall inside. */
function window(p: Profile, t0: number, t1: number): { p: Profile; windowed: boolean } {
  const samples: number[] = [];
  const deltas: number[] = [];
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    if (t >= t0 && t <= t1) {
      samples.push(p.samples[i]);
      deltas.push(p.timeDeltas[i] ?? 0);
    }
  }
  if (samples.length < 100) return { p, windowed: false };
  return { p: { ...p, samples, timeDeltas: deltas }, windowed: true };
}

/**
 * pingd's frames named by source file and line: `src/<path>.ts` and the original line. Under tsx each file
 * is compiled to one or two long lines, so a profile's positions say nothing until mapped back through the
 * source map tsx keeps with the compiled code in its cache (/tmp/tsx-<uid>/, JSON {code, map}; of several
 * cached versions of a file, the one with the profile's named functions at the profile's positions is taken).
 * Compiled pingd (tsc output under `<dist>/`) has its .js.map beside each file.
 */
function normalise(p: Profile, dist: string | undefined): Profile {
  type Frame = ProfileNode['callFrame'] & { columnNumber?: number };
  const distUrl = dist ? pathToFileURL(dist).href + '/' : undefined;
  const isPingd = (url: string) => url.includes('/src/') || (distUrl !== undefined && url.startsWith(distUrl));
  const tsxDir = join(tmpdir(), `tsx-${process.getuid?.() ?? 0}`);
  let tsx: Map<string, { code: string; map: SourceMapPayload }[]> | undefined;
  const tsxEntries = () => {
    if (tsx) return tsx;
    tsx = new Map();
    try {
      for (const name of readdirSync(tsxDir)) {
        try {
          const j = JSON.parse(readFileSync(join(tsxDir, name), 'utf8')) as { code?: string; map?: SourceMapPayload };
          const src = j.map?.sources?.[0];
          if (j.code && src) tsx.set(src, [...(tsx.get(src) ?? []), { code: j.code, map: j.map! }]);
        } catch {
          /* not one of tsx's entries */
        }
      }
    } catch {
      /* no cache */
    }
    return tsx;
  };
  const frames = new Map<string, Frame[]>();
  for (const n of p.nodes) if (isPingd(n.callFrame.url)) frames.set(n.callFrame.url, [...(frames.get(n.callFrame.url) ?? []), n.callFrame]);
  const maps = new Map<string, SourceMap | undefined>();
  const mapFor = (url: string): SourceMap | undefined => {
    if (maps.has(url)) return maps.get(url);
    const path = fileURLToPath(url);
    let m: SourceMap | undefined;
    if (distUrl && url.startsWith(distUrl)) {
      try {
        m = new SourceMap(JSON.parse(readFileSync(`${path}.map`, 'utf8')) as SourceMapPayload);
      } catch {
        m = undefined;
      }
    } else {
      let best: { score: number; map: SourceMapPayload } | undefined;
      for (const c of tsxEntries().get(path) ?? []) {
        const lines = c.code.split('\n');
        let score = 0;
        for (const f of frames.get(url) ?? []) {
          const line = lines[f.lineNumber] ?? '';
          const col = f.columnNumber ?? 0;
          if (
            f.functionName &&
            f.functionName !== '__name' &&
            line.slice(Math.max(0, col - f.functionName.length - 16), col).includes(f.functionName)
          )
            score++;
        }
        if (!best || score > best.score) best = { score, map: c.map };
      }
      m = best ? new SourceMap(best.map) : undefined;
    }
    maps.set(url, m);
    return m;
  };
  const nodes = p.nodes.map((n) => {
    const f = n.callFrame as Frame;
    if (!isPingd(f.url)) return n;
    const e = mapFor(f.url)?.findEntry(f.lineNumber, f.columnNumber ?? 0) as { originalLine?: number } | undefined;
    const line = e && typeof e.originalLine === 'number' ? e.originalLine : -1;
    let url = f.url;
    if (distUrl && url.startsWith(distUrl)) url = `file://${join(PINGD_ROOT, 'src', url.slice(distUrl.length).replace(/\.js$/, '.ts'))}`;
    return { ...n, callFrame: { ...f, url, lineNumber: line, columnNumber: 0 } };
  });
  return { ...p, nodes };
}

const monoUs = () => Number(process.hrtime.bigint() / 1000n);

/** pingd's source files, and the baseline's one-line handler (so that both are split alike). */
const isApp = (m: string) => m.startsWith('src/') || m === 'bench/baseline-server.ts';

/** Fastify's lifecycle steps, called from a hook's or a body parser's done(). */
function continuation(f: ProfileNode['callFrame']): boolean {
  const i = f.url.indexOf('node_modules/fastify/lib/');
  if (i < 0) return false;
  const file = f.url.slice(i + 25);
  return (
    file === 'handle-request.js' ||
    (file === 'hooks.js' && f.functionName === 'next') ||
    (file === 'route.js' && f.functionName === 'runPreParsing') ||
    (file === 'reply.js' && f.functionName === 'onResponseCallback')
  );
}

/** Where a frame belongs: a pingd source file (src/…), a package, or a part of Node. */
function owner(url: string): string {
  return url.endsWith('/bench/baseline-server.ts') ? 'bench/baseline-server.ts' : moduleOf(url);
}

/**
 * µs per request: self time by module; self time charged to the nearest pingd source file on the stack
 * (what each of pingd's modules costs with the libraries it calls), the rest to the stack's module; and the
 * inclusive time of pingd's own functions (hooks and handlers among them).
 */
interface PerRequest {
  busyUs: number;
  /** Self time of pingd's own code (src/), of what pingd's code called (packages, Node), and of the rest (Fastify, Node, V8 outside any pingd frame). */
  own: number;
  under: number;
  stack: number;
  modules: Map<string, number>;
  /** Per pingd source file: its own self time and the self time of what it called. */
  charged: Map<string, { own: number; under: number }>;
  functions: Map<string, number>;
  /** Self time by function, all of them (for the difference with the baseline). */
  fnSelf: Map<string, number>;
}

function perRequest(p: Profile, requests: number, top = 18): PerRequest {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfUs = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) selfUs.set(p.samples[i], (selfUs.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
  const modules = new Map<string, number>();
  const charged = new Map<string, { own: number; under: number }>();
  const functions = new Map<string, number>();
  const fnSelf = new Map<string, number>();
  let busy = 0;
  let own = 0;
  let under = 0;
  const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
  for (const [id, us] of selfUs) {
    const n = byId.get(id)!;
    const name = n.callFrame.functionName;
    if (name === '(idle)') continue;
    busy += us;
    const leaf = owner(n.callFrame.url);
    add(modules, n.callFrame.url ? leaf : name.startsWith('(') ? name : leaf, us);
    add(
      fnSelf,
      `${name || '(anonymous)'} ${n.callFrame.url.split('/').pop()}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ''}`,
      us,
    );
    let src: string | undefined;
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)!.callFrame;
      // What runs inside a hook's done() or a body parser's done() is the next step of Fastify's
      // lifecycle, not the hook's work: the walk stops there.
      if (continuation(f)) break;
      const m = owner(f.url);
      if (isApp(m)) {
        src ??= m;
        const k = `${f.functionName || '(anonymous)'} ${m}:${f.lineNumber >= 0 ? f.lineNumber + 1 : '?'}`;
        if (!seen.has(k)) {
          seen.add(k);
          add(functions, k, us);
        }
      }
    }
    if (src) {
      const c = charged.get(src) ?? { own: 0, under: 0 };
      if (leaf === src) {
        c.own += us;
        own += us;
      } else {
        c.under += us;
        under += us;
      }
      charged.set(src, c);
    }
  }
  const scale = (m: Map<string, number>) =>
    new Map(
      [...m]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([k, v]) => [k, v / requests]),
    );
  return {
    busyUs: busy / requests,
    own: own / requests,
    under: under / requests,
    stack: (busy - own - under) / requests,
    modules: scale(modules),
    charged: new Map(
      [...charged]
        .sort((a, b) => b[1].own + b[1].under - a[1].own - a[1].under)
        .slice(0, top)
        .map(([k, v]) => [k, { own: v.own / requests, under: v.under / requests }]),
    ),
    functions: scale(functions),
    fnSelf: new Map([...fnSelf].map(([k, v]) => [k, v / requests])),
  };
}

function latestProfile(dir: string): Profile | undefined {
  if (!existsSync(dir)) return undefined;
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  if (!files.length) return undefined;
  const main = files.map((f) => join(dir, f)).sort((a, b) => statSync(b).size - statSync(a).size)[0];
  return JSON.parse(readFileSync(main, 'utf8')) as Profile;
}

function profileDir(tag: string): string {
  const dir = join(ROOT, 'bench', 'profiles', `${new Date().toISOString().replace(/[:.]/g, '-')}-wrk-${tag}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

function childOf(proc: ChildProcess, port: number): Child {
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    proc,
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 30_000);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
  };
}

/**
 * The baseline (bench/baseline-server.ts) under --cpu-prof: startBaseline takes no node flags, and Node
 * refuses --cpu-prof in NODE_OPTIONS, so it is started here. It prints its port on stdout when listening.
 */
async function startProfiledBaseline(dir: string): Promise<Child> {
  const proc = spawn(
    process.execPath,
    [
      '--cpu-prof',
      `--cpu-prof-dir=${dir}`,
      '--import',
      'tsx',
      '--import',
      new URL('./lib/orphan-guard.ts', import.meta.url).href,
      join(ROOT, 'bench/baseline-server.ts'),
    ],
    {
      cwd: ROOT,
      env: { ...env, PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  track(proc);
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const t = setTimeout(() => reject(new Error(`baseline not listening after 60 s: ${err}`)), 60_000);
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /LISTENING (\d+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(Number(m[1]));
      }
    });
    proc.once('exit', (code) => reject(new Error(`baseline exited with ${code}: ${err}`)));
  });
  return childOf(proc, port);
}

/** How pingd is started: under tsx from src/ (as the other scenarios do), or compiled by tsc (what ships). */
interface Launcher {
  kind: 'tsx' | 'compiled';
  /** The compiled tree's dist/ (frames there are mapped back to src/). */
  dist?: string;
  start(env: Record<string, string>, nodeArgs?: string[]): Promise<Child>;
  dispose(): void;
}

const tsxLauncher: Launcher = { kind: 'tsx', start: (e, nodeArgs) => startPingd({ env: e, nodeArgs }), dispose() {} };

/** pingd compiled by tsc (compilePingd), as the image runs it. */
function compiledLauncher(): Launcher {
  const build = compilePingd(log);
  return {
    kind: 'compiled',
    dist: build.dist,
    start: (e, nodeArgs) => startPingd({ env: e, nodeArgs, compiled: build }),
    dispose: () => build.dispose(),
  };
}

const us1 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : n < 10 ? n.toFixed(1) : Math.round(n).toString());

function profileTable(title: string, pingd: PerRequest, base: PerRequest | undefined): string {
  const out = [
    `#### ${title}`,
    '',
    `CPU busy per request under the profiler: pingd **${us1(pingd.busyUs)} µs** = its own code ${us1(pingd.own)} + what its code called (packages, Node: the reply's write among them) ${us1(pingd.under)} + the stack outside pingd's frames (Fastify's lifecycle, Node's HTTP, V8, GC) ${us1(pingd.stack)}` +
      (base
        ? `; baseline **${us1(base.busyUs)} µs** = its handler ${us1(base.own)} + what the handler called ${us1(base.under)} + the stack ${us1(base.stack)}.`
        : '.'),
    '',
  ];
  out.push('| self time by module | pingd µs/req | baseline µs/req |', '| --- | ---: | ---: |');
  const keys = [...new Set([...pingd.modules.keys(), ...(base ? [...base.modules.keys()].slice(0, 8) : [])])];
  for (const k of keys) out.push(`| ${k} | ${us1(pingd.modules.get(k))} | ${base ? us1(base.modules.get(k)) : ''} |`);
  out.push('', '| pingd source file (nearest on the stack) | own code µs/req | what it called µs/req |', '| --- | ---: | ---: |');
  for (const [k, v] of pingd.charged) out.push(`| ${k} | ${us1(v.own)} | ${us1(v.under)} |`);
  out.push('', '| pingd function (inclusive, hooks and handlers among them) | µs/req |', '| --- | ---: |');
  for (const [k, v] of pingd.functions) out.push(`| ${k} | ${us1(v)} |`);
  if (base) {
    const d = [...new Set([...pingd.fnSelf.keys(), ...base.fnSelf.keys()])]
      .map((k) => ({ k, p: pingd.fnSelf.get(k) ?? 0, b: base.fnSelf.get(k) ?? 0 }))
      .sort((x, y) => y.p - y.b - (x.p - x.b));
    out.push('', '| function (self time), largest excess over the baseline | pingd µs/req | baseline µs/req |', '| --- | ---: | ---: |');
    for (const r of d.slice(0, 25)) out.push(`| ${r.k} | ${us1(r.p)} | ${us1(r.b)} |`);
  }
  return out.join('\n');
}

/**
 * Profiles one case: a fresh pingd (same database, RENDER_SCHEDULER=false) and a fresh baseline, each under
 * --cpu-prof while wrk sends only that case's requests; returns the two summaries.
 */
async function profileCase(
  c: CaseDef,
  backend: 'postgres' | 'pglite',
  db: BenchDatabase,
  s: Settings,
  launcher: Launcher,
): Promise<string> {
  const dirP = profileDir(`${backend}-${c.id}-pingd`);
  const dirB = profileDir(`${backend}-${c.id}-baseline`);
  const sf = scriptFile(c.lua);
  let pingd: Child | undefined;
  let baseline: Child | undefined;
  try {
    pingd = await launcher.start(pingdEnv({ RENDER_SCHEDULER: 'false' }, db), ['--cpu-prof', `--cpu-prof-dir=${dirP}`]);
    baseline = await startProfiledBaseline(dirB);
    await c.prime(pingd, baseline);
    const tag = `q${Date.now().toString(36)}`;
    const go = async (url: string, run: string) => {
      // A short warm-up first (JIT), then the profiled window.
      await runWrk(url, { script: sf.path, connections: s.connections, threads: s.threads, seconds: 2, args: c.args?.(`${tag}${run}w`) });
      const t0 = monoUs();
      const r = await runWrk(url, {
        script: sf.path,
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
    const pp = latestProfile(dirP);
    const pb = latestProfile(dirB);
    if (!pp) return `(no profile written in ${dirP})`;
    const wp = window(normalise(pp, launcher.dist), tp.t0, tp.t1);
    const wb = pb ? window(normalise(pb, undefined), tb.t0, tb.t1) : undefined;
    const head = `${c.label} on ${backend}: pingd ${Math.round(tp.r.rps)} req/s, baseline ${Math.round(tb.r.rps)} req/s under the profiler (${s.profileSeconds} s each${wp.windowed ? ', samples of the timed window only' : ', whole process: startup included'}); profiles in ${dirP} and ${dirB}`;
    // The timed window, frames named by source line, and the request count: `bench/wrk.ts --analyse DIR_PINGD DIR_BASELINE` re-reads them.
    writeFileSync(join(dirP, 'window.json'), JSON.stringify({ requests: tp.r.requests, profile: wp.p }));
    if (wb) writeFileSync(join(dirB, 'window.json'), JSON.stringify({ requests: tb.r.requests, profile: wb.p }));
    const text = [
      profileTable(head, perRequest(wp.p, tp.r.requests), wb ? perRequest(wb.p, tb.r.requests) : undefined),
      '',
      '```',
      summarize(wp.p, 30, INCLUSIVE),
      '```',
    ];
    return text.join('\n');
  } finally {
    sf.dispose();
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

    // 2. pingd serving, renderer off: the ETag stays the current one throughout.
    pingd = await launcher.start(pingdEnv({ RENDER_SCHEDULER: 'false' }, db));
    baseline = await startBaseline();
    let etag = '';
    if (needDoc) {
      const full = await sample(pingd.url, documentSpec(PATH, { 'accept-encoding': 'gzip' }, 200));
      if (full.status !== 200 || !full.headers.etag) throw new Error(`${PATH} answered ${full.status} without an ETag`);
      etag = full.headers.etag;
      log(`${backend}: ${PATH} ${full.body.length} bytes gzip, ETag ${etag}`);
    }
    const tag = `r${Date.now().toString(36)}`;
    const all = cases(etag, tag);
    const rows: WrkRow[] = [];
    let completedPings = 0;
    let intake: Awaited<ReturnType<typeof pingOutcomes>> | undefined;
    for (const c of all.filter((x) => s.cases.includes(x.id))) {
      const before = c.id === 'ping' ? await pingOutcomes(pingd.url) : undefined;
      const m = await measureCase(c, backend, pingd, baseline, db, s);
      if (before) {
        completedPings = m.completed;
        await sleep(1500); // requests wrk cut off at the end of a run still commit
        const after = await pingOutcomes(pingd.url);
        const batches = after.batches - before.batches;
        if (batches > 0)
          m.row.note = `batches of ${((after.batchPings - before.batchPings) / batches).toFixed(1)}, ${(((after.commitSec - before.commitSec) / batches) * 1000).toFixed(1)} ms a commit`;
        intake = { ...after, accepted: after.accepted - before.accepted, refused: after.refused - before.refused };
      }
      rows.push(m.row);
    }
    await baseline.stop();
    baseline = undefined;
    const code = await pingd.stop();
    pingd = undefined;
    if (code !== 0) log(`${backend}: pingd exited with ${code}`);

    let check = '';
    let ok = true;
    if (intake) {
      const stored = (await db.countPings()) - storedBefore;
      // Every answer wrk read was a stored ping (stored ≥ answered), every stored ping was accepted and none refused.
      ok = stored >= completedPings && stored === intake.accepted && intake.refused === 0;
      check = `${backend}: ${completedPings.toLocaleString('en-US')} ping answers read by wrk, ${intake.accepted.toLocaleString('en-US')} accepted and ${intake.refused} refused by pingd, ${stored.toLocaleString('en-US')} rows stored ${ok ? '✅' : '❌'}`;
    }

    const profiles: string[] = [];
    if (s.profile) {
      for (const c of all.filter((x) => s.profileCases.includes(x.id))) {
        log(`${backend}: profiling ${c.id}`);
        profiles.push(await profileCase(c, backend, db, s, launcher));
      }
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
      `| ${r.id} | ${r.backend} | ${f0(r.rps)} | ${f1(r.p50)} / **${f1(r.p99)}** | ${f0(r.baselineRps)} | ${f1(r.baselineP50)} / ${f1(r.baselineP99)} | **${pct(r.ratio)}** (${pct(r.ratioMin)}–${pct(r.ratioMax)}; ${r.runs}) | ${r.target} ${r.pass ? '✅ met' : '❌ not met'} | ${f0(r.pingdUs)} (${f0(r.baselineUs)}) | ${r.backend === 'postgres' ? f0(r.dbUs) : '–'} | ${f1(r.loadgenUs)} (${f1(r.baselineLoadgenUs)}) | ${f0(r.bytes)} (${f0(r.baselineBytes)}) | ${r.failures} | ${r.note ?? ''} |`,
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
  const launcher = s.pingd === 'tsx' ? tsxLauncher : compiledLauncher();
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
  }
  const cpu = cpus();
  const md = [
    `### wrk benchmark ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `pingd of ${PINGD_ROOT === ROOT ? 'this checkout' : PINGD_ROOT} at ${commit || '?'}, ${launcher.kind === 'compiled' ? 'compiled by tsc and run as `node dist/cli.js serve` (as the image runs it)' : 'run under tsx from src/'}${dirty ? ` (uncommitted changes in ${dirty.split('\n').length} file(s) under src/)` : ''}. ` +
      `Machine: ${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}; load average at start ${load0}, at end ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}. ` +
      `Load generator: ${wrkVersion}, ${s.threads} thread, ${s.connections} connections, on the same machine. Warm-up ${s.warmup} s each, then ${s.runs} runs of ${s.duration} s of pingd and of the baseline in turn (order swapped every pair); medians, ratio = median of the per-pair ratios. ` +
      `${PATH} holds ${s.weblogs.toLocaleString('en-US')} weblogs. Wall time ${Math.round((Date.now() - started.getTime()) / 1000)} s.`,
    '',
    wrkTable(rows),
    '',
    ...(checks.length ? [`Acknowledged vs stored: ${checks.join('; ')}.`, ''] : []),
    ...(profiles.length ? ['#### Profiles', '', ...profiles.flatMap((p) => [p, ''])] : []),
  ].join('\n');
  console.log(md);
  if (opts.write) log(`results written to ${writeResultsFile(ROOT, `${started.toISOString().slice(0, 10)}-wrk`, `${md}\n`)}`);
  return ok && rows.length > 0;
}

// Run directly: node --import tsx bench/wrk.ts [--write]
const INCLUSIVE = [
  'serveDocument',
  'decide',
  'negotiateEncoding',
  'parseMethodCall',
  'fastParseMethodCall',
  'validatePing',
  'accept',
  'insertPingBatch',
  'flush',
  'runPreParsing',
  'handleRequest',
  'onSendEnd',
  'writeHead',
];

/** Summarises the profiles a profiled run left (window.json in each directory). */
function analyse(dirP: string, dirB: string | undefined): string {
  const read = (d: string) => JSON.parse(readFileSync(join(d, 'window.json'), 'utf8')) as { requests: number; profile: Profile };
  const p = read(dirP);
  const b = dirB ? read(dirB) : undefined;
  return [
    profileTable(dirP, perRequest(p.profile, p.requests), b ? perRequest(b.profile, b.requests) : undefined),
    '',
    '```',
    summarize(p.profile, 30, INCLUSIVE),
    '```',
  ].join('\n');
}

if (isMain(import.meta.url) && process.argv[2] === '--analyse') console.log(analyse(process.argv[3], process.argv[4]));
else if (isMain(import.meta.url)) runDirect('wrk', runWrkBench);
