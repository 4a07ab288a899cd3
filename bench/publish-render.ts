// Owns the publishing benchmark: how long rendering changes.xml takes and how much memory it
// peaks at with 1k, 10k and 100k weblogs in the hour, the same for a 1M-ping hourly archive, and the bytes a
// crawler polling every minute receives per poll — full 200, 304, and 226 IM Used (A-IM: feed) — at 1k and
// 100k weblogs per hour. Every measurement runs in a child process of its own so that its peak RSS is its
// own. Prints one JSON line per result on stdout (bench/run.ts reads them) and a readable table on stderr.
//
//   node --import tsx bench/publish-render.ts
//   BENCH_PUBLISH_BACKENDS=postgres BENCH_PUBLISH_CASES=changes-100k,archive-1m node --import tsx bench/publish-render.ts
//
// Environment: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres; a database is created
// and dropped on it), BENCH_PUBLISH_BACKENDS (postgres,pglite), BENCH_PUBLISH_CASES (ids below, default all),
// BENCH_ARCHIVE_PINGS (1000000).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import pg from 'pg';
import { openDatabase, type Db } from '../src/platform/db/database.js';
import { migrate } from '../src/platform/db/migrate.js';
import { loadConfig } from '../src/platform/config.js';
import { Renderer } from '../src/publishing/render/renderer.js';
import { HOUR_MS, hourStart } from '../src/publishing/documents/archive.js';
import { changesDocument } from '../src/publishing/documents/changes.js';
import { DocumentRegistry } from '../src/publishing/documents/registry.js';

type Backend = 'postgres' | 'pglite';
const env = process.env;
const ADMIN_URL = env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const BACKENDS = (env.BENCH_PUBLISH_BACKENDS || 'postgres,pglite').split(',').map((s) => s.trim()) as Backend[];
const ARCHIVE_PINGS = Number(env.BENCH_ARCHIVE_PINGS || 1_000_000);
const MEMORY_TARGET_MB = 200;

// Every case has its own time frame, hours apart and in the past, so their windows never overlap.
const BASE = hourStart(Date.now()) - 40 * HOUR_MS;
const CASES = {
  'changes-1k': { kind: 'changes', weblogs: 1_000, at: BASE + 2 * HOUR_MS },
  'changes-10k': { kind: 'changes', weblogs: 10_000, at: BASE + 6 * HOUR_MS },
  'changes-100k': { kind: 'changes', weblogs: 100_000, at: BASE + 10 * HOUR_MS },
  'archive-1m': { kind: 'archive', weblogs: 100_000, at: BASE + 14 * HOUR_MS },
  'bytes-1k': { kind: 'bytes', weblogs: 1_000, at: BASE + 18 * HOUR_MS },
  'bytes-100k': { kind: 'bytes', weblogs: 100_000, at: BASE + 22 * HOUR_MS },
} as const;
type CaseId = keyof typeof CASES;
const SELECTED = (env.BENCH_PUBLISH_CASES ? env.BENCH_PUBLISH_CASES.split(',').map((s) => s.trim()) : Object.keys(CASES)) as CaseId[];

const log = (s: string) => process.stderr.write(`${s}\n`);
const mb = (bytes: number) => Math.round((bytes / (1 << 20)) * 10) / 10;
const size = (bytes: number) => (bytes >= 1 << 20 ? `${mb(bytes)} MB` : `${Math.round(bytes / 1024)} KB`);

interface Target {
  backend: Backend;
  /** DATABASE_URL (server) or DATA_DIR (embedded). */
  url?: string;
  dir?: string;
}

function openTarget(t: Target, poolMax = 4): Promise<Db> {
  return openDatabase({ databaseUrl: t.url, dataDir: t.dir ?? '', poolMax, timeoutMs: 600_000 });
}

// ---------------------------------------------------------------------------------------------------------
// Seeding, server-side (generate_series): the parent's memory is not what is measured anyway.

/** `n` weblogs pinged once each, evenly over the hour before `at` (the last one a second before). */
async function seedWeblogs(db: Db, prefix: string, n: number, fromMs: number, toMs: number, withPings: boolean): Promise<void> {
  await db.query(
    `with s as (
       select i, timestamptz 'epoch' + ($2::bigint + ((i - 1) * ($3::bigint - $2::bigint) / $1)) * interval '1 millisecond' as at
         from generate_series(1, $1::int) i
     ), w as (
       insert into weblogs (url, name, rss_url, first_ping_at, last_ping_at)
       select 'http://' || $4 || i || '.blogs.example.com/', 'Weblog number ' || i || ' of ' || $4,
              case when i % 3 = 0 then 'http://' || $4 || i || '.blogs.example.com/feed.xml' end, at, at from s
       returning id, url, name, rss_url, last_ping_at
     )
     insert into pings (weblog_id, received_at, method, name, url, rss_url)
     select id, last_ping_at, 'ping', name, url, rss_url from w where $5`,
    [n, fromMs, toMs, prefix, withPings],
  );
}

/** `pings` pings spread over the hour starting at `hourMs`, by `weblogs` weblogs in turn (not de-duplicated). */
async function seedArchive(db: Db, prefix: string, weblogs: number, pings: number, hourMs: number): Promise<void> {
  await seedWeblogs(db, prefix, weblogs, hourMs - HOUR_MS, hourMs - 1000, false);
  const [{ first }] = await db.query<{ first: number }>(`select min(id) as first from weblogs where url like $1`, [`http://${prefix}%`]);
  // In slices: one statement of a million rows is heavy on the embedded database.
  const slice = 100_000;
  for (let from = 0; from < pings; from += slice) {
    await db.query(
      `insert into pings (weblog_id, received_at, method, name, url, rss_url)
       select w.id, timestamptz 'epoch' + ($3::bigint + (g::bigint * 3599000 / $4)) * interval '1 millisecond', 'ping', w.name, w.url, w.rss_url
         from generate_series($1::int, $2::int) g join weblogs w on w.id = $5::bigint + (g % $6)`,
      [from, Math.min(pings, from + slice) - 1, hourMs, pings, Number(first), weblogs],
    );
  }
}

async function seed(db: Db, id: CaseId): Promise<void> {
  const c = CASES[id];
  if (c.kind === 'archive') return seedArchive(db, id, c.weblogs, ARCHIVE_PINGS, c.at);
  await seedWeblogs(db, id, c.weblogs, c.at - HOUR_MS + 1000, c.at - 1000, false);
  if (c.kind === 'bytes') {
    // The minute after `at`: as many new weblogs as an hour of this rate brings in a minute.
    await seedWeblogs(db, `${id}-next`, Math.max(1, Math.round(c.weblogs / 60)), c.at + 1000, c.at + 59_000, false);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Children: one measurement each.

function emit(o: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(o)}\n`);
}

const quiet = { info: () => undefined, warn: () => undefined, error: (o: object, m?: string) => log(`error: ${m} ${JSON.stringify(o)}`) };

async function renderCase(t: Target, id: CaseId): Promise<void> {
  const c = CASES[id];
  const db = await openTarget(t);
  try {
    const renderer = new Renderer(new DocumentRegistry([changesDocument()]), { db, log: quiet, deltaWindowSec: 900 });
    const rssBefore = process.memoryUsage().rss;
    const started = performance.now();
    let entries = 0;
    let sizes = '';
    if (c.kind === 'changes') {
      const r = await renderer.tick({ now: new Date(c.at), liveOnly: true, force: true });
      const x = r?.rendered[0];
      if (!x) throw new Error(`nothing rendered: ${JSON.stringify(r)}`);
      entries = x.entries;
      sizes = `${size(x.identityLength)}, gzip ${size(x.gzipLength)}, br ${size(x.brLength)}`;
    } else {
      const r = await renderer.renderHour(c.at, { now: new Date(c.at + 2 * HOUR_MS) });
      if (!r || r === 'identical') throw new Error(`archive not rendered: ${String(r)}`);
      entries = r.entries;
      sizes = `${size(r.identityLength)}, gzip ${size(r.gzipLength)}, br ${size(r.brLength)}`;
    }
    const ms = performance.now() - started;
    const peak = process.resourceUsage().maxRSS * 1024;
    const label =
      c.kind === 'changes' ? `changes.xml, ${c.weblogs / 1000}k weblogs in the hour` : `hourly archive, ${ARCHIVE_PINGS / 1e6}M pings`;
    emit({
      case: `${label} (${t.backend})`,
      ms: Math.round(ms),
      peakMb: mb(peak),
      target: c.kind === 'archive' ? `< ${MEMORY_TARGET_MB} MB peak` : undefined,
      pass: c.kind === 'archive' ? mb(peak) < MEMORY_TARGET_MB : undefined,
      growthMb: mb(peak - rssBefore),
      note: `${entries} entries; ${sizes}; RSS ${mb(rssBefore)} MB before rendering, +${mb(peak - rssBefore)} MB at the peak${t.backend === 'pglite' ? ' (the embedded database runs in this process)' : ''}`,
    });
  } finally {
    await db.close();
  }
}

/** One HTTP/1.1 request on a fresh socket; returns the bytes received (status line, headers, body). */
function rawRequest(port: number, headers: Record<string, string>): Promise<{ status: number; total: number; body: number; head: string }> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    s.on('data', (d) => chunks.push(d));
    s.on('error', reject);
    s.on('end', () => {
      const all = Buffer.concat(chunks);
      const sep = all.indexOf('\r\n\r\n');
      const head = all.subarray(0, sep).toString('latin1');
      resolve({ status: Number(head.split(' ')[1]), total: all.length, body: all.length - sep - 4, head });
    });
    const lines = [
      'GET /changes.xml HTTP/1.1',
      'Host: bench',
      'Connection: close',
      'User-Agent: crawler/1.0',
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ];
    s.write(`${lines.join('\r\n')}\r\n\r\n`);
  });
}

async function bytesCase(t: Target, id: CaseId): Promise<void> {
  const c = CASES[id];
  const { buildApp } = await import('../src/app.js');
  // Verification off: the seeded weblogs' hosts are not ours to fetch (and not on loopback).
  const config = loadConfig(
    { LOG_LEVEL: 'silent', VERIFY_PINGS: 'off' },
    { DATABASE_URL: t.url, DATA_DIR: t.dir ?? './data', RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0, PORT: 0 },
  );
  const app = await buildApp({ config, logger: false });
  try {
    await app.renderer.tick({ now: new Date(c.at), liveOnly: true });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as net.AddressInfo).port;
    const first = await rawRequest(port, { 'Accept-Encoding': 'gzip' });
    const base = /\r\netag: ("[^"]+")/i.exec(first.head)?.[1];
    if (!base) throw new Error('no ETag');
    // A minute later: one minute's worth of new weblogs.
    await app.renderer.tick({ now: new Date(c.at + 60_000), liveOnly: true });
    const rows: [string, Record<string, string>][] = [
      ['full 200, gzip', { 'Accept-Encoding': 'gzip' }],
      ['full 200, br', { 'Accept-Encoding': 'br' }],
      ['full 200, identity', {}],
      ['304 Not Modified', { 'Accept-Encoding': 'gzip', 'If-None-Match': '' }],
      ['226 IM Used, gzip', { 'Accept-Encoding': 'gzip', 'A-IM': 'feed', 'If-None-Match': base }],
      ['226 IM Used, br', { 'Accept-Encoding': 'br', 'A-IM': 'feed', 'If-None-Match': base }],
    ];
    const current = /\r\netag: ("[^"]+")/i.exec((await rawRequest(port, { 'Accept-Encoding': 'gzip' })).head)?.[1] ?? '';
    const newPerMinute = Math.max(1, Math.round(c.weblogs / 60));
    for (const [what, h] of rows) {
      if ('If-None-Match' in h && h['If-None-Match'] === '') h['If-None-Match'] = current;
      const r = await rawRequest(port, h);
      emit({
        case: `bytes per poll, ${c.weblogs / 1000}k weblogs/h (+${newPerMinute} in the minute), ${what} (${t.backend})`,
        bytes: r.total,
        note: `HTTP ${r.status}: ${r.total} bytes on the wire (${r.body} body)`,
      });
    }
  } finally {
    await app.close();
  }
}

// ---------------------------------------------------------------------------------------------------------
// Parent

function child(t: Target, id: CaseId): Promise<number | null> {
  return new Promise((resolve) => {
    const args = ['--import', 'tsx', 'bench/publish-render.ts', '--child', id, '--backend', t.backend, '--target', t.url ?? t.dir ?? ''];
    const p = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, LOG_LEVEL: 'silent' } });
    p.stdout.on('data', (d: Buffer) => {
      process.stdout.write(d);
      for (const line of d.toString().split('\n').filter(Boolean)) {
        try {
          const j = JSON.parse(line) as { case: string; ms?: number; peakMb?: number; note?: string };
          log(`  ${j.case}: ${j.ms !== undefined ? `${j.ms} ms, peak ${j.peakMb} MB — ` : ''}${j.note ?? ''}`);
        } catch {
          /* not ours */
        }
      }
    });
    p.on('exit', (code) => resolve(code));
  });
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const at = (flag: string) => argv[argv.indexOf(flag) + 1];
  if (argv.includes('--child')) {
    const backend = at('--backend') as Backend;
    const t: Target = backend === 'postgres' ? { backend, url: at('--target') } : { backend, dir: at('--target') };
    const id = at('--child') as CaseId;
    if (CASES[id].kind === 'bytes') await bytesCase(t, id);
    else await renderCase(t, id);
    return;
  }
  let failed = false;
  for (const backend of BACKENDS) {
    let t: Target;
    let drop: () => Promise<void>;
    if (backend === 'postgres') {
      const name = `pingd_bench_publish_${process.pid}`;
      const admin = new pg.Client({ connectionString: ADMIN_URL });
      await admin.connect();
      await admin.query(`create database ${name}`);
      await admin.end();
      const u = new URL(ADMIN_URL);
      u.pathname = `/${name}`;
      t = { backend, url: u.href };
      drop = async () => {
        const c = new pg.Client({ connectionString: ADMIN_URL });
        await c.connect();
        await c.query(`drop database if exists ${name} with (force)`);
        await c.end();
      };
    } else {
      const dir = mkdtempSync(join(tmpdir(), 'pingd-bench-publish-'));
      t = { backend, dir };
      drop = async () => rmSync(dir, { recursive: true, force: true });
    }
    try {
      log(`${backend}: seeding ${SELECTED.join(', ')}…`);
      const db = await openTarget(t);
      try {
        await migrate(db);
        for (const id of SELECTED) {
          const s = performance.now();
          await seed(db, id);
          log(`  seeded ${id} in ${Math.round(performance.now() - s)} ms`);
        }
        if (backend === 'postgres') await db.exec('vacuum analyze');
      } finally {
        await db.close();
      }
      for (const id of SELECTED) {
        const code = await child(t, id);
        if (code !== 0) {
          failed = true;
          log(`  ${id} on ${backend} exited with ${code}`);
        }
      }
    } finally {
      await drop();
    }
  }
  process.exitCode = failed ? 1 : 0;
}

await main();
