// Owns the SQL that reads intake's tables for publishing: the weblogs pinged last in a time window and the
// pings of an hour, counted and paged by keyset (so a renderer's memory stays flat whatever the size), the
// total of pings ever accepted (a counter intake keeps), and the planner statistics those reads rely on.
// Plain values in, plain rows out; times cross the boundary as integer microseconds since the epoch.
import type { Queryable } from '../../platform/db/database.js';
import { newestFirstPages, type After } from '../../platform/db/keyset.js';
import { tsParam as TS, usOf as US } from '../../platform/db/sql-time.js';
import { withContext } from '../../platform/errors.js';
import { listedId } from '../abuse/removal-repository.js';

export type { After };

/**
 * Refreshes the planner statistics of weblogs and pings. The embedded database runs no autovacuum: without
 * statistics its planner sorts a whole hour for every page (quadratic: 16 s instead of 1 s for 100k
 * weblogs). The server's autovacuum does this by itself.
 */
export async function analyzePingTables(q: Queryable): Promise<void> {
  await withContext('analyzing weblogs and pings', () => q.exec('analyze weblogs, pings'));
}

/**
 * The counter behind totalPings(): intake's batch statement adds what it accepted to one of its slots
 * (migrations/009_ping_totals.sql). REGRESSION: this used to be sum(weblogs.ping_count), a scan of the whole
 * table by every render (~120 ms at 1M weblogs on PostgreSQL); the slots are 16 rows.
 */
export const TOTAL_PINGS = 'select coalesce(sum(n), 0)::bigint as n from ping_totals';

/** Total pings ever accepted (the `count` attribute of the live documents, `pingd stats`). */
export async function totalPings(q: Queryable): Promise<number> {
  return withContext('counting pings', async () => {
    const [r] = await q.query<{ n: number | null }>(TOTAL_PINGS);
    return Number(r.n ?? 0);
  });
}

export interface WindowStats {
  n: number;
  maxUs: number;
}

/**
 * Reads of the weblogs whose time in `timeCol` falls in (fromUs, toUs]: how many and the latest, and keyset
 * pages newest first. `last_ping_at` is intake's (every accepted ping); verification lists by its own
 * column of the same table. Weblogs the operator removed are left out (removal-repository.ts).
 */
export function weblogWindow(timeCol: 'last_ping_at' | 'last_verified_at') {
  const listed = listedId('weblogs.id');
  // Only what a <weblog/> element shows: every column more is parsed for each row of every render.
  const page = newestFirstPages<WeblogWindowRow>('id, name, url, rss_url', 'weblogs', timeCol, 'id', listed);
  return {
    stats: (q: Queryable, fromUs: number, toUs: number): Promise<WindowStats> =>
      withContext(`reading the weblog window (${timeCol})`, async () => {
        const [r] = await q.query<{ n: number; max_us: number | null }>(
          `select count(*)::bigint as n, ${US(`max(${timeCol})`)} as max_us
             from weblogs where ${timeCol} > ${TS(1)} and ${timeCol} <= ${TS(2)} and ${listed}`,
          [fromUs, toUs],
        );
        return { n: Number(r.n), maxUs: Number(r.max_us ?? 0) };
      }),
    page: (q: Queryable, fromUs: number, toUs: number, after: After | null, limit: number): Promise<WeblogWindowRow[]> =>
      withContext(`reading a page of weblogs (${timeCol})`, () => page(q, fromUs, toUs, after, limit)),
  };
}

const lastPinged = weblogWindow('last_ping_at');

/** How many weblogs pinged last in (fromUs, toUs], and the latest such ping. */
export const weblogWindowStats = lastPinged.stats;

export interface WeblogWindowRow {
  id: number;
  name: string;
  url: string;
  rss_url: string | null;
  at_us: number;
}

/** One page of the weblogs pinged last in (fromUs, toUs], newest first, after the keyset `after` (last_ping_at index). */
export const weblogWindowPage = lastPinged.page;

/** The highest ping id committed so far (0 when none): where following the pings' ids starts. */
export async function lastPingId(q: Queryable): Promise<number> {
  return withContext('reading the last ping id', async () => {
    const [r] = await q.query<{ id: number | null }>('select max(id) as id from pings');
    return Number(r.id ?? 0);
  });
}

export interface WeblogChanges {
  /** The highest ping id read (unchanged when there were none). */
  lastId: number;
  /** How many pings were read (`limit` means there may be more). */
  pings: number;
  /** The weblogs those pings touched, as they are now (one row each, in no order). */
  weblogs: WeblogWindowRow[];
}

// One statement, so the weblogs are read in the snapshot the pings were: every change to a weblog's listed
// columns (name, url, rss_url, last_ping_at) is made by intake's batch statement together with a ping row,
// so "the weblogs of the pings after id N" is everything that changed since N. A removed weblog's pings
// count as read but bring no row: it is not listed (removing one makes the renderer read its windows anew). The pings' primary key
// (id, received_at) gives each partition an index to start from.
const WEBLOGS_PINGED_AFTER = `
with d as materialized (select id, weblog_id from pings where id > $1 order by id limit $2),
s as (select max(id) as last_id, count(*)::int as n from d),
c as (select distinct weblog_id from d)
select s.last_id, s.n, w.id, w.name, w.url, w.rss_url, ${US('w.last_ping_at')} as at_us
  from s left join (c join weblogs w on w.id = c.weblog_id and ${listedId('w.id')}) on true`;

/**
 * The weblogs touched by the (at most `limit`) pings after id `afterId`. Ping ids become visible in id
 * order (EVENT_ORDER_LOCK, ping-repository.ts), so a reader that remembers the last id it read misses no
 * ping committed later, whatever its received_at.
 */
export async function weblogsPingedAfter(q: Queryable, afterId: number, limit: number): Promise<WeblogChanges> {
  return withContext('reading the weblogs pinged since the last render', async () => {
    const rows = await q.query<{
      last_id: number | null;
      n: number;
      id: number | null;
      name: string;
      url: string;
      rss_url: string | null;
      at_us: number;
    }>(WEBLOGS_PINGED_AFTER, [afterId, limit]);
    const n = Number(rows[0]?.n ?? 0);
    if (n === 0) return { lastId: afterId, pings: 0, weblogs: [] };
    const weblogs: WeblogWindowRow[] = [];
    for (const r of rows)
      if (r.id !== null) weblogs.push({ id: Number(r.id), name: r.name, url: r.url, rss_url: r.rss_url, at_us: Number(r.at_us) });
    return { lastId: Number(rows[0].last_id), pings: n, weblogs };
  });
}

/** Ping rows as the driver returns them (bigints may come as strings) with their numbers made numbers. */
function pingRows(rows: PingPageRow[]): PingPageRow[] {
  for (const r of rows) {
    r.id = Number(r.id);
    r.at_us = Number(r.at_us);
  }
  return rows;
}

/**
 * The pings received in [startUs, endUs) with an id above `afterId`, in id order, at most `limit`: what came
 * into an hour since a reader last looked (ids become visible in id order: EVENT_ORDER_LOCK). The time
 * bounds let the partitioned table skip every day but the hour's. A removed weblog's pings are not returned.
 */
export async function hourPingsAfter(q: Queryable, startUs: number, endUs: number, afterId: number, limit: number): Promise<PingPageRow[]> {
  return withContext('reading the pings of an hour since the last render', async () => {
    const rows = await q.query<PingPageRow>(
      `select id, name, url, rss_url, ${US('received_at')} as at_us from pings
        where received_at >= ${TS(1)} and received_at < ${TS(2)} and id > $3 and ${listedId('pings.weblog_id')}
        order by id limit $4`,
      [startUs, endUs, afterId, limit],
    );
    return pingRows(rows);
  });
}

export interface HourStats {
  n: number;
  maxId: number;
}

/**
 * Reads of the pings received in [startUs, endUs), optionally only those matching `only` (an SQL condition
 * on `pings` that may name the window's bounds as $1 and $2, both timestamps in µs as `tsParam` reads them;
 * verification passes "its outcome is verified"), never those of a weblog the operator removed: how many
 * with the highest id (which bounds the pages of one rendering), and pages oldest first by (received_at, id).
 */
export function hourWindow(only = 'true') {
  const filter = `${only} and ${listedId('pings.weblog_id')}`;
  return {
    stats: (q: Queryable, startUs: number, endUs: number): Promise<HourStats> =>
      withContext('reading an hour of pings', async () => {
        const [r] = await q.query<{ n: number; max_id: number | null }>(
          `select count(*)::bigint as n, max(id) as max_id from pings where received_at >= ${TS(1)} and received_at < ${TS(2)} and ${filter}`,
          [startUs, endUs],
        );
        return { n: Number(r.n), maxId: Number(r.max_id ?? 0) };
      }),
    page: (q: Queryable, startUs: number, endUs: number, maxId: number, after: After | null, limit: number): Promise<PingPageRow[]> =>
      withContext('reading a page of pings', async () => {
        const rows = await q.query<PingPageRow>(
          `select id, name, url, rss_url, ${US('received_at')} as at_us from pings
            where received_at >= ${TS(1)} and received_at < ${TS(2)} and id <= $3
              and (received_at > ${TS(1)} or id > $4) and ${filter}
            order by received_at, id limit $5`,
          [after ? after.atUs : startUs, endUs, maxId, after ? after.id : 0, limit],
        );
        return pingRows(rows);
      }),
  };
}

export interface PingPageRow {
  id: number;
  name: string;
  url: string;
  rss_url: string | null;
  at_us: number;
}

const everyPing = hourWindow();

/** Pings received in [startUs, endUs): how many, and the highest id (bounds the pages of one rendering). */
export const hourStats = everyPing.stats;

/** One page of the pings received in [startUs, endUs) with id <= maxId, oldest first (received_at, id). */
export const hourPage = everyPing.page;

/** The earliest ping still stored (µs), or null: where catching up on archive hours starts. */
export async function firstPingUs(q: Queryable): Promise<number | null> {
  return withContext('reading the first ping', async () => {
    const [r] = await q.query<{ us: number | null }>(`select ${US('min(received_at)')} as us from pings`);
    return r.us === null ? null : Number(r.us);
  });
}
