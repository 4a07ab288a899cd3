// Owns the soak scenario (issue "Scale", "Fresh documents under sustained load"): pingd with its renderer on
// (its default RENDER_CRON), fed a new weblog on every XML-RPC ping at a fixed arrival rate (BENCH_SOAK_RATE,
// 200/s, Spinn3r's 2008 peak) over 8 keep-alive connections for BENCH_SOAK_SECONDS (600), per backend
// (PostgreSQL in a fresh database bench_soak_*, PGlite in a fresh data directory). On PostgreSQL it then
// steps the rate up (BENCH_SOAK_STEPS, 400,800,1600,3200; BENCH_SOAK_STEP_SECONDS, 120 each, each on a
// fresh database, on max(8, rate/50) connections) and stops at the first step that breaks a bound: the highest step that held is the
// highest sustained rate found.
//
// Bounds (the issue's): shortChanges.xml never older than 2 × RENDER_CRON; changes.xml never older than
// 5 minutes (it was 60 s until issue 42 paced its render over ticks, a slice each: a big hour's changes.xml
// takes several ticks, ~85 s at 720,000 weblogs; weblogs.com: "use the shortChanges.xml when you need
// updates as frequently as every 5 minutes"); intake does not drift (every 30 s accepts ≥ 95% of the offered rate; the last third's p99 at most
// max(2×, +10 ms) the first third's, its first 30 s left out); the embedded process under 300 MB RSS; and,
// ours, no failed ping (any non-200, fault, socket error or 30 s timeout counts) and as many rows in
// `pings` as acknowledgements.
//
// Definitions. Latency runs from a request's due time (open model: t0 + i/rate), so a stalled server shows
// as latency, not as a lower offered rate. A document's age is now − its `updated` attribute (the instant
// it was rendered as of, whole seconds), polled once a second (a conditional GET; a new rendering's head is
// read from the gzip stream), counted only while pings arrive and from the load's start (bench/lib/soak-probe.ts).
// Sampled every 5 s; the table has a row per 30 s. VERIFY_PINGS is off (startPingd's setting for every
// bench: pingd's default `mark` would fetch each pinged weblog, and the weblog hosts here are invented names
// under soak.example.com, off loopback). pingd listens on 127.0.0.1 on a free port (startPingd's choice).
//
//   node --import tsx bench/soak.ts [--write]      (writes bench/results/<date>-soak.md)
//
// Environment: BENCH_BACKENDS (postgres,pglite), BENCH_DATABASE_URL, BENCH_SOAK_RATE (200),
// BENCH_SOAK_SECONDS (600), BENCH_SOAK_STEPS (400,800,1600,3200; "none" skips the ramp),
// BENCH_SOAK_STEP_SECONDS (120), BENCH_SOAK_CONNECTIONS (8), BENCH_SOAK_NODE_ARGS (node flags for pingd, e.g.
// `--cpu-prof --cpu-prof-dir=DIR`), BENCH_SOAK_PINGD (compiled, the default: tsc's build run
// as `npm start` runs it; tsx: src/ under tsx).
import { cpus, loadavg, totalmem } from 'node:os';
import { describeConfig } from '../src/platform/config.js';
import { envNumber } from './lib/env.js';
import { git } from './lib/git.js';
import { recordRun } from './lib/results.js';
import { isMain, runDirect, type DirectOptions } from './lib/run-direct.js';
import { PINGD_ROOT, ROOT, compilePingd, removeStaleDataDirs } from './lib/servers.js';
import { dropStaleScenarioDatabases } from './lib/soak-database.js';
import { runSegment, type Bounds, type Segment } from './lib/soak-run.js';
import { segmentMarkdown, summaryMarkdown } from './lib/soak-report.js';

const env = process.env;
const log = (s: string) => process.stderr.write(`${s}\n`);
const SAMPLE_SEC = 5;

/** RENDER_CRON's period in seconds, from pingd's default (`*\/N * * * * *` → N; a 5-field cron → 60). */
export function renderPeriodSec(): number {
  const cron = describeConfig().find((c) => c.name === 'RENDER_CRON')!.default;
  const f = cron.trim().split(/\s+/);
  if (f.length === 6) {
    const m = /^\*\/(\d+)$/.exec(f[0]);
    return m ? Number(m[1]) : f[0] === '*' ? 1 : 60;
  }
  return 60;
}

function settings() {
  const steps = (env.BENCH_SOAK_STEPS ?? '400,800,1600,3200').trim();
  return {
    rate: envNumber('BENCH_SOAK_RATE', 200),
    seconds: envNumber('BENCH_SOAK_SECONDS', 600),
    steps:
      steps === '' || steps === 'none'
        ? []
        : steps.split(',').map((s) => {
            const n = Number(s.trim());
            if (!Number.isFinite(n) || n <= 0) throw new Error(`BENCH_SOAK_STEPS must list positive rates, got ${JSON.stringify(steps)}`);
            return n;
          }),
    stepSeconds: envNumber('BENCH_SOAK_STEP_SECONDS', 120),
    connections: Math.round(envNumber('BENCH_SOAK_CONNECTIONS', 8)),
  };
}

/**
 * Connections for a ramp step: with one request per connection at a time, a rate needs rate × latency
 * connections (Little's law), so 8 would cap 3,200/s at 2.5 ms a ping and measure the client instead of
 * pingd. A step gets enough for 20 ms per ping (64 at 3,200/s), at least the base run's.
 */
export const stepConnections = (rate: number, base: number) => Math.max(base, Math.ceil(rate / 50));

export async function runSoak(o: DirectOptions): Promise<boolean> {
  const s = settings();
  const periodSec = renderPeriodSec();
  const bounds: Bounds = { shortAgeSec: 2 * periodSec, changesAgeSec: 300, embeddedRssMb: 300, minRateShare: 0.95 };
  const started = new Date();
  const load0 = loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
  const commit = git(PINGD_ROOT, ['rev-parse', '--short', 'HEAD']);
  const dirty = git(PINGD_ROOT, ['status', '--porcelain', '--', 'src', 'migrations']);
  const measured = `${PINGD_ROOT === ROOT ? 'this checkout' : PINGD_ROOT} at ${commit || 'an unknown commit'} (${git(PINGD_ROOT, ['log', '-1', '--format=%s']).slice(0, 100)})${
    dirty
      ? `, with uncommitted changes in ${dirty
          .split('\n')
          .map((l) => l.replace(/^\s*\S+\s+/, ''))
          .join(', ')}`
      : ''
  }`;
  log(`soak: pingd of ${measured}; load ${load0}`);
  if (o.backends.includes('postgres')) {
    const stale = await dropStaleScenarioDatabases(o.databaseUrl, 'soak');
    if (stale.length) log(`soak: dropped ${stale.length} database(s) left by killed runs`);
  }
  removeStaleDataDirs();
  // Compiled, as `npm start` runs it: under tsx the process held ~100 MB more (391 MB idle against 290).
  const compiled = env.BENCH_SOAK_PINGD === 'tsx' ? undefined : compilePingd(log);
  const common = { adminUrl: o.databaseUrl, connections: s.connections, sampleSec: SAMPLE_SEC, bounds, compiled };
  const segments: Segment[] = [];
  const errors: string[] = [];
  let ramp: { held: number | null; brokeAt: number | null; ran: boolean } = { held: null, brokeAt: null, ran: false };
  for (const backend of o.backends) {
    try {
      const seg = await runSegment({ ...common, label: `${backend} ${s.rate}/s`, backend, rate: s.rate, seconds: s.seconds });
      segments.push(seg);
      if (backend === 'postgres' && s.steps.length) {
        ramp = { held: seg.pass ? s.rate : null, brokeAt: seg.pass ? null : s.rate, ran: true };
        for (const rate of seg.pass ? s.steps : []) {
          const step = await runSegment({
            ...common,
            connections: stepConnections(rate, s.connections),
            label: `postgres step ${rate}/s`,
            backend,
            rate,
            seconds: s.stepSeconds,
          });
          segments.push(step);
          if (!step.pass) {
            ramp.brokeAt = rate;
            break;
          }
          ramp.held = rate;
        }
      }
    } catch (err) {
      log(`soak ${backend} failed: ${(err as Error).stack ?? err}`);
      errors.push(`${backend}: ${(err as Error).message.split('\n')[0].slice(0, 300)}`);
    }
  }
  compiled?.dispose();
  const cpu = cpus();
  const md = [
    `### Soak ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `pingd: ${measured}. Machine: ${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}; load average at start ${load0}, at end ${loadavg()
      .map((x) => x.toFixed(2))
      .join(
        ' ',
      )}. Wall time ${Math.round((Date.now() - started.getTime()) / 1000)} s. pingd ${compiled ? 'compiled by tsc, run as `node dist/cli.js serve` (as `npm start` runs it)' : 'under tsx from src/'}. RENDER_CRON: pingd's default (every ${periodSec} s); VERIFY_PINGS=off;${processTuning()} ${s.connections} connections (ramp steps: ${s.steps.map((r) => stepConnections(r, s.connections)).join(', ')}).`,
    '',
    summaryMarkdown(segments, ramp, s.steps, errors),
    '',
    ...segments.map((seg) => segmentMarkdown(seg, SAMPLE_SEC)),
    '',
    '#### Method',
    '',
    `Open-model load from a Node client in the bench process (keep-alive agent, ${s.connections} sockets; a ramp step max(that, rate/50), enough for 20 ms a ping): ping i is due at t0 + i/rate and its latency runs from that due time, so a stall shows as latency. Every ping names a new weblog on a host of its own (XML-RPC weblogUpdates.ping to /RPC2). ` +
      `Document age = now − the served document's \`updated\` attribute (whole seconds; the instant it was rendered as of), polled every second with a conditional GET, counted from the load's start. ` +
      `Bounds: shortChanges.xml ≤ 2 × RENDER_CRON (${bounds.shortAgeSec} s), changes.xml ≤ ${bounds.changesAgeSec} s, every 30 s ≥ 95% of the offered rate accepted, last third's p99 ≤ max(2×, +10 ms) of the first third's (first 30 s left out), embedded RSS < ${bounds.embeddedRssMb} MB, no failure, rows in \`pings\` = acknowledgements. ` +
      `RSS from /proc/<pid>/status (VmRSS each sample, VmHWM at the end); PostgreSQL: the private memory (RssAnon) of the backends serving the database. Render ms: the mean of pingd_publish_render_duration_seconds over the renders that finished in the row. Each PostgreSQL step runs on a fresh database.`,
    '',
  ].join('\n');
  console.log(md);
  if (o.write)
    log(
      `results written to ${recordRun({ scenario: 'soak', title: 'Sustained intake with the renderer on', started, markdown: md, backends: o.backends }).join(', ')}`,
    );
  // A ramp step breaking a bound is the ramp's answer, not a failed run.
  return errors.length === 0 && segments.filter((x) => x.rate === s.rate).every((x) => x.pass);
}

/**
 * The process settings pingd inherits from the bench's environment that change its memory (glibc's malloc,
 * V8's heap), named in the report: RSS figures mean nothing without them.
 */
function processTuning(): string {
  const set = ['LD_PRELOAD', 'MALLOC_CONF', 'MALLOC_ARENA_MAX', 'MALLOC_MMAP_THRESHOLD_', 'MALLOC_TRIM_THRESHOLD_', 'NODE_OPTIONS']
    .filter((k) => process.env[k])
    .map((k) => `${k}=${process.env[k]}`);
  return set.length ? ` pingd's environment: ${set.join(', ')};` : " no malloc or V8 settings in pingd's environment;";
}

// Run directly: node --import tsx bench/soak.ts [--write]
if (isMain(import.meta.url)) runDirect('soak', runSoak);
