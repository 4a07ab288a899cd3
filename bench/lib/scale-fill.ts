// Owns the `scale` benchmark's big database: a month of pings (and the weblogs that sent them) written with
// generate_series straight into a migrated, empty pingd database, in id order = time order as intake writes
// them, then each weblog's first/last ping and count and the running total (ping_totals) computed from them.
// Run directly for the embedded database, in a child process so that the bench keeps none of PGlite's heap:
//
//   node --import tsx bench/lib/scale-fill.ts <DATA_DIR> '<FillSpec as JSON>'      (prints one JSON line)
//
// The month (FillSpec.at is "now", T): 30 whole UTC days before T's day, and T's day up to T.
//   - regular pings, evenly over [start, T − 1 h), except one hour (the archive hour, T's hour − 48 h) that
//     holds `archivePings` pings on its own (the closed archive hour of the issue);
//   - the last hour [T − 1 h, T): `hourWeblogs` pings, each from a different weblog (changes.xml's hour).
// Weblogs (ids 1…weblogs): half are a long tail pinging once in the month (at an even stride through the
// log); the other half share the rest with a skew (weblog r gets about pings/(2·√(r·half)) of them: weblog 1,
// HOT, tens of thousands at 100M, the least about ten), drawn by the golden-ratio sequence so that every
// weblog's pings spread over the whole month. Weblogs are counted from their pings (a weblog with none is
// not written). URLs and names look like real blogs' (wordpress.com, blogspot.com, substack.com, …).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import type { Queryable } from '../../src/platform/db/database.js';
import { cpuMicros } from './cpu.js';

export interface FillSpec {
  pings: number;
  weblogs: number;
  /** Distinct weblogs pinging in the last hour (changes.xml). */
  hourWeblogs: number;
  /** Pings in the archive hour. */
  archivePings: number;
  /** "Now" (ms): the month ends here. */
  at: number;
  /** Rows per insert statement (progress and bounded statements). */
  chunk?: number;
}

export interface FillLayout {
  start: number;
  archiveHour: number;
  lastHour: number;
  /** Weblog ids: 1…head are the skewed ones, head+1…weblogs the long tail. */
  head: number;
  tail: number;
  /** Every tailStride-th ping (of those before the last hour) is a tail weblog's only one. */
  tailStride: number;
  /** The last hour's j-th ping is weblog 1 + (j·hourStride mod weblogs): all distinct (gcd = 1). */
  hourStride: number;
  segments: { name: string; from: number; count: number; t0: number; t1: number }[];
}

export interface FillTimings {
  /** Seconds per step. */
  steps: Record<string, number>;
  seconds: number;
  pings: number;
  weblogs: number;
  /** Pings per second of the ping inserts alone. */
  insertRate: number;
  /** CPU seconds the database spent on the ping inserts (PostgreSQL: its backend process), when known. */
  insertCpuSec?: number;
  hotWeblog: { url: string; pings: number };
  fewWeblog: { url: string; pings: number };
  layout: FillLayout;
  partitioned: boolean;
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

export function layout(s: FillSpec): FillLayout {
  const lastHour = s.at - HOUR;
  const archiveHour = Math.floor(s.at / HOUR) * HOUR - 48 * HOUR;
  const start = Math.floor(s.at / DAY) * DAY - 30 * DAY;
  const regular = s.pings - s.archivePings - s.hourWeblogs;
  if (regular < 0 || s.pings - s.hourWeblogs < Math.floor(s.weblogs / 2) || s.hourWeblogs > s.weblogs)
    throw new Error(
      `fill: ${s.pings} pings are too few for ${s.weblogs} weblogs, ${s.hourWeblogs} in the last hour and ${s.archivePings} in the archive hour`,
    );
  const before = archiveHour - start;
  const after = lastHour - (archiveHour + HOUR);
  const n1 = Math.round((regular * before) / (before + after));
  const segments = [
    { name: 'month before the archive hour', count: n1, t0: start, t1: archiveHour },
    { name: 'archive hour', count: s.archivePings, t0: archiveHour, t1: archiveHour + HOUR },
    { name: 'month after the archive hour', count: regular - n1, t0: archiveHour + HOUR, t1: lastHour },
    { name: 'last hour', count: s.hourWeblogs, t0: lastHour, t1: s.at },
  ];
  let from = 1;
  const segs = segments.map((x) => {
    const r = { ...x, from };
    from += x.count;
    return r;
  });
  const tail = Math.floor(s.weblogs / 2);
  const head = s.weblogs - tail;
  let hourStride = 7919;
  while (gcd(hourStride, s.weblogs) !== 1) hourStride += 2;
  return {
    start,
    archiveHour,
    lastHour,
    head,
    tail,
    tailStride: Math.max(1, Math.floor((s.pings - s.hourWeblogs) / tail)),
    hourStride,
    segments: segs,
  };
}

// Words and hosts a weblog's URL and name are made of (chosen by its id).
const WORDS = [
  'coffee',
  'garden',
  'pixel',
  'river',
  'maple',
  'harbor',
  'quill',
  'orbit',
  'cedar',
  'lantern',
  'meadow',
  'ember',
  'nomad',
  'violet',
  'copper',
  'thistle',
  'sparrow',
  'granite',
  'saffron',
  'willow',
  'tundra',
  'marble',
  'juniper',
  'cobalt',
  'hazel',
  'prairie',
  'falcon',
  'amber',
  'fjord',
  'basil',
  'canyon',
  'delta',
];
const SUFFIXES = ['Journal', 'Notes', 'Diary', 'Blog', 'Log', 'Musings', 'Weekly', 'Thoughts', 'Dispatch', 'Corner'];
const AGENTS = [
  'The Incutio XML-RPC PHP Library -- WordPress/6.7.1',
  'The Incutio XML-RPC PHP Library -- WordPress/6.4.3',
  'Blogger XML-RPC Client',
  'Movable Type/8.0.2',
  'Ghost/5.96 (+https://ghost.org)',
  'Python-xmlrpc/3.11',
];
const sqlArray = (xs: string[]) => `'{${xs.map((x) => `"${x}"`).join(',')}}'::text[]`;
const word = (w: string, k = 1) => `(${sqlArray(WORDS)})[1 + (${w} / ${k * 8}) % ${WORDS.length}]`;

/** A weblog's URL, from its id (unique: the id is in it), already as intake normalises it (WHATWG URL). */
export function urlSql(w: string): string {
  return `case ${w} % 8
    when 0 then 'https://' || ${word(w)} || ${w} || '.wordpress.com/'
    when 1 then 'https://' || ${word(w)} || '-' || ${w} || '.blogspot.com/'
    when 2 then 'https://www.' || ${word(w)} || ${w} || '.com/blog/'
    when 3 then 'http://' || ${word(w)} || ${w} || '.typepad.com/' || ${word(w, 3)} || '/'
    when 4 then 'https://' || ${word(w)} || ${w} || '.substack.com/'
    when 5 then 'https://medium.com/@' || ${word(w)} || ${w} || '/'
    when 6 then 'https://' || ${word(w)} || ${w} || '.livejournal.com/'
    else 'https://' || ${word(w)} || '-' || ${word(w, 5)} || '.net/' || ${w} || '/' end`;
}
// "Coffee Journal", "River Notes", …: the URL's word and a suffix, looked up whole.
const NAMES = WORDS.flatMap((x) => SUFFIXES.map((y) => `${x[0].toUpperCase()}${x.slice(1)} ${y}`));
const nameSql = (w: string) => `(${sqlArray(NAMES)})[1 + ((${w} / 8) % ${WORDS.length}) * ${SUFFIXES.length} + ${w} % ${SUFFIXES.length}]`;
const feedSuffixSql = (w: string) => `case when ${w} % 8 = 1 then 'feeds/posts/default' else 'feed/' end`;
const feedSql = (w: string) => `${urlSql(w)} || ${feedSuffixSql(w)}`;
/** Where pings come from: a pool of addresses (hosting providers' ranges, made up). */
const ADDRESSES = Array.from(
  { length: 256 },
  (_, k) => `${[192, 198, 203, 185, 104, 172, 66, 45][k % 8]}.${(k * 37) % 256}.${(k * 101) % 256}.${1 + ((k * 13) % 254)}`,
);

/** The weblog of the i-th ping (regular and archive-hour pings). */
function weblogOf(l: FillLayout): string {
  const u = `(i * 0.6180339887498949::float8 - floor(i * 0.6180339887498949::float8))`;
  return `case when i % ${l.tailStride} = 0 and i / ${l.tailStride} <= ${l.tail} then ${l.head} + i / ${l.tailStride}
               else 1 + least(${l.head - 1}, floor(${l.head}::float8 * ${u} * ${u})::bigint) end`;
}

export function pingsSql(
  seg: FillLayout['segments'][number],
  lo: number,
  hi: number,
  l: FillLayout,
  weblogs: number,
  last: boolean,
): string {
  const w = last ? `1 + ((i - ${seg.from}) * ${l.hourStride}::bigint) % ${weblogs}` : weblogOf(l);
  const stepUs = ((seg.t1 - seg.t0) * 1000) / seg.count;
  // Each level computes its columns once (OFFSET 0 keeps the planner from inlining w into every use of it:
  // the URL alone names it a dozen times), and the per-row strings are looked up rather than built.
  return `insert into pings (id, weblog_id, received_at, method, name, url, changes_url, rss_url, tags, client_addr, user_agent) overriding system value
    select i, w, timestamptz 'epoch' + round(${seg.t0 * 1000}::float8 + ((i - ${seg.from})::float8 + 0.5) * ${stepUs}::float8) * interval '1 microsecond',
           case when i % 10 = 0 then 'extendedPing' else 'ping' end, ${nameSql('w')}, url, null,
           case when i % 10 = 0 then url || ${feedSuffixSql('w')} end, null,
           (${sqlArray(ADDRESSES)})[1 + (w * 7) % ${ADDRESSES.length}], (${sqlArray(AGENTS)})[1 + w % ${AGENTS.length}]
      from (select i, w, ${urlSql('w')} as url
              from (select i, ${w} as w from generate_series(${lo}::bigint, ${hi}::bigint) i offset 0) a offset 0) b`;
}

/** The sequence behind a table's id (identity, serial, or a plain `default nextval(…)` on a partitioned table). */
async function sequenceOf(q: Queryable, table: string): Promise<string | null> {
  const [r] = await q.query<{ seq: string | null }>(
    `select coalesce(pg_get_serial_sequence($1, 'id'), (regexp_match(column_default, 'nextval\\(''([^'']+)''::regclass\\)'))[1]) as seq
       from information_schema.columns where table_schema = current_schema() and table_name = $1 and column_name = 'id'`,
    [table],
  );
  return r?.seq ?? null;
}

/** Fills an empty, migrated database through `q` (one session: the settings below are per session). */
export async function fill(
  q: Queryable,
  s: FillSpec,
  log: (line: string) => void = () => undefined,
  cpu: () => number = () => NaN,
): Promise<FillTimings> {
  const l = layout(s);
  const t0 = performance.now();
  const steps: Record<string, number> = {};
  const step = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    const r = await fn();
    steps[name] = Math.round(performance.now() - t) / 1000;
    log(`  ${name}: ${steps[name]} s`);
    return r;
  };
  const [{ partitioned }] = await q.query<{ partitioned: boolean }>(
    "select relkind = 'p' as partitioned from pg_class where oid = 'pings'::regclass",
  );
  if (partitioned) {
    // The daily partitions covering the month (and the day after T, where intake's pings land), as the
    // scheduler would have made them. Loaded lazily: the module exists from migration 011 on.
    const mod = (await import(['..', '..', 'src', 'operations', 'retention', 'partitions.js'].join('/'))) as {
      ensureLogPartitions(q: Queryable, from: Date, to: Date): Promise<unknown>;
    };
    await step('partitions', () => mod.ensureLogPartitions(q, new Date(l.start), new Date(Math.floor(s.at / DAY) * DAY + 2 * DAY)));
  }
  // Foreign-key triggers off (superuser; PGlite's one user is): pings are written before their weblogs,
  // which are then counted from them in one pass. The rows are consistent by construction.
  await q.exec("set session_replication_role = 'replica'");
  const chunk = s.chunk ?? 2_000_000;
  const insertT0 = performance.now();
  const cpu0 = cpu();
  for (const [k, seg] of l.segments.entries()) {
    if (seg.count === 0) continue;
    const t = performance.now();
    for (let lo = seg.from; lo < seg.from + seg.count; lo += chunk) {
      const hi = Math.min(seg.from + seg.count - 1, lo + chunk - 1);
      await q.exec(pingsSql(seg, lo, hi, l, s.weblogs, k === l.segments.length - 1));
      const done = hi;
      const el = (performance.now() - insertT0) / 1000;
      const us = (cpu() - cpu0) / done;
      log(
        `    pings ${done.toLocaleString('en-US')} / ${s.pings.toLocaleString('en-US')} (${Math.round(done / el).toLocaleString('en-US')}/s${Number.isFinite(us) ? `, ${us.toFixed(1)} CPU µs each` : ''})`,
      );
    }
    steps[`pings: ${seg.name}`] = Math.round(performance.now() - t) / 1000;
  }
  const insertSec = (performance.now() - insertT0) / 1000;
  const insertCpuSec = (cpu() - cpu0) / 1e6;
  steps['pings'] = Math.round(insertSec * 1000) / 1000;
  // The weblogs' secondary indexes (url's unique constraint, last_ping_at, …) are dropped while the rows go in
  // and built afterwards from the same definitions: filled row by row in random key order they cost 840 s for
  // 7M weblogs against 128 MB of shared buffers (bench/results/evidence/2026-11-23-scale.md); a sorted build is one pass.
  const rebuild = await step('weblogs: drop indexes', () => dropSecondaryIndexes(q, 'weblogs'));
  await step('weblogs', () =>
    q.exec(`insert into weblogs (id, url, name, rss_url, first_ping_at, last_ping_at, ping_count) overriding system value
      select weblog_id, ${urlSql('weblog_id')}, ${nameSql('weblog_id')}, ${feedSql('weblog_id')}, min(received_at), max(received_at), count(*)
        from pings group by weblog_id`),
  );
  await step('weblogs: build indexes', async () => {
    for (const sql of rebuild) await q.exec(sql);
  });
  await q.exec("set session_replication_role = 'origin'");
  // The running total (migration 009) as intake keeps it: all of it in one slot.
  await step('ping_totals', () => q.exec(`update ping_totals set n = case when slot = 0 then ${s.pings} else 0 end`));
  await step('sequences', async () => {
    for (const [table, v] of [
      ['pings', s.pings],
      ['weblogs', s.weblogs],
    ] as const) {
      const seq = await sequenceOf(q, table);
      if (!seq) throw new Error(`no sequence found behind ${table}.id`);
      await q.query('select setval($1::regclass, $2)', [seq, v]);
    }
  });
  // As autovacuum would after such a load (PGlite has none), before anything is measured: the planner knows
  // the sizes, the visibility map is set and hint bits are written (else the first readers write them).
  await step('vacuum analyze', () => q.exec('vacuum analyze'));
  const count = async (sql: string, params: unknown[] = []) => Number((await q.query<{ n: number }>(sql, params))[0]?.n ?? 0);
  const fewId = l.head + 2;
  const urlOf = async (id: number) => (await q.query<{ url: string }>('select url from weblogs where id = $1', [id]))[0]?.url ?? '';
  return {
    steps,
    seconds: Math.round(performance.now() - t0) / 1000,
    pings: await count('select sum(n)::bigint as n from ping_totals'),
    weblogs: await count('select count(*)::bigint as n from weblogs'),
    insertRate: Math.round(s.pings / insertSec),
    insertCpuSec: Number.isFinite(insertCpuSec) ? Math.round(insertCpuSec) : undefined,
    hotWeblog: { url: await urlOf(1), pings: await count('select ping_count as n from weblogs where id = 1') },
    fewWeblog: { url: await urlOf(fewId), pings: await count('select ping_count as n from weblogs where id = $1', [fewId]) },
    layout: l,
    partitioned,
  };
}

/** One PostgreSQL session as a Queryable, with the settings a bulk load wants (this session only). */
export async function fillPostgres(url: string, s: FillSpec, log?: (line: string) => void): Promise<FillTimings> {
  const c = new pg.Client({
    connectionString: url,
    types: {
      getTypeParser: (oid: number, f?: string) => (oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, f as 'text')),
    },
  });
  await c.connect();
  try {
    await c.query("set synchronous_commit = off; set work_mem = '1GB'; set maintenance_work_mem = '1GB'");
    const q: Queryable = {
      query: async <T>(sql: string, params?: unknown[]) => (await c.query(sql, params)).rows as T[],
      exec: async (sql: string) => void (await c.query(sql)),
    };
    // The backend's CPU from /proc (PostgreSQL on this machine): a rate that does not depend on the load.
    const [{ pid }] = (await c.query<{ pid: number }>('select pg_backend_pid() as pid')).rows;
    return await fill(q, s, log, () => cpuMicros(pid) || NaN);
  } finally {
    await c.end();
  }
}

/** Fills the embedded database in DATA_DIR `dir` (migrated, empty, its pingd stopped), in this process. */
export async function fillPgliteHere(dir: string, s: FillSpec, log?: (line: string) => void): Promise<FillTimings> {
  const { PGlite } = await import('@electric-sql/pglite');
  const db = new PGlite(join(dir, 'pgdata'));
  try {
    const q: Queryable = {
      query: async <T>(sql: string, params?: unknown[]) => (await db.query<T>(sql, params)).rows,
      exec: async (sql: string) => void (await db.exec(sql)),
    };
    return await fill(q, s, log);
  } finally {
    await db.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [dir, spec] = process.argv.slice(2);
  fillPgliteHere(dir, JSON.parse(spec) as FillSpec, (line) => process.stderr.write(`${line}\n`)).then(
    (t) => process.stdout.write(`${JSON.stringify(t)}\n`),
    (err: Error) => {
      process.stderr.write(`fill failed: ${err.stack ?? err.message}\n`);
      process.exit(1);
    },
  );
}

/**
 * Drops a table's indexes other than its primary key (constraint-backed ones through their constraint) and
 * returns the statements that make them again, as they were.
 */
async function dropSecondaryIndexes(q: Queryable, table: string): Promise<string[]> {
  const rows = await q.query<{ index: string; constraint: string | null; indexdef: string; condef: string | null }>(
    `select i.indexrelid::regclass::text as index, c.conname as constraint, pg_get_indexdef(i.indexrelid) as indexdef,
            pg_get_constraintdef(c.oid) as condef
       from pg_index i left join pg_constraint c on c.conindid = i.indexrelid and c.conrelid = i.indrelid
      where i.indrelid = $1::regclass and not i.indisprimary`,
    [table],
  );
  const again: string[] = ["set maintenance_work_mem = '512MB'"];
  for (const r of rows) {
    if (r.constraint) {
      await q.exec(`alter table ${table} drop constraint ${r.constraint}`);
      again.push(`alter table ${table} add constraint ${r.constraint} ${r.condef}`);
    } else {
      await q.exec(`drop index ${r.index}`);
      again.push(r.indexdef);
    }
  }
  again.push('reset maintenance_work_mem');
  return again;
}
