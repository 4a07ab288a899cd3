// Owns the SQL of retention: deleting raw pings, the RSS Ping payloads stored beside them (and rendered
// hourly archives) older than a cutoff, a bounded batch per statement, and counting what a prune would
// remove. Plain values in, plain numbers out.
import type { Queryable } from '../../platform/db/database.js';

/**
 * Deletes at most `limit` pings received before `cutoff`, oldest first, in one statement (its own short
 * transaction when run outside one). Returns how many were deleted; fewer than `limit` means none are left.
 * The subselect walks the received_at index, and intake only ever inserts newer rows, so the two never
 * wait for each other's locks. weblogs rows (first/last ping, ping_count) are not touched.
 */
const DELETE_PINGS = `
with doomed as (
  select id from pings where received_at < $1 order by received_at limit $2
),
gone as (
  delete from pings p using doomed where p.id = doomed.id returning 1
)
select count(*)::int as n from gone`;

export async function deletePingsBefore(q: Queryable, cutoff: Date, limit: number): Promise<number> {
  try {
    const [r] = await q.query<{ n: number }>(DELETE_PINGS, [cutoff, limit]);
    return Number(r.n);
  } catch (err) {
    throw new Error(`deleting pings received before ${cutoff.toISOString()} failed: ${(err as Error).message}`, { cause: err });
  }
}

export async function countPingsBefore(q: Queryable, cutoff: Date): Promise<number> {
  try {
    const [r] = await q.query<{ n: number }>('select count(*)::bigint as n from pings where received_at < $1', [cutoff]);
    return Number(r.n);
  } catch (err) {
    throw new Error(`counting pings received before ${cutoff.toISOString()} failed: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * RSS Ping payloads (migrations/003_rss_ping.sql) are part of the raw ping they came with and follow its
 * retention; that table has no foreign key to pings precisely so it can be pruned on its own.
 */
const DELETE_RSSPING_PAYLOADS = `
with doomed as (
  select ping_id from rssping_payloads where received_at < $1 order by received_at limit $2
),
gone as (
  delete from rssping_payloads p using doomed where p.ping_id = doomed.ping_id returning 1
)
select count(*)::int as n from gone`;

export async function deleteRssPingPayloadsBefore(q: Queryable, cutoff: Date, limit: number): Promise<number> {
  try {
    const [r] = await q.query<{ n: number }>(DELETE_RSSPING_PAYLOADS, [cutoff, limit]);
    return Number(r.n);
  } catch (err) {
    throw new Error(`deleting RSS Ping payloads received before ${cutoff.toISOString()} failed: ${(err as Error).message}`, { cause: err });
  }
}

export async function countRssPingPayloadsBefore(q: Queryable, cutoff: Date): Promise<number> {
  try {
    const [r] = await q.query<{ n: number }>('select count(*)::bigint as n from rssping_payloads where received_at < $1', [cutoff]);
    return Number(r.n);
  } catch (err) {
    throw new Error(`counting RSS Ping payloads received before ${cutoff.toISOString()} failed: ${(err as Error).message}`, { cause: err });
  }
}
