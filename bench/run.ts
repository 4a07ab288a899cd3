// Owns `npm run bench`: pingd measured against this machine's own HTTP limit. It starts pingd
// on a fresh PostgreSQL database and on a fresh embedded one, and a minimal Fastify app answering the same
// bytes (the baseline), each in its own process, drives them in turns with autocannon, and prints
// requests/s, p50/p99 and the ratio to the baseline measured seconds apart, plus the CPU each request cost
// pingd and PostgreSQL. After the intake runs it checks that every acknowledged ping is a stored row.
//
//   npm run bench                  all scenarios, results printed
//   npm run bench -- --write       also bench/results/<date>.md and the latest table in docs/performance.md
//   BENCH_SCENARIOS=ping BENCH_BACKENDS=postgres BENCH_PROFILE=1 npm run bench
//
// Environment: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres: a database is
// created and dropped on it), BENCH_DURATION (s per timed run, 4), BENCH_RUNS (3), BENCH_WARMUP (s, 2),
// BENCH_CONNECTIONS (64), BENCH_BACKENDS (postgres,pglite), BENCH_SCENARIOS (ids below), BENCH_SHORT_WEBLOGS
// (weblogs in the served shortChanges.xml, 5000), BENCH_HOUR_WEBLOGS (weblogs in the hour the renderer re-renders
// during the ping+render row, 100000), BENCH_PROFILE=1 (pingd under --cpu-prof, summarised),
// BENCH_PINGD_<VAR>=… (passed to pingd as <VAR>). Scenario `ping-hosts` compares intake with VERIFY_PINGS=off and
// =mark (pings of weblogs on loopback hosts, verified while the load runs). Scenario `hardening`: see bench/hardening.ts.
// Scenario `web` (intake with /status open in headless Chromium, /api/stats and /weblog on 1M pings): see bench/web.ts.
// Scenario `wrk` (the HTTP ratios with wrk as the load generator; runs only when named): see bench/wrk.ts.
//   npm run bench -- --soak     sustained intake with the renderer on, document age over time: bench/soak.ts
//   npm run bench -- --scale    a month of pings (100M on PostgreSQL) against an empty database: bench/scale.ts
//   npm run bench -- --multi    three instances on one PostgreSQL behind a round-robin proxy: bench/multi.ts
// (each alone, instead of the default set; also runnable as node --import tsx bench/<name>.ts).
import { existsSync, readdirSync, statSync, readFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { cpus, loadavg, totalmem } from 'node:os';
import { spawn } from 'node:child_process';
import pg from 'pg';
import { envNumber } from './lib/env.js';
import {
  ROOT,
  dropStaleDatabases,
  removeStaleDataDirs,
  track,
  startPingd,
  startBaseline,
  setBaselineAnswer,
  createPostgresDatabase,
  createPgliteDatabase,
  type Child,
  type BenchDatabase,
} from './lib/servers.js';
import { runLoad, median, type LoadSpec, type LoadRun } from './lib/load.js';
import { snapshot, diff } from './lib/cpu.js';
import { pingSpec, extendedPingSpec, pingSiteFormSpec, pingOnHostsSpec, documentSpec, sample } from './lib/scenarios.js';
import { startFeedHosts, type FeedHosts } from './lib/feed-hosts.js';
import {
  loadTable,
  renderTable,
  writeResultsFile,
  updatePerformancePage,
  PERFORMANCE_PAGE,
  type Row,
  type RenderRow,
} from './lib/report.js';
import { summarize } from './profile-summary.js';
import { runHardening } from './hardening.js';
import { runWeb } from './web.js';
import { runWrkBench } from './wrk.js';
import { runSoak } from './soak.js';
import { runScale } from './scale.js';
import { runMulti } from './multi.js';
import type { DirectOptions } from './lib/run-direct.js';

const env = process.env;
const num = envNumber;
const OPTS = {
  databaseUrl: env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
  duration: num('BENCH_DURATION', 4),
  runs: Math.round(num('BENCH_RUNS', 3)),
  warmup: num('BENCH_WARMUP', 2),
  connections: Math.round(num('BENCH_CONNECTIONS', 64)),
  backends: (env.BENCH_BACKENDS || 'postgres,pglite').split(',').map((s) => s.trim()) as ('postgres' | 'pglite')[],
  scenarios: env.BENCH_SCENARIOS ? env.BENCH_SCENARIOS.split(',').map((s) => s.trim()) : undefined,
  shortWeblogs: Math.round(num('BENCH_SHORT_WEBLOGS', 5000)),
  hourWeblogs: Math.round(num('BENCH_HOUR_WEBLOGS', 100_000)),
  profile: env.BENCH_PROFILE === '1',
  write: process.argv.includes('--write') || env.BENCH_WRITE === '1',
};

/** pingd's environment: LOG_LEVEL=warn plus every BENCH_PINGD_<VAR> (BENCH_PINGD_ROOT says which checkout's pingd). */
function pingdEnv(extra: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = { LOG_LEVEL: 'warn', ...extra };
  for (const [k, v] of Object.entries(env))
    if (k.startsWith('BENCH_PINGD_') && k !== 'BENCH_PINGD_ROOT' && v !== undefined) out[k.slice(12)] = v;
  return out;
}

const wanted = (id: string) => !OPTS.scenarios || OPTS.scenarios.includes(id);
/** The loopback weblog hosts the `ping-hosts` rows ping (started by main). */
let feedHosts: FeedHosts | undefined;
const log = (s: string) => process.stderr.write(`${s}\n`);

interface IntakeScenario {
  id: string;
  label: string;
  spec: () => LoadSpec;
  target?: Partial<Record<'postgres' | 'pglite', { ratio: number; p99?: number }>>;
}

const INTAKE: IntakeScenario[] = [
  {
    id: 'ping',
    label: 'XML-RPC weblogUpdates.ping, distinct URLs',
    spec: pingSpec,
    target: { postgres: { ratio: 0.25, p99: 50 }, pglite: { ratio: 0.1 } },
  },
  { id: 'extendedPing', label: 'XML-RPC extendedPing (WordPress bytes), distinct URLs', spec: extendedPingSpec },
  { id: 'pingSiteForm', label: 'GET /pingSiteForm, distinct URLs', spec: pingSiteFormSpec },
];

/**
 * Intake is measured with the renderer stopped: what it costs depends on how many pings the hour holds,
 * and a benchmark minute holds far more than a real hour (~200 pings/s at Spinn3r's peak, the
 * bench sends thousands a second). Its cost is measured by the render scenarios; the `ping+render` row
 * measures intake while the renderer re-renders an hour of BENCH_HOUR_WEBLOGS weblogs on its schedule.
 */
function intakeGroups(): IntakeGroup[] {
  const groups: IntakeGroup[] = [];
  for (const backend of OPTS.backends) {
    // The embedded database's target is about pings; its other rows only when named (they cost a minute).
    const scenarios = backend === 'pglite' ? INTAKE.filter((s) => s.id === 'ping' || OPTS.scenarios?.includes(s.id)) : INTAKE;
    groups.push({ backend, label: backend, scenarios, env: { RENDER_SCHEDULER: 'false' } });
  }
  // Intake with verification on (VERIFY_PINGS=mark, the default) against the same with it off: pings of
  // distinct weblogs on loopback weblog hosts, each verified (homepage, autodiscovery, feed) while the load runs.
  if (wanted('ping-hosts') && feedHosts) {
    const spec = () => pingOnHostsSpec(feedHosts!.origins);
    for (const backend of OPTS.backends) {
      for (const verify of ['off', 'mark']) {
        groups.push({
          backend,
          label: `${backend}, VERIFY_PINGS=${verify}`,
          scenarios: [{ id: 'ping-hosts', label: 'weblogUpdates.ping, distinct weblogs on 8 loopback hosts', spec }],
          env: { RENDER_SCHEDULER: 'false', VERIFY_PINGS: verify, FETCH_ALLOW_PRIVATE: 'true' },
        });
      }
    }
  }
  if (OPTS.backends.includes('postgres')) {
    groups.push({
      backend: 'postgres',
      label: `postgres, rendering ${Math.round(OPTS.hourWeblogs / 1000)}k weblogs/h`,
      scenarios: [{ id: 'ping+render', label: 'weblogUpdates.ping while rendering', spec: pingSpec }],
      env: {},
      seed: OPTS.hourWeblogs,
    });
  }
  return groups;
}

// Headers the baseline copies from pingd's answer, so both send the same response head and body.
const COPIED = ['content-type', 'content-encoding', 'etag', 'last-modified', 'cache-control', 'im', 'vary', 'retry-after'];

async function metricsText(url: string): Promise<string> {
  try {
    const r = await fetch(`${url}/metrics`);
    return r.ok ? await r.text() : '';
  } catch {
    return '';
  }
}
function metricSum(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*ok="true"[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

interface Measured {
  row: Row;
  acks: number;
  unsure: number;
}

/**
 * Warm-up, then `runs` pairs of (pingd run, baseline run) in alternating order; medians of each and of
 * the per-pair ratios. Intake runs are bounded by a request count (calibrated on the warm-up to last about
 * BENCH_DURATION) so that every answer is read and the acknowledgements counted are exact.
 */
async function measure(
  id: string,
  backend: string,
  spec: LoadSpec,
  pingd: Child,
  baseline: Child,
  db: BenchDatabase | undefined,
  countAcks: boolean,
): Promise<Measured> {
  const { connections, duration, runs, warmup } = OPTS;
  let acks = 0;
  let unsure = 0;
  const s = await sample(pingd.url, spec);
  if (countAcks && spec.isAck?.(s.status, s.body.toString('utf8'))) acks++;
  const headers: Record<string, string> = {};
  for (const h of COPIED) if (s.headers[h]) headers[h] = s.headers[h];
  await setBaselineAnswer(baseline, s.status, headers, s.body);

  await runLoad(baseline.url, spec, { connections, duration: warmup });
  const warm = await runLoad(pingd.url, spec, countAcks ? { connections, amount: connections * 40 } : { connections, duration: warmup });
  acks += warm.acks;
  unsure += warm.unsure;
  const amount = Math.max(connections * 20, Math.round(warm.rps * duration));

  const t: LoadRun[] = [];
  const b: LoadRun[] = [];
  const ratios: number[] = [];
  const cpu: { server: number; db: number; loadgen: number }[] = [];
  const baselineCpu: number[] = [];
  let batchSize = 0;
  let batchCount = 0;
  let commitSec = 0;
  for (let i = 0; i < runs; i++) {
    const runPingd = async () => {
      const m0 = countAcks ? await metricsText(pingd.url) : '';
      const c0 = await snapshot(pingd.proc.pid!, () => db?.backendPids() ?? Promise.resolve([]));
      const r = await runLoad(pingd.url, spec, countAcks ? { connections, amount } : { connections, duration });
      const c = diff(c0, await snapshot(pingd.proc.pid!, () => db?.backendPids() ?? Promise.resolve([])));
      if (countAcks) {
        const m1 = await metricsText(pingd.url);
        batchSize += metricSum(m1, 'pingd_commit_batch_size_sum') - metricSum(m0, 'pingd_commit_batch_size_sum');
        batchCount += metricSum(m1, 'pingd_commit_batch_size_count') - metricSum(m0, 'pingd_commit_batch_size_count');
        commitSec += metricSum(m1, 'pingd_commit_duration_seconds_sum') - metricSum(m0, 'pingd_commit_duration_seconds_sum');
      }
      acks += r.acks;
      unsure += r.unsure;
      cpu.push({ server: c.serverUs / r.requests, db: c.dbUs / r.requests, loadgen: c.loadgenUs / r.requests });
      return r;
    };
    const runBaseline = async () => {
      const c0 = await snapshot(baseline.proc.pid!, () => Promise.resolve([]));
      const r = await runLoad(baseline.url, spec, { connections, duration });
      const c = diff(c0, await snapshot(baseline.proc.pid!, () => Promise.resolve([])));
      baselineCpu.push(c.serverUs / r.requests);
      return r;
    };
    let tr: LoadRun;
    let br: LoadRun;
    if (i % 2 === 0) {
      tr = await runPingd();
      br = await runBaseline();
    } else {
      br = await runBaseline();
      tr = await runPingd();
    }
    t.push(tr);
    b.push(br);
    ratios.push(tr.rps / br.rps);
    log(
      `  ${id}/${backend} run ${i + 1}: pingd ${Math.round(tr.rps)} req/s (p99 ${tr.p99} ms), baseline ${Math.round(br.rps)} req/s, ratio ${(tr.rps / br.rps).toFixed(3)}`,
    );
  }
  const failures = t.reduce((a, r) => a + r.bad + r.errors + r.timeouts, 0);
  return {
    acks,
    unsure,
    row: {
      scenario: id,
      backend,
      rps: median(t.map((r) => r.rps)),
      p50: median(t.map((r) => r.p50)),
      p99: median(t.map((r) => r.p99)),
      baselineRps: median(b.map((r) => r.rps)),
      ratio: median(ratios),
      ratioMin: Math.min(...ratios),
      ratioMax: Math.max(...ratios),
      serverUsPerReq: median(cpu.map((c) => c.server)),
      baselineUsPerReq: median(baselineCpu),
      dbUsPerReq: db?.backend === 'postgres' ? median(cpu.map((c) => c.db)) : undefined,
      loadgenUsPerReq: median(cpu.map((c) => c.loadgen)),
      batch: batchCount > 0 ? `${(batchSize / batchCount).toFixed(1)}, ${((commitSec / batchCount) * 1000).toFixed(1)}` : undefined,
      failures,
    },
  };
}

function profileArgs(tag: string): { args: string[]; dir?: string } {
  if (!OPTS.profile) return { args: [] };
  const dir = join(ROOT, 'bench', 'profiles', `${new Date().toISOString().replace(/[:.]/g, '-')}-${tag}`);
  mkdirSync(dir, { recursive: true });
  return { args: ['--cpu-prof', `--cpu-prof-dir=${dir}`], dir };
}

function reportProfile(dir: string | undefined): string {
  if (!dir || !existsSync(dir)) return '';
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  if (!files.length) return '';
  // The main thread's profile is the largest.
  const main = files.map((f) => join(dir, f)).sort((a, b) => statSync(b).size - statSync(a).size)[0];
  return `profile ${main}\n${summarize(JSON.parse(readFileSync(main, 'utf8')), 25, ['parseMethodCall', 'fastParseMethodCall', 'validatePing', 'insertPingBatch', 'flush', 'serveDocument'])}`;
}

interface IntakeResult {
  rows: Row[];
  check: string;
  ok: boolean;
  profile: string;
}

interface IntakeGroup {
  backend: 'postgres' | 'pglite';
  /** Shown in the backend column. */
  label: string;
  scenarios: IntakeScenario[];
  env: Record<string, string>;
  /** Distinct weblogs pinged before measuring (so that the renderer has a realistic hour to render). */
  seed?: number;
}

/**
 * Intake on a fresh database: the scenarios in turn on one pingd, then a graceful stop (which drains the
 * queue) and the check that every acknowledged ping is a stored row. A refusal for a database that answered
 * too late may still have committed, so rows may exceed acknowledgements by those, never fall short.
 */
async function intake(group: IntakeGroup, baseline: Child): Promise<IntakeResult | undefined> {
  const { backend, label } = group;
  const scenarios = group.scenarios.filter((s) => wanted(s.id));
  if (!scenarios.length) return undefined;
  const db = backend === 'postgres' ? await createPostgresDatabase(OPTS.databaseUrl) : await createPgliteDatabase();
  const prof = profileArgs(label.replace(/\W+/g, '-'));
  let pingd: Child | undefined;
  try {
    pingd = await startPingd({ env: pingdEnv({ ...group.env, ...db.env }), nodeArgs: prof.args });
    log(`pingd on ${label} at ${pingd.url}`);
    let acks = 0;
    let unsure = 0;
    if (group.seed) {
      const r = await runLoad(pingd.url, pingSpec(), { connections: OPTS.connections, amount: group.seed });
      acks += r.acks;
      unsure += r.unsure;
      log(`  seeded ${r.acks} weblogs`);
    }
    const rows: Row[] = [];
    for (const sc of scenarios) {
      const m = await measure(sc.id, label, sc.spec(), pingd, baseline, db, true);
      const target = sc.target?.[backend];
      if (target) {
        m.row.target = `≥ ${target.ratio * 100}%${target.p99 ? `, p99 ≤ ${target.p99} ms` : ''}`;
        m.row.pass = m.row.ratio >= target.ratio && (target.p99 === undefined || m.row.p99 <= target.p99);
      }
      rows.push(m.row);
      acks += m.acks;
      unsure += m.unsure;
    }
    const code = await pingd.stop();
    pingd = undefined;
    if (code !== 0) log(`pingd on ${label} exited with ${code}`);
    const stored = await db.countPings();
    const ok = stored >= acks && stored <= acks + unsure;
    const check = `${label}: ${acks} pings acknowledged, ${stored} rows stored${unsure ? ` (${unsure} refused as the database answered too late)` : ''} ${ok ? '✅' : stored < acks ? '❌ ACKNOWLEDGED PINGS MISSING' : '❌ MISMATCH'}`;
    return { rows, check, ok, profile: reportProfile(prof.dir) };
  } finally {
    if (pingd) await pingd.stop();
    await db.drop();
  }
}

/** Pings `n` distinct weblogs through XML-RPC (64 at a time). */
async function seedPings(url: string, n: number): Promise<void> {
  await runLoad(url, pingSpec(), { connections: Math.min(64, n), amount: n });
}

/** Waits until `path` is rendered with a validator different from `not`; returns its ETag (gzip). */
async function waitRendered(url: string, path: string, not: string | undefined, timeoutMs = 60_000): Promise<string> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const s = await sample(url, documentSpec(path, { 'accept-encoding': 'gzip' }, 200));
    const etag = s.headers.etag;
    if (s.status === 200 && etag && etag !== not) return etag;
    if (Date.now() > until) throw new Error(`${path} was not (re)rendered within ${timeoutMs} ms (last status ${s.status})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function documents(baseline: Child): Promise<{ rows: Row[]; profile: string }> {
  const ids = ['short-200-gzip', 'short-304', 'short-226'].filter(wanted);
  if (!ids.length) return { rows: [], profile: '' };
  const db = await createPostgresDatabase(OPTS.databaseUrl);
  const prof = profileArgs('documents');
  let pingd: Child | undefined;
  try {
    // Renders every 2 s (instead of 10) only so that seeding is quick; serving is what is measured here.
    pingd = await startPingd({ env: pingdEnv({ ...db.env, RENDER_CRON: '*/2 * * * * *' }), nodeArgs: prof.args });
    const path = '/shortChanges.xml';
    await seedPings(pingd.url, OPTS.shortWeblogs);
    // The first rendering may predate the seed: wait for one that has it all.
    let base = await waitRendered(pingd.url, path, undefined);
    await new Promise((r) => setTimeout(r, 2500));
    base = await waitRendered(pingd.url, path, undefined);
    // A few more pings make the next rendering, so that `base` is a delta base for it.
    await seedPings(pingd.url, 50);
    const current = await waitRendered(pingd.url, path, base);
    const full = await sample(pingd.url, documentSpec(path, { 'accept-encoding': 'gzip' }, 200));
    log(`shortChanges.xml: ${OPTS.shortWeblogs + 50} weblogs, ${full.body.length} bytes gzip, etag ${current}`);
    const rows: Row[] = [];
    const cases: Record<string, { spec: LoadSpec; target?: number; label: string }> = {
      'short-200-gzip': {
        spec: documentSpec(path, { 'accept-encoding': 'gzip' }, 200),
        target: 0.6,
        label: `GET ${path} 200 gzip (${Math.round(full.body.length / 1024)} KB)`,
      },
      'short-304': {
        spec: documentSpec(path, { 'accept-encoding': 'gzip', 'if-none-match': current }, 304),
        target: 0.85,
        label: `GET ${path} 304`,
      },
      'short-226': {
        spec: documentSpec(path, { 'accept-encoding': 'gzip', 'a-im': 'feed', 'if-none-match': base }, 226),
        label: `GET ${path} 226 delta (50 new)`,
      },
    };
    for (const id of ids) {
      const c = cases[id];
      const probe = await sample(pingd.url, c.spec);
      if (!c.spec.okStatus?.includes(probe.status))
        log(`  warning: ${id} answered ${probe.status}, expected ${c.spec.okStatus?.join('/')}`);
      const m = await measure(id, 'postgres', c.spec, pingd, baseline, db, false);
      m.row.scenario = `${id} (${probe.body.length < 1024 ? `${probe.body.length} B` : `${Math.round(probe.body.length / 1024)} KB`})`;
      if (c.target !== undefined) {
        m.row.target = `≥ ${c.target * 100}%`;
        m.row.pass = m.row.ratio >= c.target;
      }
      rows.push(m.row);
    }
    await pingd.stop();
    pingd = undefined;
    return { rows, profile: reportProfile(prof.dir) };
  } finally {
    if (pingd) await pingd.stop();
    await db.drop();
  }
}

/** Runs bench/publish-render.ts (the publishing helper's) when it exists; reads its JSON lines. */
async function renders(): Promise<{ rows: RenderRow[]; raw: string } | undefined> {
  if (!wanted('render')) return undefined;
  const script = join(ROOT, 'bench', 'publish-render.ts');
  if (!existsSync(script)) return { rows: [], raw: 'bench/publish-render.ts does not exist yet: render scenarios skipped.' };
  const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    // PostgreSQL only unless asked: seeding a 1M-ping hour takes minutes per backend.
    const childEnv = {
      BENCH_PUBLISH_BACKENDS: OPTS.backends.includes('postgres') ? 'postgres' : 'pglite',
      ...process.env,
      BENCH_DATABASE_URL: OPTS.databaseUrl,
    };
    const p = spawn(process.execPath, ['--import', 'tsx', '--import', new URL('./lib/orphan-guard.ts', import.meta.url).href, script], {
      cwd: ROOT,
      env: childEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    track(p);
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => {
      // Its progress and readable table, as it goes.
      process.stderr.write(d);
      stderr = (stderr + d.toString()).slice(-4000);
    });
    p.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
  const rows: RenderRow[] = [];
  const raw: string[] = [];
  for (const line of out.stdout.split('\n')) {
    const l = line.trim();
    if (!l) continue;
    try {
      const j = JSON.parse(l) as Record<string, unknown>;
      const n = (k: string[]) => k.map((x) => j[x]).find((v) => typeof v === 'number') as number | undefined;
      const s = (k: string[]) => k.map((x) => j[x]).find((v) => typeof v === 'string') as string | undefined;
      const row: RenderRow = {
        case: s(['case', 'document', 'name', 'label']) ?? l.slice(0, 60),
        ms: n(['ms', 'renderMs', 'render_ms']),
        peakMb: n(['peakMb', 'peakMB', 'peak_mb', 'peakRssMb', 'peakHeapMb']),
        bytes: n(['bytes']),
        target: s(['target']),
        pass: typeof j.pass === 'boolean' ? j.pass : undefined,
        note: s(['note']),
      };
      // The issue's render-time target (stated for PostgreSQL), when the script states none.
      if (!row.target && row.ms !== undefined && /changes\.xml, 100k.*postgres/.test(row.case)) {
        row.target = '≤ 1000 ms';
        row.pass = row.ms <= 1000;
      }
      rows.push(row);
    } catch {
      raw.push(l);
    }
  }
  if (out.code !== 0) raw.push(`publish-render exited with ${out.code}: ${out.stderr.trim().split('\n').slice(-5).join(' / ')}`);
  return { rows, raw: raw.join('\n') };
}

async function environment(): Promise<string> {
  let pgVersion: string;
  try {
    const c = new pg.Client({ connectionString: OPTS.databaseUrl });
    await c.connect();
    pgVersion = (await c.query<{ v: string }>("select current_setting('server_version') as v")).rows[0].v;
    await c.end();
  } catch (err) {
    pgVersion = `unreachable (${(err as Error).message})`;
  }
  const cpu = cpus();
  return `${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}; PostgreSQL ${pgVersion}; load average at start ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`;
}

/** The long scenarios run alone when asked for by flag. */
const ALONE: Record<string, (o: DirectOptions) => Promise<boolean>> = { '--soak': runSoak, '--scale': runScale, '--multi': runMulti };

/** `npm run bench -- --help`: this module's own opening comment (scenarios, flags, environment), as usage. */
export function benchHelp(source = readFileSync(new URL(import.meta.url), 'utf8')): string {
  const lines: string[] = [];
  for (const line of source.split('\n')) {
    if (!line.startsWith('//')) break;
    lines.push(line.replace(/^\/\/ ?/, ''));
  }
  const ids = [...INTAKE.map((x) => x.id), 'ping-hosts', 'ping+render', 'render', 'hardening', 'web', 'wrk (only when named)'];
  return `${lines.join('\n')}\n\nScenarios (BENCH_SCENARIOS, comma-separated; default all): ${ids.join(', ')}.\nFlags: --help, --write, ${Object.keys(ALONE).join(', ')}.`;
}

async function main(): Promise<number> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    console.log(benchHelp());
    return 0;
  }
  const alone = Object.keys(ALONE).filter((f) => process.argv.includes(f));
  if (alone.length) {
    let okAll = true;
    for (const f of alone) okAll = (await ALONE[f]({ databaseUrl: OPTS.databaseUrl, backends: OPTS.backends, write: OPTS.write })) && okAll;
    return okAll ? 0 : 1;
  }
  const started = new Date();
  const envLine = await environment();
  log(`pingd benchmark: ${envLine}`);
  log(
    `${OPTS.connections} connections, warm-up ${OPTS.warmup} s, ${OPTS.runs} runs of ~${OPTS.duration} s each (pingd and baseline in turn)`,
  );
  if (OPTS.backends.includes('postgres')) {
    if (envLine.includes('PostgreSQL unreachable')) {
      console.error(
        `bench: PostgreSQL at BENCH_DATABASE_URL (${OPTS.databaseUrl.replace(/\/\/[^@/]*@/, '//…@')}) is unreachable; start one or set BENCH_BACKENDS=pglite to measure the embedded database only.`,
      );
      return 2;
    }
    const stale = await dropStaleDatabases(OPTS.databaseUrl);
    if (stale.length) log(`dropped databases left by killed runs: ${stale.join(', ')}`);
  }
  const staleDirs = removeStaleDataDirs();
  if (staleDirs.length) log(`removed data directories left by killed runs: ${staleDirs.join(', ')}`);
  // `hardening` (bench/hardening.ts) prints and writes its own tables; alone, nothing else runs or is written.
  const hardening = () =>
    wanted('hardening')
      ? runHardening({ databaseUrl: OPTS.databaseUrl, backends: OPTS.backends, write: OPTS.write })
      : Promise.resolve(true);
  // `web` (bench/web.ts) likewise prints and writes its own tables.
  const web = () =>
    wanted('web') ? runWeb({ databaseUrl: OPTS.databaseUrl, backends: OPTS.backends, write: OPTS.write }) : Promise.resolve(true);
  // `wrk` (bench/wrk.ts) likewise; only when named (it installs wrk when missing).
  const wrkBench = () =>
    OPTS.scenarios?.includes('wrk')
      ? runWrkBench({ databaseUrl: OPTS.databaseUrl, backends: OPTS.backends, write: OPTS.write })
      : Promise.resolve(true);
  if (OPTS.scenarios?.every((s) => s === 'hardening' || s === 'web' || s === 'wrk')) {
    const hardened = await hardening();
    const webOk = await web();
    return (await wrkBench()) && webOk && hardened ? 0 : 1;
  }
  const baseline = await startBaseline();
  feedHosts = wanted('ping-hosts') ? await startFeedHosts(8) : undefined;
  const rows: Row[] = [];
  const checks: string[] = [];
  const profiles: string[] = [];
  let ok = true;
  try {
    for (const group of intakeGroups()) {
      const r = await intake(group, baseline);
      if (!r) continue;
      rows.push(...r.rows);
      ok &&= r.ok;
      checks.push(r.check);
      if (r.profile) profiles.push(r.profile);
    }
    if (OPTS.backends.includes('postgres')) {
      const d = await documents(baseline);
      rows.push(...d.rows);
      if (d.profile) profiles.push(d.profile);
    }
  } finally {
    await baseline.stop();
    if (feedHosts) log(`weblog hosts served ${feedHosts.served.pages} homepages and ${feedHosts.served.feeds} feeds to verification`);
    await feedHosts?.close();
  }
  const head = (end: Date) => [
    `### Benchmark ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `Machine: ${envLine}, at end ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}. Load generator (autocannon, ${OPTS.connections} connections) on the same machine. ` +
      `Warm-up ${OPTS.warmup} s, then ${OPTS.runs} runs of ~${OPTS.duration} s of pingd and of the baseline in turn; medians, ratio = median of the per-pair ratios. ` +
      `Wall time ${Math.round((end.getTime() - started.getTime()) / 1000)} s.`,
    '',
  ];
  const load = [loadTable(rows), '', ...(checks.length ? ['Acknowledged vs stored: ' + checks.join('; ') + '.', ''] : [])];
  // The load table first: the render scenarios take minutes, and an interrupted run still shows it.
  if (rows.length) console.log([...head(new Date()), ...load].join('\n'));
  const render = await renders();
  const renderPart = render
    ? [render.rows.length ? renderTable(render.rows) : '', render.raw ? '```\n' + render.raw + '\n```' : '', '']
    : [];
  if (render) console.log(renderPart.join('\n'));
  const md = [...head(new Date()), ...load, ...renderPart].filter((l, i, a) => !(l === '' && a[i - 1] === '')).join('\n');
  for (const p of profiles) console.log(`\n${p}`);
  if (OPTS.write) {
    const file = writeResultsFile(ROOT, started.toISOString().slice(0, 10), `${md}\n`);
    log(`results written to ${file}`);
    if (!updatePerformancePage(ROOT, md)) log(`${PERFORMANCE_PAGE} has no bench results markers: not updated`);
  }
  if (!(await hardening())) ok = false;
  if (!(await web())) ok = false;
  if (!(await wrkBench())) ok = false;
  return ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    console.error(`bench failed: ${err.stack ?? err.message}`);
    process.exit(1);
  },
);
