// Owns the render profile (issue "Scale", "Fresh documents under sustained load"): where a render of each
// weblogUpdates document goes — wall, CPU (pingd's process, and PostgreSQL's backends on the server), the
// statements it sent and the time spent waiting on them, peak RSS — with N weblogs pinged in the last five
// minutes (so shortChanges.xml, changes.xml and the hour's archive each hold N), and the latency of pings
// sent at a steady rate while each render runs (the embedded database must never hold the ping path).
//
//   node --import tsx bench/render-profile.ts
//   BENCH_RENDER_BACKENDS=pglite BENCH_RENDER_SIZES=45000 node --import tsx bench/render-profile.ts
//
// Environment: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres; a database
// bench_render_<pid> is created and dropped), BENCH_RENDER_BACKENDS (postgres,pglite), BENCH_RENDER_SIZES
// (45000,100000), BENCH_RENDER_RATE (pings/s sent during the second pass, 200), BENCH_RENDER_HOST
// (127.0.0.55), BENCH_RENDER_PASSES (2; 1 skips the pass under load), BENCH_RENDER_TRACE (1: time per statement), BENCH_RENDER_NODE_ARGS (extra node flags for the measuring
// child, e.g. `--cpu-prof --cpu-prof-dir=DIR`). Each (backend, size) is measured in a child process of its own, so peak RSS is its own.
// Prints one JSON line per result on stdout and a readable line on stderr.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openDatabase, type Db, type Queryable } from '../src/platform/db/database.js';
import { migrate } from '../src/platform/db/migrate.js';
import { loadConfig } from '../src/platform/config.js';
import { Renderer } from '../src/publishing/render/renderer.js';
import { HOUR_MS, hourStart } from '../src/publishing/documents/archive.js';
import { changesDocument, shortChangesDocument } from '../src/publishing/documents/changes.js';
import { DocumentRegistry } from '../src/publishing/documents/registry.js';
import type { LiveDocument } from '../src/publishing/documents/document.js';
import { cpuMicros } from './lib/cpu.js';

type Backend = 'postgres' | 'pglite';
const env = process.env;
const ADMIN_URL = env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const BACKENDS = (env.BENCH_RENDER_BACKENDS || 'postgres,pglite').split(',').map((s) => s.trim()) as Backend[];
const SIZES = (env.BENCH_RENDER_SIZES || '45000,100000').split(',').map(Number);
const RATE = Number(env.BENCH_RENDER_RATE || 200);
const HOST = env.BENCH_RENDER_HOST || '127.0.0.55';
/** 1: the renders alone only; 2 (default): then again under the ping load. */
const PASSES = Number(env.BENCH_RENDER_PASSES || 2);
// The pings are ten minutes into an hour two hours back: the windows and the hour are fixed whatever the
// clock does while measuring, and pings sent meanwhile (real time) fall outside them.
const AT_MS = hourStart(Date.now()) - 2 * HOUR_MS + 10 * 60_000;

const log = (s: string) => process.stderr.write(`${s}\n`);
const mb = (bytes: number) => Math.round(bytes / (1 << 20));

// ---------------------------------------------------------------------------------------------------------
// Fill: N weblogs, each pinged once, evenly over the five minutes before AT_MS.

async function fill(db: Db, n: number): Promise<void> {
  await db.query(
    `with s as (
       select i, timestamptz 'epoch' + ($2::bigint - 299000 + ((i - 1)::bigint * 298000 / $1)) * interval '1 millisecond' as at
         from generate_series(1, $1::int) i
     ), w as (
       insert into weblogs (url, name, rss_url, first_ping_at, last_ping_at, ping_count)
       select 'http://w' || i || '.profile.example.com/', 'Weblog number ' || i || ' & co',
              case when i % 3 = 0 then 'http://w' || i || '.profile.example.com/feed.xml' end, at, at, 1 from s
       returning id, url, name, rss_url, last_ping_at
     )
     insert into pings (weblog_id, received_at, method, name, url, rss_url)
     select id, last_ping_at, 'ping', name, url, rss_url from w`,
    [n, AT_MS],
  );
  await db.query('update ping_totals set n = n + $1 where slot = 0', [n]);
  await db.exec('analyze');
}

// ---------------------------------------------------------------------------------------------------------
// Child: the measurements of one (backend, size).

interface Counted {
  n: number;
  waitMs: number;
}

/** BENCH_RENDER_TRACE=1: time per statement, by its first words (printed after each render). */
const TRACE = env.BENCH_RENDER_TRACE === '1';
const traced = new Map<string, { n: number; ms: number }>();
function trace(sql: string, ms: number): void {
  if (!TRACE) return;
  const k = sql.replace(/\s+/g, ' ').trim().slice(0, 90);
  const e = traced.get(k) ?? { n: 0, ms: 0 };
  e.n++;
  e.ms += ms;
  traced.set(k, e);
}

/** The same database, counting statements and the time spent waiting on them. */
function counting(db: Db, c: Counted): Db {
  const wrapQ = (q: Queryable): Queryable => ({
    async query(sql, params, opts) {
      c.n++;
      const t = performance.now();
      try {
        return await q.query(sql, params, opts);
      } finally {
        c.waitMs += performance.now() - t;
        trace(sql, performance.now() - t);
      }
    },
    async exec(sql) {
      c.n++;
      const t = performance.now();
      try {
        return await q.exec(sql);
      } finally {
        c.waitMs += performance.now() - t;
        trace(sql, performance.now() - t);
      }
    },
  });
  const base = wrapQ(db);
  return Object.assign(Object.create(db) as Db, {
    kind: db.kind,
    query: base.query,
    exec: base.exec,
    transaction: <T>(fn: (tx: Queryable) => Promise<T>) => db.transaction((tx) => fn(wrapQ(tx))),
    withTryAdvisoryLock: <T>(key: number, fn: (q: Queryable) => Promise<T>) => db.withTryAdvisoryLock(key, (q) => fn(wrapQ(q))),
  });
}

async function backendPids(url: string | undefined): Promise<number[]> {
  if (!url) return [];
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query<{ pid: number }>(
      `select pid from pg_stat_activity where datname = current_database() and application_name = 'pingd'`,
    );
    return r.rows.map((x) => x.pid);
  } finally {
    await c.end();
  }
}

interface Job {
  name: string;
  run: (r: Renderer) => Promise<{ entries: number; bytes: number }>;
  renderer: Renderer;
}

function jobs(db: Db): Job[] {
  const live = (doc: LiveDocument): Job => ({
    name: doc.name,
    renderer: new Renderer(new DocumentRegistry([doc]), { db, log: quietLog, deltaWindowSec: 900 }),
    run: async (r) => {
      const out = await r.tick({ now: new Date(AT_MS), liveOnly: true, force: true });
      const x = out?.rendered[0];
      if (!x) throw new Error(`${doc.name} not rendered: ${JSON.stringify(out)}`);
      return { entries: x.entries, bytes: x.identityLength };
    },
  });
  return [
    live(shortChangesDocument()),
    live(changesDocument()),
    {
      name: 'archive (current hour)',
      renderer: new Renderer(new DocumentRegistry([]), { db, log: quietLog, deltaWindowSec: 900 }),
      run: async (r) => {
        const x = await r.renderHour(hourStart(AT_MS), { now: new Date(AT_MS) });
        if (!x || x === 'identical') throw new Error(`archive not rendered: ${String(x)}`);
        return { entries: x.entries, bytes: x.identityLength };
      },
    },
  ];
}

const quietLog = {
  info: () => undefined,
  warn: (o: object, m?: string) => log(`warn: ${m} ${JSON.stringify(o)}`),
  error: (o: object, m?: string) => log(`error: ${m} ${JSON.stringify(o)}`),
};

function emit(o: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(o)}\n`);
  log(
    `  ${Object.entries(o)
      .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
      .join(' ')}`,
  );
}

/** A steady stream of pings (a new weblog each) from a process of its own; latencies by send time. */
function startLoad(port: number): { stop: () => Promise<{ sentMs: number; ms: number; ok: boolean }[]> } {
  const p = spawn(process.execPath, ['--import', 'tsx', 'bench/render-profile.ts', '--load', String(port)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  return {
    stop: () =>
      new Promise((resolve) => {
        p.on('exit', () => resolve(JSON.parse(out || '[]')));
        p.stdin.end('stop\n');
      }),
  };
}

async function loadMain(port: number): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const results: { sentMs: number; ms: number; ok: boolean }[] = [];
  const t0 = Date.now();
  let i = 0;
  let stopping = false;
  const inflight = new Set<Promise<void>>();
  process.stdin.on('data', () => (stopping = true));
  const one = (n: number) =>
    new Promise<void>((resolve) => {
      const sent = Date.now();
      const body = `<?xml version="1.0"?>\n<methodCall>\n<methodName>weblogUpdates.ping</methodName>\n<params>\n<param><value><string>Load</string></value></param>\n<param><value><string>http://l${process.pid}-${n}.load.example.com/</string></value></param>\n</params></methodCall>\n`;
      const req = http.request(
        {
          host: HOST,
          port,
          path: '/RPC2',
          method: 'POST',
          agent,
          headers: { 'content-type': 'text/xml', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString()));
          res.on('end', () => {
            results.push({ sentMs: sent, ms: Date.now() - sent, ok: res.statusCode === 200 && text.includes('<boolean>0</boolean>') });
            resolve();
          });
        },
      );
      req.on('error', () => (results.push({ sentMs: sent, ms: Date.now() - sent, ok: false }), resolve()));
      req.end(body);
    });
  while (!stopping) {
    // Open loop: a ping is sent on schedule whatever the previous ones are waiting for.
    const due = t0 + (i * 1000) / RATE;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const pr = one(i++);
    inflight.add(pr);
    void pr.then(() => inflight.delete(pr));
  }
  await Promise.all(inflight);
  agent.destroy();
  process.stdout.write(JSON.stringify(results));
}

function pct(xs: number[], p: number): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

async function childMain(backend: Backend, target: string, size: number): Promise<void> {
  const { buildApp } = await import('../src/app.js');
  const config = loadConfig(
    { LOG_LEVEL: 'silent', VERIFY_PINGS: 'off' },
    {
      DATABASE_URL: backend === 'postgres' ? target : undefined,
      DATA_DIR: backend === 'pglite' ? target : './data',
      RENDER_SCHEDULER: false,
      PORT: 0,
      HOST,
    },
  );
  const app = await buildApp({ config, logger: false });
  const counted: Counted = { n: 0, waitMs: 0 };
  const db = counting(app.db, counted);
  const all = jobs(db);
  try {
    await app.listen({ port: 0, host: HOST });
    const port = (app.server.address() as { port: number }).port;
    const rssAfterOpen = process.memoryUsage().rss;
    // Pass 1: each render alone. Pass 2: the same under a steady ping load.
    for (const pass of ['alone', `${RATE} pings/s`].slice(0, PASSES)) {
      const load = pass === 'alone' ? null : startLoad(port);
      const windows: { name: string; from: number; to: number }[] = [];
      if (load) {
        await new Promise((r) => setTimeout(r, 3000));
        windows.push({ name: 'idle', from: Date.now() - 2500, to: Date.now() });
      }
      for (const j of all) {
        const pids = await backendPids(config.DATABASE_URL);
        const pgCpu0 = pids.reduce((s, p) => s + cpuMicros(p), 0);
        const cpu0 = process.cpuUsage();
        const c0 = { ...counted };
        let peak = process.memoryUsage().rss;
        const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
        const from = Date.now();
        const t = performance.now();
        const r = await j.run(j.renderer);
        const wall = performance.now() - t;
        windows.push({ name: j.name, from, to: Date.now() });
        clearInterval(sampler);
        peak = Math.max(peak, process.memoryUsage().rss);
        const cpu = process.cpuUsage(cpu0);
        const pgCpu = pids.reduce((s, p) => s + cpuMicros(p), 0) - pgCpu0;
        emit({
          backend,
          size,
          pass,
          document: j.name,
          entries: r.entries,
          mb: Math.round(r.bytes / 1e5) / 10,
          wallMs: Math.round(wall),
          cpuMs: Math.round((cpu.user + cpu.system) / 1000),
          ...(backend === 'postgres' ? { pgCpuMs: Math.round(pgCpu / 1000) } : {}),
          queries: counted.n - c0.n,
          queryWaitMs: Math.round(counted.waitMs - c0.waitMs),
          peakRssMb: mb(peak),
          rssBeforeMb: mb(rssAfterOpen),
        });
        if (TRACE) {
          for (const [k, v] of [...traced].sort((a, b) => b[1].ms - a[1].ms)) log(`    ${Math.round(v.ms)} ms / ${v.n}: ${k}`);
          traced.clear();
        }
        if (load) await new Promise((r) => setTimeout(r, 1000));
      }
      if (load) {
        const res = await load.stop();
        for (const w of windows) {
          const xs = res.filter((x) => x.sentMs >= w.from && x.sentMs <= w.to);
          const lat = xs.map((x) => x.ms);
          emit({
            backend,
            size,
            pass,
            pingsDuring: w.name,
            pings: xs.length,
            failed: xs.filter((x) => !x.ok).length,
            p50: pct(lat, 50),
            p99: pct(lat, 99),
            max: Math.max(...lat),
          });
        }
      }
    }
    emit({ backend, size, maxRssMb: mb(process.resourceUsage().maxRSS * 1024) });
  } finally {
    await app.close();
  }
}

// ---------------------------------------------------------------------------------------------------------
// Parent

function child(backend: Backend, target: string, size: number): Promise<number | null> {
  return new Promise((resolve) => {
    const extra = env.BENCH_RENDER_NODE_ARGS ? env.BENCH_RENDER_NODE_ARGS.split(' ') : [];
    const p = spawn(process.execPath, [...extra, '--import', 'tsx', 'bench/render-profile.ts', '--child', backend, target, String(size)], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    p.on('exit', (code) => resolve(code));
  });
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv[0] === '--load') return loadMain(Number(argv[1]));
  if (argv[0] === '--child') return childMain(argv[1] as Backend, argv[2], Number(argv[3]));
  log(`load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  let failed = false;
  for (const backend of BACKENDS) {
    for (const size of SIZES) {
      let target: string;
      let drop: () => Promise<void>;
      if (backend === 'postgres') {
        const name = `bench_render_${process.pid}`;
        const admin = new pg.Client({ connectionString: ADMIN_URL });
        await admin.connect();
        await admin.query(`drop database if exists ${name} with (force)`);
        await admin.query(`create database ${name}`);
        await admin.end();
        const u = new URL(ADMIN_URL);
        u.pathname = `/${name}`;
        target = u.href;
        drop = async () => {
          const c = new pg.Client({ connectionString: ADMIN_URL });
          await c.connect();
          await c.query(`drop database if exists ${name} with (force)`);
          await c.end();
        };
      } else {
        target = mkdtempSync(join(tmpdir(), 'pingd-bench-render-'));
        const dir = target;
        drop = async () => rmSync(dir, { recursive: true, force: true });
      }
      try {
        const db = await openDatabase({
          databaseUrl: backend === 'postgres' ? target : undefined,
          dataDir: target,
          poolMax: 2,
          timeoutMs: 600_000,
        });
        try {
          await migrate(db);
          const t = performance.now();
          await fill(db, size);
          log(
            `${backend} ${size}: filled in ${Math.round(performance.now() - t)} ms; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
          );
        } finally {
          await db.close();
        }
        if ((await child(backend, target, size)) !== 0) failed = true;
      } finally {
        await drop();
      }
    }
  }
  log(`load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  process.exitCode = failed ? 1 : 0;
}

await main();
