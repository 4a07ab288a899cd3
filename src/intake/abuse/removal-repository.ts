// Owns the SQL of weblogs the operator removed from the published lists (migrations/023_weblog_removals.sql):
// marking and unmarking one, what is known of it, the hours its pings fall in, and the condition every
// listing read adds so that a removed weblog's pings, earlier and later, are listed nowhere. A marker, not a
// deletion: the pings stay stored and acknowledged.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';
import { notHeldId, notHeldUrl } from '../../spam/spam-repository.js';

/**
 * SQL condition "the weblog whose id is `weblogIdCol` is not removed", for the reads that list pings or
 * weblogs. The table holds a few rows: an anti-join of it costs next to nothing, and nothing when empty.
 */
export const notRemovedId = (weblogIdCol: string): string =>
  `not exists (select 1 from weblog_removals wr where wr.weblog_id = ${weblogIdCol})`;

/** The same by the weblog's URL, for rows that carry no weblog id (RSS Ping payloads' site_url). */
export const notRemovedUrl = (urlCol: string): string => `not exists (select 1 from weblog_removals wr where wr.url = ${urlCol})`;

/**
 * SQL condition "the weblog whose id is `weblogIdCol` is listed": neither removed by the operator nor held
 * as spam (src/spam/spam-repository.ts). Every read that lists pings or weblogs in a document adds it.
 */
export const listedId = (weblogIdCol: string): string => `${notRemovedId(weblogIdCol)} and ${notHeldId(weblogIdCol)}`;

/** The same by the weblog's URL (RSS Ping payloads' site_url). */
export const listedUrl = (urlCol: string): string => `${notRemovedUrl(urlCol)} and ${notHeldUrl(urlCol)}`;

export interface WeblogRemoval {
  weblogId: number;
  url: string;
  /** Pings accepted from it, ever (weblogs.ping_count). */
  pingCount: number;
  /** When the operator removed it; null while it is listed. */
  removedAt: Date | null;
}

/** The weblog stored under the normalised `url`, with its removal if any; undefined when pingd never heard of it. */
export async function weblogRemoval(q: Queryable, url: string): Promise<WeblogRemoval | undefined> {
  const [r] = await withContext(`reading the weblog ${url}`, () =>
    q.query<{ id: number; url: string; ping_count: number; removed_at: Date | null }>(
      `select w.id, w.url, w.ping_count, wr.removed_at
         from weblogs w left join weblog_removals wr on wr.weblog_id = w.id where w.url = $1`,
      [url],
    ),
  );
  if (!r) return undefined;
  return { weblogId: Number(r.id), url: r.url, pingCount: Number(r.ping_count), removedAt: r.removed_at && new Date(r.removed_at) };
}

/** When the weblog was removed, or null while it is listed (the "did my ping arrive?" page). */
export async function removedAt(q: Queryable, weblogId: number): Promise<Date | null> {
  const [r] = await withContext(`reading whether weblog ${weblogId} was removed`, () =>
    q.query<{ removed_at: Date }>('select removed_at from weblog_removals where weblog_id = $1', [weblogId]),
  );
  return r ? new Date(r.removed_at) : null;
}

/** Marks the weblog removed; a weblog removed already keeps its first removal time. Returns that time. */
export async function markRemoved(q: Queryable, weblogId: number, url: string): Promise<Date> {
  const [r] = await withContext(`removing the weblog ${url}`, () =>
    q.query<{ removed_at: Date }>(
      `with ins as (insert into weblog_removals (weblog_id, url) values ($1, $2) on conflict (weblog_id) do nothing returning removed_at)
       select removed_at from ins union all select removed_at from weblog_removals where weblog_id = $1 limit 1`,
      [weblogId, url],
    ),
  );
  return new Date(r.removed_at);
}

/** Lists the weblog again; false when it was not removed. */
export async function unmarkRemoved(q: Queryable, weblogId: number): Promise<boolean> {
  const rows = await withContext(`restoring weblog ${weblogId}`, () =>
    q.query('delete from weblog_removals where weblog_id = $1 returning weblog_id', [weblogId]),
  );
  return rows.length > 0;
}

/**
 * The UTC hours (start, ms, oldest first) in which the weblog's stored pings were received: the archives
 * that list it. Read through pings_weblog_id (weblog_id, id) in each day's partition.
 */
export async function pingHours(q: Queryable, weblogId: number): Promise<number[]> {
  const rows = await withContext(`reading the hours of weblog ${weblogId}'s pings`, () =>
    q.query<{ h: number }>(
      `select distinct floor(extract(epoch from received_at) / 3600)::bigint as h from pings where weblog_id = $1 order by h`,
      [weblogId],
    ),
  );
  return rows.map((r) => Number(r.h) * 3_600_000);
}
