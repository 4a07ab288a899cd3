// Owns the `web` benchmark's big database: a day of traffic written with generate_series straight into a
// migrated, empty pingd database (pings and their weblogs, the per-minute statistics the status page
// charts), far faster than sending a million pings through intake. Run directly for the embedded database,
// in a child process so that the bench process (the load generator) does not keep PGlite's heap:
//
//   node --import tsx bench/lib/web-fill.ts <DATA_DIR> <pings> <weblogs>     (prints one JSON line)
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';

export interface FillSpec {
  pings: number;
  weblogs: number;
}

/** The weblog with many pings (every 50th ping of the day): what "did my ping arrive?" is asked about. */
export const HOT_WEBLOG = 'http://hot.fill.example.com/';
/** A weblog like most (about pings / weblogs of them). */
export const TYPICAL_WEBLOG = 'http://w1000.fill.example.com/';
/** Hosts named in stats_minute_hosts (20 of them each minute). */
const HOST_POOL = 200;

export interface FillTimings {
  /** Seconds per step. */
  steps: Record<string, number>;
  seconds: number;
  pings: number;
  weblogs: number;
  hotPings: number;
  statsMinutes: number;
  statsHosts: number;
}

/**
 * The statements, in order. Ids are given explicitly (identity columns are `generated always`: overriding
 * system value) and the sequences moved past them, so that pings pingd accepts afterwards follow on. Pings
 * are spread evenly over the last 24 hours in id order (as intake writes them); weblog 1 is HOT_WEBLOG and
 * gets every 50th ping; the others share the rest round robin (a weblog without a ping is not written).
 * Foreign-key triggers are off during the fill (session_replication_role = replica): the rows are consistent
 * by construction, and it lets the weblogs be written after their pings, counted from them.
 */
export function fillStatements(s: FillSpec): [string, string][] {
  const { pings: N, weblogs: W } = s;
  const url = (w: string) => `case when ${w} = 1 then '${HOT_WEBLOG}' else 'http://w' || ${w} || '.fill.example.com/' end`;
  return [
    ['replica role', "set session_replication_role = 'replica'"],
    [
      'pings',
      `insert into pings (id, weblog_id, received_at, method, name, url, changes_url, rss_url, tags, client_addr, user_agent) overriding system value
         select i, w, now() - interval '24 hours' + (i - 1) * (interval '86400 seconds' / ${N}),
                case when i % 10 = 0 then 'extendedPing' else 'ping' end, 'Fill Blog ' || w, ${url('w')}, null,
                case when i % 10 = 0 then ${url('w')} || 'feed/' end, null, '127.0.0.' || (1 + i % 200),
                'The Incutio XML-RPC PHP Library -- WordPress/6.7.1'
           from (select i, case when i % 50 = 0 then 1 else 2 + i % ${Math.max(1, W - 1)} end as w from generate_series(1, ${N}) i) s`,
    ],
    // After the pings (their references are not checked meanwhile), from them: one insert instead of
    // 200k updates.
    [
      'weblogs',
      `insert into weblogs (id, url, name, rss_url, first_ping_at, last_ping_at, ping_count) overriding system value
         select weblog_id, ${url('weblog_id')}, 'Fill Blog ' || weblog_id, ${url('weblog_id')} || 'feed/', min(received_at), max(received_at), count(*)
           from pings group by weblog_id`,
    ],
    // The running total of accepted pings (migration 009, when present) is kept by intake's statement:
    // written here as that migration initialises it, from the weblogs' counts.
    [
      'ping_totals',
      `do $$ begin
         if to_regclass('ping_totals') is not null then
           update ping_totals set n = case when slot = 0 then (select coalesce(sum(ping_count), 0) from weblogs) else 0 end;
         end if;
       end $$`,
    ],
    ['sequences', `select setval(pg_get_serial_sequence('weblogs', 'id'), ${W}), setval(pg_get_serial_sequence('pings', 'id'), ${N})`],
    // The counts pingd would have flushed: accepted per minute exactly as in the log, plus refusals and
    // verification outcomes that vary by minute.
    [
      'stats_minutes accepted',
      `insert into stats_minutes (minute, series, n) select date_trunc('minute', received_at), 'accepted', count(*) from pings group by 1`,
    ],
    [
      'stats_minutes other',
      `insert into stats_minutes (minute, series, n)
         select m, x.series, x.n from (select minute as m, extract(epoch from minute)::bigint / 60 as k from stats_minutes where series = 'accepted') mm,
           lateral (values ('refused:throttled', 5 + k % 40), ('refused:invalid', k % 4), ('refused:rate_limited', k % 3),
                           ('verification:verified', 100 + k % 90), ('verification:unchanged', 200 + k % 70), ('verification:unreachable', k % 11)) x(series, n)
          where x.n > 0`,
    ],
    [
      'stats_minute_hosts',
      `insert into stats_minute_hosts (minute, host, accepted, refused)
         select m, 'h' || ((k * 13 + h * 7) % ${HOST_POOL}) || '.fill.example.com', 1 + (k + h * 31) % 50, (k + h) % 3
           from (select minute as m, extract(epoch from minute)::bigint / 60 as k from stats_minutes where series = 'accepted') mm,
                generate_series(1, 20) h`,
    ],
    ['normal role', "set session_replication_role = 'origin'"],
    // As autovacuum would after such a load (PGlite has none): the planner knows the tables' sizes.
    ['analyze', 'analyze'],
  ];
}

async function run(exec: (sql: string) => Promise<unknown>, count: (sql: string) => Promise<number>, s: FillSpec): Promise<FillTimings> {
  const t0 = performance.now();
  const steps: Record<string, number> = {};
  for (const [name, sql] of fillStatements(s)) {
    const t = performance.now();
    await exec(sql);
    steps[name] = Math.round(performance.now() - t) / 1000;
  }
  return {
    steps,
    seconds: Math.round(performance.now() - t0) / 1000,
    pings: await count('select count(*)::int as n from pings'),
    weblogs: await count('select count(*)::int as n from weblogs'),
    hotPings: await count('select ping_count::int as n from weblogs where id = 1'),
    statsMinutes: await count('select count(*)::int as n from stats_minutes'),
    statsHosts: await count('select count(*)::int as n from stats_minute_hosts'),
  };
}

/** Fills the PostgreSQL database at `url` (migrated, empty). */
export async function fillPostgres(url: string, s: FillSpec): Promise<FillTimings> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await run(
      (sql) => c.query(sql),
      async (sql) => Number((await c.query<{ n: number }>(sql)).rows[0].n),
      s,
    );
  } finally {
    await c.end();
  }
}

/** Fills the embedded database in DATA_DIR `dir` (migrated, empty, its pingd stopped), in this process. */
export async function fillPgliteHere(dir: string, s: FillSpec): Promise<FillTimings> {
  const { PGlite } = await import('@electric-sql/pglite');
  const db = new PGlite(join(dir, 'pgdata'));
  try {
    return await run(
      (sql) => db.exec(sql),
      async (sql) => Number((await db.query<{ n: number }>(sql)).rows[0].n),
      s,
    );
  } finally {
    await db.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [dir, pings, weblogs] = process.argv.slice(2);
  fillPgliteHere(dir, { pings: Number(pings), weblogs: Number(weblogs) }).then(
    (t) => process.stdout.write(`${JSON.stringify(t)}\n`),
    (err: Error) => {
      process.stderr.write(`fill failed: ${err.stack ?? err.message}\n`);
      process.exit(1);
    },
  );
}
