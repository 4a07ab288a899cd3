// Owns the SQL of what publishing lists under VERIFY_PINGS=require: the weblogs whose latest *verified*
// ping falls in a window (changes.xml, shortChanges.xml) and the verified pings of an hour (archives),
// with the same shapes and keysets as intake's window reads so the documents render them alike.
import type { Queryable } from '../platform/db/database.js';
import { newestFirstPages, type After } from '../platform/db/keyset.js';
import { tsParam as TS, usOf as US } from '../platform/db/sql-time.js';
import { withContext } from '../platform/errors.js';
import type { HourStats, PingPageRow, WeblogWindowRow, WindowStats } from '../intake/ping/window-repository.js';

export async function verifiedWeblogWindowStats(q: Queryable, fromUs: number, toUs: number): Promise<WindowStats> {
  return withContext('reading the verified weblog window', async () => {
    const [r] = await q.query<{ n: number; max_us: number | null }>(
      `select count(*)::bigint as n, ${US('max(last_verified_at)')} as max_us
         from weblogs where last_verified_at > ${TS(1)} and last_verified_at <= ${TS(2)}`,
      [fromUs, toUs],
    );
    return { n: Number(r.n), maxUs: Number(r.max_us ?? 0) };
  });
}

const verifiedWeblogPage = newestFirstPages<WeblogWindowRow>('id, name, url, rss_url, changes_url', 'weblogs', 'last_verified_at', 'id');

export async function verifiedWeblogWindowPage(q: Queryable, fromUs: number, toUs: number, after: After | null, limit: number): Promise<WeblogWindowRow[]> {
  return withContext('reading a page of verified weblogs', () => verifiedWeblogPage(q, fromUs, toUs, after, limit));
}

const VERIFIED = "exists (select 1 from ping_verifications v where v.ping_id = pings.id and v.outcome = 'verified')";

export async function verifiedHourStats(q: Queryable, startUs: number, endUs: number): Promise<HourStats> {
  return withContext('reading an hour of verified pings', async () => {
    const [r] = await q.query<{ n: number; max_id: number | null }>(
      `select count(*)::bigint as n, max(id) as max_id from pings where received_at >= ${TS(1)} and received_at < ${TS(2)} and ${VERIFIED}`,
      [startUs, endUs],
    );
    return { n: Number(r.n), maxId: Number(r.max_id ?? 0) };
  });
}

export async function verifiedHourPage(q: Queryable, startUs: number, endUs: number, maxId: number, after: After | null, limit: number): Promise<PingPageRow[]> {
  return withContext('reading a page of verified pings', async () => {
    const rows = await q.query<PingPageRow>(
      `select id, name, url, rss_url, ${US('received_at')} as at_us from pings
        where received_at >= ${TS(1)} and received_at < ${TS(2)} and id <= $3
          and (received_at > ${TS(1)} or id > $4) and ${VERIFIED}
        order by received_at, id limit $5`,
      [after ? after.atUs : startUs, endUs, maxId, after ? after.id : 0, limit],
    );
    for (const r of rows) {
      r.id = Number(r.id);
      r.at_us = Number(r.at_us);
    }
    return rows;
  });
}
