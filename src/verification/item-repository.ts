// Owns the SQL that reads the items verification found, for publishing: a time window (fromUs, toUs] of
// them newest first in keyset pages on (received_at, id), and its count and latest entry (the fingerprint
// of /updates.xml). Times cross the boundary as integer microseconds since the epoch.
import type { Queryable } from '../platform/db/database.js';
import { newestFirstPages, type After } from '../platform/db/keyset.js';
import { tsParam as TS, usOf as US } from '../platform/db/sql-time.js';
import { withContext } from '../platform/errors.js';
import { listedId } from '../intake/abuse/removal-repository.js';

// The items of a weblog the operator removed are left out, as its pings are (removal-repository.ts).
const listed = listedId('feed_items.weblog_id');

export async function itemWindowStats(q: Queryable, fromUs: number, toUs: number): Promise<{ n: number; maxUs: number; maxId: number }> {
  return withContext('reading the found-items window', async () => {
    const [r] = await q.query<{ n: number; max_us: number | null; max_id: number | null }>(
      `select count(*)::bigint as n, ${US('max(received_at)')} as max_us, max(id) as max_id
         from feed_items where received_at > ${TS(1)} and received_at <= ${TS(2)} and ${listed}`,
      [fromUs, toUs],
    );
    return { n: Number(r.n), maxUs: Number(r.max_us ?? 0), maxId: Number(r.max_id ?? 0) };
  });
}

export interface ItemWindowRow {
  id: number;
  at_us: number;
  weblog_url: string;
  weblog_name: string;
  feed_url: string;
  title: string | null;
  link: string | null;
  guid: string | null;
  published_us: number | null;
  summary: string | null;
}

const itemPage = newestFirstPages<ItemWindowRow>(
  `id, weblog_url, weblog_name, feed_url, title, link, guid, ${US('published_at')} as published_us, summary`,
  'feed_items',
  'received_at',
  'id',
  listed,
);

/** One page of the items found in (fromUs, toUs], newest first, after the keyset `after`. */
export async function itemWindowPage(
  q: Queryable,
  fromUs: number,
  toUs: number,
  after: After | null,
  limit: number,
): Promise<ItemWindowRow[]> {
  return withContext('reading a page of found items', async () => {
    const rows = await itemPage(q, fromUs, toUs, after, limit);
    for (const r of rows) if (r.published_us !== null) r.published_us = Number(r.published_us);
    return rows;
  });
}
