// Owns the `render-tick` scenario (issue 42, item 1): the renderer's CPU per tick as deployed (every
// published document, as `pingd serve` renders them on RENDER_CRON) while pings arrive at a constant rate,
// with 10k, 100k and 720k weblogs already pinged in the open hour. A render that costs what changed is flat
// across the three; one that re-renders the hour grows with it.
//
// Each size gets a database of its own, seeded in SQL: the hour (a past one, so nothing else is in it) holds
// the size in weblogs pinged once each over the last hour (real time: the throttles compare the database
// clock with the renderings' dates), the last five minutes at the constant rate and the rest spread before
// them. Then BENCH_RENDER_TICK_TICKS ticks, RENDER_CRON's 10 s apart: before each, the rate's new weblogs
// since the last one are inserted. The CPU of a tick is this process's (the embedded database's thread
// included) and the PostgreSQL backends' over the tick alone; the first tick (which reads the hour into
// the caches) is reported apart.
//
//   BENCH_SCENARIOS=render-tick npm run bench [-- --write]    (or: node --import tsx bench/render-tick.ts [--write])
//
// Environment: BENCH_BACKENDS, BENCH_DATABASE_URL, BENCH_RENDER_TICK_SIZES (10000,100000,720000),
// BENCH_RENDER_TICK_RATE (new weblogs a second, 200: the seeds' era at its peak), BENCH_RENDER_TICK_TICKS (9).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, cpus, totalmem, loadavg } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openDatabase, type Db } from '../src/platform/db/database.js';
import { migrate } from '../src/platform/db/migrate.js';
import { Renderer } from '../src/publishing/render/renderer.js';
import { cadenceSeconds } from '../src/publishing/render/schedule.js';
import { loadConfig } from '../src/platform/config.js';
import { publishedDocuments } from '../src/publishing/documents/published.js';
import { listingFor } from '../src/publishing/documents/listing.js';
import { HOUR_MS } from '../src/publishing/documents/archive.js';
import { cpuMicros } from './lib/cpu.js';
import { median } from './lib/load.js';
import { recordRun } from './lib/results.js';
import { git } from './lib/git.js';
import { ROOT } from './lib/servers.js';
import { isMain, runDirect, type DirectOptions } from './lib/run-direct.js';

const env = process.env;
const log = (s: string) => process.stderr.write(`${s}\n`);
const SIZES = (env.BENCH_RENDER_TICK_SIZES || '10000,100000,720000').split(',').map(Number);
const RATE = Number(env.BENCH_RENDER_TICK_RATE || 200);
const TICKS = Number(env.BENCH_RENDER_TICK_TICKS || 9);
const PERIOD_MS = 10_000;
/** The last ticks' window: the open hour's end is this far after the first tick. */
const RECENT_SEC = 300;

interface TickFigure {
  cpuMs: number;
  wallMs: number;
  /** document:entries:ms of each rendering of the tick (a paced one's ms: its slices'). */
  rendered: string[];
  /** Documents whose paced render went on for a slice in the tick without ending (render/paced.ts). */
  inProgress: string[];
  closedHours: number;
}

/** `n` weblogs pinged once each, evenly over (fromMs, toMs]. */
async function seedWeblogs(db: Db, prefix: string, n: number, fromMs: number, toMs: number): Promise<void> {
  if (n <= 0) return;
  // In slices: one statement of 720,000 rows is heavy on the embedded database.
  const slice = 50_000;
  for (let from = 1; from <= n; from += slice) {
    await db.query(
      `with s as (
         select i, timestamptz 'epoch' + ($2::bigint + (i * ($3::bigint - $2::bigint) / $1)) * interval '1 millisecond' as at
           from generate_series($5::int, $6::int) i
       ), w as (
         insert into weblogs (url, name, rss_url, first_ping_at, last_ping_at, ping_count)
         select 'http://' || $4 || i || '.blogs.example.com/', 'Weblog number ' || i || ' of ' || $4,
                case when i % 3 = 0 then 'http://' || $4 || i || '.blogs.example.com/feed.xml' end, at, at, 1 from s
         returning id, url, name, rss_url, last_ping_at
       )
       insert into pings (weblog_id, received_at, method, name, url, rss_url)
       select id, last_ping_at, 'ping', name, url, rss_url from w`,
      [n, fromMs, toMs, prefix, from, Math.min(n, from + slice - 1)],
    );
  }
}

/** CPU µs of this process (all its threads) and of the database's server processes. */
async function cpuNow(admin: pg.Client | null, dbName: string | null): Promise<number> {
  const u = process.cpuUsage();
  let us = u.user + u.system;
  if (admin && dbName) {
    const r = await admin.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1', [dbName]);
    for (const { pid } of r.rows) us += cpuMicros(pid);
  }
  return us;
}

async function measureSize(
  backend: 'postgres' | 'pglite',
  size: number,
  adminUrl: string,
): Promise<{ first: TickFigure; ticks: TickFigure[]; skipped: number }> {
  let skipped = 0;
  let db: Db;
  let admin: pg.Client | null = null;
  let dbName: string | null = null;
  let drop: () => Promise<void>;
  if (backend === 'postgres') {
    dbName = `pingd_bench_tick_${Date.now()}_${process.pid}`;
    admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`create database ${dbName}`);
    const u = new URL(adminUrl);
    u.pathname = `/${dbName}`;
    db = await openDatabase({ databaseUrl: u.href, dataDir: '', poolMax: 4, timeoutMs: 600_000 });
    const name = dbName;
    const a = admin;
    drop = async () => {
      await a.query(`drop database if exists ${name} with (force)`);
      await a.end();
    };
  } else {
    const dir = mkdtempSync(join(tmpdir(), 'pingd-bench-tick-'));
    db = await openDatabase({ databaseUrl: undefined, dataDir: dir, poolMax: 4, timeoutMs: 600_000 });
    drop = async () => rmSync(dir, { recursive: true, force: true });
  }
  try {
    await migrate(db);
    // The last hour, in real time: the renderer reads the database clock, and a live document's throttle
    // compares it with the rendering's `updated`, so renders at injected times in the past were never
    // throttled. The open hour's archive holds the part of it since the top of the UTC hour.
    const t0 = Date.now();
    const recent = Math.min(size, RATE * RECENT_SEC);
    const s0 = performance.now();
    await seedWeblogs(db, `old${size}-`, size - recent, t0 - HOUR_MS + 60_000, t0 - RECENT_SEC * 1000);
    await seedWeblogs(db, `new${size}-`, recent, t0 - RECENT_SEC * 1000, Date.now());
    if (backend === 'postgres') await db.exec('vacuum analyze');
    else await db.exec('analyze weblogs, pings');
    log(`  ${backend}, ${size.toLocaleString('en-US')} weblogs in the hour: seeded in ${Math.round(performance.now() - s0)} ms`);
    const quiet = {
      info: () => undefined,
      warn: () => undefined,
      error: (o: object, m?: string) => log(`  error: ${m} ${JSON.stringify(o)}`),
    };
    // As `pingd serve` runs it: the defaults' cadence (the throttle) and RENDER_SLICE_MS (the pacing).
    const config = loadConfig({});
    let inProgress: string[] = [];
    const renderer = new Renderer(publishedDocuments(listingFor('mark'), 'http://127.0.0.1:8080/'), {
      db,
      log: quiet,
      deltaWindowSec: config.PUBLISH_DELTA_WINDOW,
      cadenceSec: cadenceSeconds(config.RENDER_CRON),
      sliceMs: config.RENDER_SLICE_MS,
      metrics: {
        rendered: () => undefined,
        outcome: (document, outcome) => void (outcome === 'in_progress' && inProgress.push(document)),
        lockBusy: () => undefined,
      },
    });
    const tick = async (): Promise<TickFigure> => {
      inProgress = [];
      const c0 = await cpuNow(admin, dbName);
      const w0 = performance.now();
      const r = await renderer.tick();
      const wallMs = performance.now() - w0;
      const cpuMs = ((await cpuNow(admin, dbName)) - c0) / 1000;
      if (!r) throw new Error('the render lock was busy');
      for (const f of r.failed) log(`  failed ${f.path}: ${f.error}`);
      return {
        cpuMs,
        wallMs,
        rendered: r.rendered.map((x) => `${x.closed ? 'closing ' : ''}${x.document}:${x.entries}:${x.ms}`),
        inProgress,
        closedHours: r.closedHours,
      };
    };
    // The first tick closes the hour before (where the seeded hour began) and reads the open one whole.
    const first = await tick();
    const ticks: TickFigure[] = [];
    let next = performance.now() + PERIOD_MS;
    let seededTo = Date.now();
    for (let k = 1; k <= TICKS; k++) {
      const wait = next - performance.now();
      if (wait > 0) await new Promise((res) => setTimeout(res, wait));
      next = Math.max(next + PERIOD_MS, performance.now());
      // The rate's pings since the last tick, just before this one (as intake would have stored them).
      const now = Date.now();
      await seedWeblogs(db, `t${size}-${k}-`, Math.round((RATE * (now - seededTo)) / 1000), seededTo, now);
      seededTo = now;
      const f = await tick();
      // A tick that closed an hour (the UTC hour turned meanwhile) renders that hour whole: reported apart.
      if (f.closedHours > 0) {
        log(`    tick ${k} closed an hour (${Math.round(f.cpuMs)} ms CPU): left out`);
        skipped++;
        continue;
      }
      ticks.push(f);
      log(
        `    tick ${k}: ${Math.round(f.cpuMs)} ms CPU, ${Math.round(f.wallMs)} ms wall; rendered (document:entries:ms) ${f.rendered.map((x) => x.replace(/\.\d+$/, '')).join(', ') || 'nothing'}${f.inProgress.length ? `; a slice of ${f.inProgress.join(', ')}` : ''}`,
      );
    }
    await renderer.close();
    return { first, ticks, skipped };
  } finally {
    await db.close();
    await drop();
  }
}

const f0 = (x: number) => Math.round(x).toLocaleString('en-US');

export async function runRenderTick(o: DirectOptions): Promise<boolean> {
  const started = new Date();
  const loadStart = loadavg();
  const lines: string[] = [];
  for (const backend of o.backends) {
    log(
      `render-tick on ${backend}: ${SIZES.join(', ')} weblogs in the hour, ${RATE} new weblogs/s, ${TICKS} ticks ${PERIOD_MS / 1000} s apart`,
    );
    const rows: string[][] = [];
    const perSize: number[] = [];
    for (const size of SIZES) {
      const r = await measureSize(backend, size, o.databaseUrl);
      const cpu = r.ticks.map((t) => t.cpuMs);
      const sum = cpu.reduce((a, b) => a + b, 0);
      perSize.push(sum / cpu.length);
      const rendered = new Map<string, { n: number; ms: number[]; entries: number }>();
      const slices = new Map<string, number>();
      for (const t of r.ticks) for (const d of t.inProgress) slices.set(d, (slices.get(d) ?? 0) + 1);
      for (const t of r.ticks)
        for (const x of t.rendered) {
          const [doc, entries, ms] = x.split(':');
          const e = rendered.get(doc) ?? { n: 0, ms: [], entries: 0 };
          e.n++;
          e.ms.push(Number(ms));
          e.entries = Number(entries);
          rendered.set(doc, e);
        }
      rows.push([
        size.toLocaleString('en-US'),
        `${f0(r.first.cpuMs)}${r.skipped ? ` (${r.skipped} tick${r.skipped > 1 ? 's' : ''} that closed an hour left out)` : ''}`,
        `**${f0(sum / cpu.length)}**`,
        f0(median(cpu)),
        f0(Math.max(...cpu)),
        f0(median(r.ticks.map((t) => t.wallMs))),
        [
          ...[...rendered].map(([d, e]) => `${d} ×${e.n} (${e.entries.toLocaleString('en-US')} entries, ${f0(median(e.ms))} ms)`),
          ...[...slices].map(([d, n]) => `${d} went on for a slice in ${n} more tick${n > 1 ? 's' : ''}`),
        ].join('; '),
      ]);
    }
    const flat = perSize[perSize.length - 1] / perSize[0];
    lines.push(
      `#### ${backend === 'postgres' ? 'PostgreSQL' : 'Embedded (PGlite)'}`,
      '',
      "| weblogs in the hour | first tick, CPU ms | CPU ms a tick (mean) | median | max | wall ms a tick (median) | renderings in the ticks (entries at the last, median ms: a paced one's slices) |",
      '| ---: | ---: | ---: | ---: | ---: | ---: | --- |',
      ...rows.map((r) => `| ${r.join(' | ')} |`),
      '',
      `Largest hour against the smallest, CPU a tick: **${flat.toFixed(1)}×** (flat would be ~1×; target: flat) ${flat <= 1.5 ? '✅' : '❌'}.`,
      '',
    );
  }
  const end = loadavg();
  const md = [
    `### Renderer CPU per tick ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `pingd at ${git(ROOT, ['rev-parse', '--short', 'HEAD'])}, the renderer as \`pingd serve\` runs it (every published document, verification's listing \`mark\`, the defaults' RENDER_CRON and RENDER_SLICE_MS), in this process; ${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}; load average at start ${loadStart.map((x) => x.toFixed(2)).join(' ')}, at end ${end.map((x) => x.toFixed(2)).join(' ')}. ${RATE} new weblogs a second arrive; ${TICKS} ticks ${PERIOD_MS / 1000} s apart in real time, the hour's weblogs pinged over the hour before the first (the open hour's archive holds those since the top of the UTC hour). CPU is this process's (the embedded database's thread included) and the PostgreSQL backends', over the tick alone.`,
    '',
    ...lines,
  ].join('\n');
  console.log(md);
  if (o.write)
    log(
      `results written to ${recordRun({ scenario: 'render-tick', title: 'Renderer CPU per tick', started, markdown: md, backends: o.backends, loadAtStart: loadStart[0] }).join(', ')}`,
    );
  return true;
}

if (isMain(import.meta.url)) runDirect('render-tick', runRenderTick);
