// Owns the `scale` scenario (issue "Scale", "A benchmark at scale"): a month of pings generated in SQL
// (bench/lib/scale-fill.ts) and the same measurements on it and on an empty database, in one run, per backend:
//   intake      durable XML-RPC weblogUpdates.ping, 64 connections, a new weblog per ping, renderer off:
//               the freshly migrated database and the big one in alternation (wrk), ratio big / empty;
//   changes     changes.xml rendered with `hourWeblogs` weblogs in the hour (wall ms, peak RSS);
//   archive     a closed archive hour of `archivePings` pings rendered (wall ms, peak RSS of the process);
//   lookup      GET /weblog?url= ("did my ping arrive?") for a weblog with many pings and one with few;
//   retention   RETENTION_DAYS=29 over the month: the pass pingd runs (seconds), intake p99 while it runs;
//   size        the ping log per million pings (partitions with their indexes), the whole database;
//   migrate     `pingd migrate` on the big database, and migration 011 (the partitioned logs) on a database
//               filled at the schema before it (BENCH_SCALE_MIGRATE_PINGS pings).
// For the renders and the lookup the "empty" database holds just those two hours (the same last hour and
// archive hour, nothing else). Every render and size probe runs in a child process (bench/lib/scale-probe.ts).
//
//   node --import tsx bench/scale.ts [--write]          (or: npm run bench -- --scale)
//
// Environment: BENCH_BACKENDS, BENCH_DATABASE_URL, BENCH_SCALE_PINGS (100000000), BENCH_SCALE_WEBLOGS
// (10000000), BENCH_SCALE_HOUR_WEBLOGS (100000), BENCH_SCALE_ARCHIVE_PINGS (1000000), the same with
// BENCH_SCALE_PGLITE_ for the embedded database (1000000, 100000, 50000, 250000), BENCH_SCALE_MIGRATE_PINGS
// (10000000; 1000000 embedded), BENCH_DURATION (s per intake run, 8), BENCH_RUNS (pairs, 3), BENCH_WARMUP (3),
// BENCH_SCALE_LOOKUPS (200), BENCH_SCALE_STEPS (intake,render,lookup,retention,migrate,migrate011).
import { statfsSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { envNumber } from './lib/env.js';
import { ROOT, PINGD_ROOT, startPingd, type Child } from './lib/servers.js';
import { recordRun } from './lib/results.js';
import { git } from './lib/git.js';
import { isMain, runDirect, type DirectOptions } from './lib/run-direct.js';
import {
  createScaleDatabase,
  dropStaleScaleDatabases,
  fillDatabase,
  migrateUpTo,
  pingdCommand,
  type Backend,
  type ScaleDb,
} from './lib/scale-db.js';
import type { FillSpec, FillTimings } from './lib/scale-fill.js';
import { runProbe, type ProbeResult, type Sizes } from './lib/scale-probe.js';
import {
  intakeDuringPrune,
  intakePairs,
  sequentialGets,
  type IntakeResult,
  type Lookup,
  type PruneUnderLoad,
} from './lib/scale-measure.js';
import { listMigrations } from '../src/platform/db/migrate.js';
import { median } from './lib/load.js';

const log = (s: string) => process.stderr.write(`${s}\n`);
const num = (name: string, def: number) => Math.round(envNumber(name, def));
const load = () =>
  loadavg()
    .map((x) => x.toFixed(1))
    .join(' ');
const STEPS = ['intake', 'render', 'lookup', 'retention', 'migrate', 'migrate011'] as const;
type Step = (typeof STEPS)[number];
const BIG_STEPS: Step[] = ['intake', 'render', 'lookup', 'retention', 'migrate'];
/** The partitioned-logs migration: timed on a database filled at the schema before it. */
const PARTITION_MIGRATION = 11;
/** Bytes a generated ping takes on disk with its share of indexes and weblogs (measured: ~330 at 1M), with room. */
const BYTES_PER_PING = 450;

function settings(backend: Backend) {
  const pg = backend === 'postgres';
  const p = pg ? 'BENCH_SCALE_' : 'BENCH_SCALE_PGLITE_';
  return {
    pings: num(`${p}PINGS`, pg ? 100_000_000 : 1_000_000),
    weblogs: num(`${p}WEBLOGS`, pg ? 10_000_000 : 100_000),
    hourWeblogs: num(`${p}HOUR_WEBLOGS`, pg ? 100_000 : 50_000),
    archivePings: num(`${p}ARCHIVE_PINGS`, pg ? 1_000_000 : 250_000),
    migratePings: num(pg ? 'BENCH_SCALE_MIGRATE_PINGS' : 'BENCH_SCALE_PGLITE_MIGRATE_PINGS', pg ? 10_000_000 : 1_000_000),
    duration: num('BENCH_DURATION', 8),
    runs: num('BENCH_RUNS', 3),
    warmup: num('BENCH_WARMUP', 3),
    lookups: num('BENCH_SCALE_LOOKUPS', 200),
    steps: new Set((process.env.BENCH_SCALE_STEPS || STEPS.join(',')).split(',').map((s) => s.trim()) as Step[]),
  };
}
type Settings = ReturnType<typeof settings>;

interface RenderPair {
  small: ProbeResult[];
  big: ProbeResult[];
}

interface BackendResult {
  backend: Backend;
  s: Settings;
  fill?: FillTimings;
  smallFill?: FillTimings;
  sizes?: Sizes;
  loadAtFill?: string;
  intake?: IntakeResult & { load: string };
  changes?: RenderPair & { load: string };
  archive?: RenderPair & { load: string };
  lookup?: { small: { hot: Lookup; few: Lookup }; big: { hot: Lookup; few: Lookup }; load: string; smallFill: FillTimings };
  retention?: PruneUnderLoad & { load: string; partitionsBefore: number; partitionsAfter: number };
  migrate?: { emptyMs: number; bigMs: number; load: string };
  migrate011?:
    | { pings: number; fill: FillTimings; ms: number; out: string; load: string; failed?: { ms: number; error: string } }
    | { skipped: string };
  seconds: number;
}

/**
 * pingd serving a database with the renderer and retention off (the intake scenarios' setting). Tried up to
 * five times: on a loaded machine, opening the embedded database has overrun Fastify's 10 s plugin timeout
 * ("Plugin did not start in time: 'db'").
 */
async function serve(db: ScaleDb, extra: Record<string, string> = {}): Promise<Child> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startPingd({
        env: { RENDER_SCHEDULER: 'false', RETENTION_DAYS: '0', ARCHIVE_RETENTION_DAYS: '0', ...extra, ...db.env },
      });
    } catch (err) {
      if (attempt >= 5 || !/did not start in time/.test((err as Error).message)) throw err;
      log(`  pingd did not start (attempt ${attempt}): ${(err as Error).message.split('\n')[1] ?? ''}; again`);
    }
  }
}

function checkDisk(pings: number): void {
  const fs = statfsSync(ROOT);
  const free = fs.bavail * fs.bsize;
  const need = pings * BYTES_PER_PING;
  if (need > free * 0.9)
    throw new Error(
      `${pings.toLocaleString('en-US')} pings need about ${(need / 2 ** 30).toFixed(0)} GiB; ${(free / 2 ** 30).toFixed(0)} GiB are free: set BENCH_SCALE_PINGS lower`,
    );
}

async function renderPair(
  kind: 'changes' | 'archive',
  small: ScaleDb,
  smallAt: number,
  smallHour: number,
  big: ScaleDb,
  bigAt: number,
  bigHour: number,
): Promise<RenderPair> {
  const out: RenderPair = { small: [], big: [] };
  // Twice each, alternating: the first render of each also pays for reading the hour from disk.
  for (let i = 0; i < 2; i++) {
    out.small.push(await runProbe(kind, small.target, smallAt, smallHour));
    out.big.push(await runProbe(kind, big.target, bigAt, bigHour));
    log(
      `    ${kind} run ${i + 1}: hours only ${out.small[i].ms} ms (peak ${out.small[i].peakMb} MB), big ${out.big[i].ms} ms (peak ${out.big[i].peakMb} MB)`,
    );
  }
  return out;
}

async function runBackend(backend: Backend, adminUrl: string): Promise<BackendResult> {
  const s = settings(backend);
  const t0 = performance.now();
  const dbs: ScaleDb[] = [];
  const servers: Child[] = [];
  const make = async (tag: string) => {
    const d = await createScaleDatabase(backend, adminUrl, tag);
    dbs.push(d);
    return d;
  };
  const stopAll = async () => {
    for (const c of servers.splice(0)) await c.stop();
  };
  try {
    const r: BackendResult = { backend, s, seconds: 0 };
    // The big database and its empty counterparts, unless only migration 011 is measured.
    if (BIG_STEPS.some((x) => s.steps.has(x))) {
      if (backend === 'postgres') checkDisk(s.pings);
      const empty = await make('empty');
      const small = await make('hours');
      const big = await make('big');
      for (const d of [empty, small, big]) await pingdCommand(['migrate'], d.env);
      const at = Date.now();
      const spec: FillSpec = {
        pings: s.pings,
        weblogs: s.weblogs,
        hourWeblogs: s.hourWeblogs,
        archivePings: s.archivePings,
        at,
        chunk: backend === 'pglite' ? 250_000 : 2_000_000,
      };
      log(`${backend}: filling ${s.pings.toLocaleString('en-US')} pings of ${s.weblogs.toLocaleString('en-US')} weblogs (load ${load()})…`);
      const loadAtFill = load();
      const fill = await fillDatabase(big, spec, log);
      log(`  filled in ${fill.seconds} s (${fill.insertRate.toLocaleString('en-US')} pings/s inserted; load ${load()})`);
      const smallSpec: FillSpec = {
        pings: s.hourWeblogs + s.archivePings,
        weblogs: s.hourWeblogs,
        hourWeblogs: s.hourWeblogs,
        archivePings: s.archivePings,
        at,
      };
      const smallFill = await fillDatabase(small, smallSpec, () => undefined);
      const sizes = (await runProbe('sizes', big.target)).sizes!;
      Object.assign(r, { fill, smallFill, sizes, loadAtFill });

      if (s.steps.has('render')) {
        log(`  render (load ${load()})`);
        const l = load();
        r.changes = { ...(await renderPair('changes', small, at, 0, big, at, 0)), load: l };
        r.archive = {
          ...(await renderPair('archive', small, at, smallFill.layout.archiveHour, big, at, fill.layout.archiveHour)),
          load: load(),
        };
      }

      if (s.steps.has('lookup') || s.steps.has('intake')) {
        const pe = await serve(empty);
        servers.push(pe);
        const ps = await serve(small);
        servers.push(ps);
        const pb = await serve(big);
        servers.push(pb);
        if (s.steps.has('lookup')) {
          log(`  lookups (load ${load()})`);
          const l = load();
          const path = (u: string) => `/weblog?url=${encodeURIComponent(u)}`;
          const small2 = {
            hot: await sequentialGets(ps.url, path(smallFill.hotWeblog.url), s.lookups),
            few: await sequentialGets(ps.url, path(smallFill.fewWeblog.url), s.lookups),
          };
          const big2 = {
            hot: await sequentialGets(pb.url, path(fill.hotWeblog.url), s.lookups),
            few: await sequentialGets(pb.url, path(fill.fewWeblog.url), s.lookups),
          };
          r.lookup = { small: small2, big: big2, load: l, smallFill };
          log(
            `    hot: hours only p99 ${small2.hot.p99.toFixed(1)} ms, big p99 ${big2.hot.p99.toFixed(1)} ms; few: ${small2.few.p99.toFixed(1)} / ${big2.few.p99.toFixed(1)} ms`,
          );
        }
        if (s.steps.has('intake')) {
          log(`  intake, empty and big in turn (load ${load()})`);
          const l = load();
          r.intake = {
            ...(await intakePairs(
              pe,
              pb,
              { runs: s.runs, seconds: s.duration, warmup: s.warmup, connections: 64, tag: `s${Date.now().toString(36)}` },
              log,
            )),
            load: l,
          };
        }
        await stopAll();
      }

      if (s.steps.has('retention')) {
        const before = (await runProbe('sizes', big.target)).sizes!;
        // The pass is scheduled for a second far enough ahead for pingd to start and wrk to get going (a start
        // that took too long is made again with more room).
        let firesAt = 0;
        let pb: Child | undefined;
        for (let ahead = 15_000; !pb; ahead += 15_000) {
          firesAt = Math.ceil((Date.now() + ahead) / 1000) * 1000;
          log(`  retention: RETENTION_DAYS=29, pass at ${new Date(firesAt).toISOString()} (load ${load()})`);
          const c = await serve(big, { RETENTION_DAYS: '29', RETENTION_CRON: `${new Date(firesAt).getUTCSeconds()} * * * * *` });
          if (Date.now() < firesAt - 5000 || ahead >= 45_000) pb = c;
          else await c.stop();
        }
        const l = load();
        servers.push(pb);
        const pr = await intakeDuringPrune(
          pb,
          firesAt,
          { slice: 2, connections: 64, afterSlices: 3, timeoutSec: 1800, tag: `r${Date.now().toString(36)}` },
          log,
        );
        await stopAll();
        const after = (await runProbe('sizes', big.target)).sizes!;
        r.retention = { ...pr, load: l, partitionsBefore: before.partitions, partitionsAfter: after.partitions };
        log(`    pass: ${pr.seconds.toFixed(2)} s, ${pr.pingsDeleted.toLocaleString('en-US')} pings deleted`);
      }

      if (s.steps.has('migrate')) {
        const l = load();
        const e = await pingdCommand(['migrate'], empty.env);
        const b = await pingdCommand(['migrate'], big.env);
        r.migrate = { emptyMs: e.ms, bigMs: b.ms, load: l };
        log(`  pingd migrate: empty ${Math.round(e.ms)} ms, big ${Math.round(b.ms)} ms`);
      }
      // The big database goes before the next one is filled: disk.
      for (const d of dbs.splice(0)) await d.drop();
    }

    if (s.steps.has('migrate011')) {
      if (!listMigrations().some((m) => m.version === PARTITION_MIGRATION))
        r.migrate011 = { skipped: `no migration ${PARTITION_MIGRATION} in migrations/` };
      else {
        const m = await make('m011');
        await migrateUpTo(m, PARTITION_MIGRATION - 1);
        const mw = Math.max(1000, Math.round(s.migratePings / 10));
        log(`  migration 011: filling ${s.migratePings.toLocaleString('en-US')} pings at the schema of migration 010 (load ${load()})`);
        const mf = await fillDatabase(
          m,
          {
            pings: s.migratePings,
            weblogs: mw,
            hourWeblogs: Math.min(s.hourWeblogs, mw),
            archivePings: Math.min(s.archivePings, Math.round(s.migratePings / 10)),
            at: Date.now(),
            chunk: backend === 'pglite' ? 250_000 : 2_000_000,
          },
          log,
        );
        const l = load();
        // With pingd's defaults first: DB_TIMEOUT_MS (5 s) also bounds each statement of `pingd migrate`, and a
        // migration that runs longer fails (it is rolled back: the database is as before). Then, if it failed,
        // with the longest timeout the setting allows.
        let failed: { ms: number; error: string } | undefined;
        const t = performance.now();
        let run = await pingdCommand(['migrate'], m.env).catch((err: Error) => {
          failed = { ms: performance.now() - t, error: err.message.split('\n')[0].replace(/^pingd migrate exited with \d+: /, '') };
          return undefined;
        });
        if (!run) {
          log(`    pingd migrate failed after ${Math.round(failed!.ms)} ms (${failed!.error}); again with DB_TIMEOUT_MS=600000`);
          run = await pingdCommand(['migrate'], { ...m.env, DB_TIMEOUT_MS: '600000' });
        }
        r.migrate011 = { pings: s.migratePings, fill: mf, ms: run.ms, out: run.out, load: l, failed };
        log(`    pingd migrate: ${Math.round(run.ms)} ms (${run.out})`);
      }
    }
    r.seconds = (performance.now() - t0) / 1000;
    return r;
  } finally {
    await stopAll();
    for (const d of dbs) await d.drop().catch((err: Error) => log(`dropping ${d.name} failed: ${err.message}`));
  }
}

// ---------------------------------------------------------------------------------------------------------
// Report

const f0 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : Math.round(n).toLocaleString('en-US'));
const f1 = (n: number | undefined) =>
  n === undefined || !Number.isFinite(n) ? '–' : n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US');
const m = (n: number) => (n >= 1e6 ? `${+(n / 1e6).toFixed(1)}M` : `${+(n / 1e3).toFixed(0)}k`);
const gib = (b: number) => (b >= 2 ** 30 ? `${(b / 2 ** 30).toFixed(2)} GiB` : `${(b / 2 ** 20).toFixed(0)} MiB`);
const ratio = (a: number, b: number) => (Number.isFinite(a / b) ? `${(a / b).toFixed(2)}×` : '–');
const best = (xs: ProbeResult[]) => Math.min(...xs.map((x) => x.ms ?? Infinity));
const peak = (xs: ProbeResult[]) => Math.max(...xs.map((x) => x.peakMb ?? 0));

const LABEL = { postgres: 'PostgreSQL 15', pglite: 'PGlite (embedded)' } as const;

function bigLines(r: BackendResult, fill: FillTimings, size: Sizes): string[] {
  const { s } = r;
  const perM = (b: number) => gib((b / size.pings) * 1e6);
  const lines: string[] = [];
  lines.push(`#### ${LABEL[r.backend]}: ${m(fill.pings)} pings, ${m(fill.weblogs)} weblogs`, '');
  lines.push(
    `Generated in **${f0(fill.seconds)} s** (load ${r.loadAtFill}): pings inserted at ${f0(fill.insertRate)}/s${fill.insertCpuSec ? ` (${f1((fill.insertCpuSec * 1e6) / fill.pings)} CPU µs each in the PostgreSQL backend)` : ''}; ` +
      Object.entries(fill.steps)
        .filter(([k]) => !k.startsWith('pings:'))
        .map(([k, v]) => `${k} ${f1(v)} s`)
        .join(', ') +
      `. ${fill.partitioned ? 'Partitioned log: daily partitions made by ensureLogPartitions before the insert.' : 'Unpartitioned log.'} ` +
      `Hot weblog ${fill.hotWeblog.url} has ${f0(fill.hotWeblog.pings)} pings; the "few" one ${fill.fewWeblog.url} ${f0(fill.fewWeblog.pings)}.`,
    '',
  );
  lines.push('| measurement | empty database | big database | big / empty | target |', '| --- | ---: | ---: | ---: | --- |');
  if (r.intake) {
    const i = r.intake;
    const pass = i.ratio >= 0.9;
    lines.push(
      `| durable intake, pings/s (median of ${i.pairs.length} × ${s.duration} s, 64 connections; load ${i.load}) | ${f0(i.emptyRps)} | ${f0(i.bigRps)} | **${i.ratio.toFixed(2)}** (runs ${i.ratios.map((x) => x.toFixed(2)).join(', ')}) | ≥ 0.90 ${pass ? '✅' : '❌'} |`,
    );
    lines.push(`| durable intake p99 ms | ${f1(i.emptyP99)} | ${f1(i.bigP99)} | ${ratio(i.bigP99, i.emptyP99)} | |`);
  }
  if (r.changes) {
    const c = r.changes;
    const pass = best(c.big) <= best(c.small) * 1.1;
    lines.push(
      `| changes.xml render, ${f0(c.big[0].entries)} weblogs in the hour: ms, best of 2 (runs; a renderer's second tick; load ${c.load}) | ${f0(best(c.small))} (${c.small.map((x) => x.ms).join(', ')}) | ${f0(best(c.big))} (${c.big.map((x) => x.ms).join(', ')}) | **${ratio(best(c.big), best(c.small))}** | ≤ 1.10× ${pass ? '✅' : '❌'} |`,
    );
    const first = (xs: ProbeResult[]) => Math.min(...xs.map((x) => x.firstMs ?? Infinity));
    if (r.backend === 'pglite')
      lines.push(
        `| changes.xml: a renderer's first tick, ms, best of 2 (with the ANALYZE of weblogs and pings it runs every 10 minutes on the embedded database) | ${f0(first(c.small))} | ${f0(first(c.big))} | ${ratio(first(c.big), first(c.small))} | |`,
      );
    lines.push(
      `| changes.xml render: peak RSS MB of the rendering process | ${f0(peak(c.small))} | ${f0(peak(c.big))} | ${ratio(peak(c.big), peak(c.small))} | |`,
    );
  }
  if (r.archive) {
    const a = r.archive;
    lines.push(
      `| closed archive hour, ${f0(s.archivePings)} pings (${f0(a.big[0].entries)} entries): render ms, best of 2 (runs; load ${a.load}) | ${f0(best(a.small))} (${a.small.map((x) => x.ms).join(', ')}) | ${f0(best(a.big))} (${a.big.map((x) => x.ms).join(', ')}) | ${ratio(best(a.big), best(a.small))} | |`,
    );
    lines.push(
      `| closed archive hour: peak RSS MB of the rendering process${r.backend === 'pglite' ? ' (PGlite inside it)' : ''} | ${f0(peak(a.small))} | ${f0(peak(a.big))} | ${ratio(peak(a.big), peak(a.small))} | |`,
    );
  }
  if (r.lookup) {
    const l = r.lookup;
    lines.push(
      `| GET /weblog?url= p50 / p99 ms, weblog with many pings (${f0(l.smallFill.hotWeblog.pings)} / ${f0(fill.hotWeblog.pings)}); ${s.lookups} one at a time, load ${l.load} | ${f1(l.small.hot.p50)} / ${f1(l.small.hot.p99)} | ${f1(l.big.hot.p50)} / **${f1(l.big.hot.p99)}** | ${ratio(l.big.hot.p99, l.small.hot.p99)} | |`,
    );
    lines.push(
      `| GET /weblog?url= p50 / p99 ms, weblog with few pings (${f0(l.smallFill.fewWeblog.pings)} / ${f0(fill.fewWeblog.pings)}) | ${f1(l.small.few.p50)} / ${f1(l.small.few.p99)} | ${f1(l.big.few.p50)} / **${f1(l.big.few.p99)}** | ${ratio(l.big.few.p99, l.small.few.p99)} | |`,
    );
  }
  if (r.migrate)
    lines.push(
      `| \`pingd migrate\` (nothing pending), wall ms of the command (load ${r.migrate.load}) | ${f0(r.migrate.emptyMs)} | ${f0(r.migrate.bigMs)} | ${ratio(r.migrate.bigMs, r.migrate.emptyMs)} | |`,
    );
  lines.push('');
  if (r.retention) {
    const t = r.retention;
    const p99 = (xs: { p99: number }[]) => (xs.length ? Math.max(...xs.map((x) => x.p99)) : NaN);
    const maxMs = (xs: { max: number }[]) => (xs.length ? Math.max(...xs.map((x) => x.max)) : NaN);
    const rps = (xs: { rps: number }[]) => median(xs.map((x) => x.rps));
    lines.push(
      `Retention (RETENTION_DAYS=29 over the month, the pass pingd's scheduler runs; load ${t.load}): **${f1(t.seconds)} s**, ${f0(t.pingsDeleted)} pings deleted (the oldest day: ${f0((fill.layout.segments[0].count * 86_400_000) / Math.max(1, fill.layout.archiveHour - fill.layout.start))} generated), ${t.partitionsBefore} → ${t.partitionsAfter} partitions of pings (pingd also makes the days ahead when it starts). ` +
        `Intake in 2 s wrk slices at 64 connections: before the pass ${f0(rps(t.before))} pings/s, worst p99 ${f1(p99(t.before))} ms; **during it (${t.during.length} slices) ${f0(rps(t.during))} pings/s, worst p99 ${f1(p99(t.during))} ms, slowest ping ${f0(maxMs(t.during))} ms**; after it ${f0(rps(t.after))} pings/s, worst p99 ${f1(p99(t.after))} ms; ${t.failures} failed requests.`,
      '',
    );
  }
  lines.push(
    `Size: the ping log ${gib(size.pingsBytes)} in ${size.partitions} ${size.partitions === 1 ? 'table' : 'partitions'} (heap ${gib(size.pingsHeapBytes)}, indexes ${gib(size.pingsIndexBytes)}) = **${perM(size.pingsBytes)} per million pings** (heap ${perM(size.pingsHeapBytes)}, indexes ${perM(size.pingsIndexBytes)}); weblogs ${gib(size.weblogsBytes)}; the whole database ${gib(size.databaseBytes)} (${perM(size.databaseBytes)} per million pings).`,
    '',
  );
  return lines;
}

function backendSection(r: BackendResult): string {
  const lines = r.fill && r.sizes ? bigLines(r, r.fill, r.sizes) : [`#### ${LABEL[r.backend]}`, ''];
  if (r.migrate011) {
    if ('skipped' in r.migrate011) lines.push(`Migration 011 on a filled database: skipped (${r.migrate011.skipped}).`, '');
    else {
      const x = r.migrate011;
      const first = x.failed
        ? `with pingd's defaults it **failed after ${f1(x.failed.ms / 1000)} s** ("${x.failed.error}": DB_TIMEOUT_MS, 5 s, bounds each statement of the migration too; rolled back), then with DB_TIMEOUT_MS=600000 `
        : '';
      lines.push(
        `Migration 011 (partitioned logs) on a database of ${m(x.fill.pings)} pings and ${m(x.fill.weblogs)} weblogs made at the schema of migration 010 (filled in ${f0(x.fill.seconds)} s): \`pingd migrate\` ${first}took **${f1(x.ms / 1000)} s** (load ${x.load}; "${x.out.replace(/\n/g, ' ')}").`,
        '',
      );
    }
  }
  lines.push(`Wall time of this backend's part: ${f0(r.seconds)} s.`, '');
  return lines.join('\n');
}

export async function runScale(o: DirectOptions): Promise<boolean> {
  const started = new Date();
  const load0 = load();
  const commit = git(PINGD_ROOT, ['rev-parse', '--short', 'HEAD']);
  const dirty = git(PINGD_ROOT, ['status', '--porcelain', '--', 'src', 'migrations']);
  const stale = await dropStaleScaleDatabases(o.databaseUrl).catch(() => []);
  if (stale.length) log(`dropped databases of killed runs: ${stale.join(', ')}`);
  const sections: string[] = [];
  let ok = true;
  for (const backend of o.backends) {
    try {
      const r = await runBackend(backend, o.databaseUrl);
      sections.push(backendSection(r));
      if (r.intake && r.intake.failures > 0) ok = false;
      if (r.retention && r.retention.failures > 0) ok = false;
    } catch (err) {
      log(`${backend}: failed: ${(err as Error).stack ?? err}`);
      sections.push(`#### ${backend}: failed\n\n${(err as Error).message.split('\n')[0]}\n`);
      ok = false;
    }
  }
  const cpu = cpus();
  const md = [
    `### Scale benchmark ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `pingd of ${PINGD_ROOT === ROOT ? 'this checkout' : PINGD_ROOT} at ${commit || '?'}${dirty ? ` (uncommitted changes in ${dirty.split('\n').length} file(s) under src/ and migrations/)` : ''}, run under tsx. ` +
      `Machine: ${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, shared with other work; Node ${process.version}; load average at start ${load0}, at end ${load()}. ` +
      `The month: 30 whole UTC days and today up to the run, pings in id order = time order (bench/lib/scale-fill.ts): half the weblogs ping once, the other half share the rest with a skew (the hottest tens of thousands of pings at 100M), one closed hour (48 h ago) holds the archive hour's pings, the last hour one ping from each of its weblogs. ` +
      `"Empty" is a freshly migrated database for intake and \`pingd migrate\`; for the renders and lookups it holds just those two hours (the same last hour and archive hour). pingd serves with RENDER_SCHEDULER=false and retention off except in the retention pass; intake is XML-RPC weblogUpdates.ping naming a new weblog each (wrk, 1 thread, 64 connections), empty and big in alternation.`,
    '',
    ...sections,
  ].join('\n');
  console.log(md);
  if (o.write)
    log(
      `results written to ${recordRun({ scenario: 'scale', title: 'A month of pings against an empty database', started, markdown: md, backends: o.backends }).join(', ')}`,
    );
  return ok && sections.length > 0;
}

if (isMain(import.meta.url)) runDirect('scale', runScale);
