// Owns the SQL of retention's row deletes: raw pings, and the RSS Ping payloads, verification jobs and found
// items stored beside them, older than a cutoff, a bounded batch per statement (for the partitioned logs,
// only in the partitions that are not dropped whole), and counting what a prune would remove. (Rendered archives are
// the rendering store's rows.) Plain values in, plain numbers out.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';

/**
 * The append-only logs retention trims, by received_at. RSS Ping payloads (migrations/003_rss_ping.sql)
 * are part of the raw ping they came with and follow its retention; that table has no foreign key to
 * pings precisely so it can be pruned on its own.
 */
const LOGS: Record<string, { table: string; key: string; label: string; position?: string }> = {
  pings: { table: 'pings', key: 'id', label: 'pings', position: 't.id' },
  payloads: { table: 'rssping_payloads', key: 'ping_id', label: 'RSS Ping payloads' },
  // Verification's job rows and the items it found (migrations/004_verification.sql), by the same rule.
  verifications: { table: 'ping_verifications', key: 'ping_id', label: 'verifications', position: 'greatest(t.event_id, t.release_id)' },
  items: { table: 'feed_items', key: 'id', label: 'found items' },
};

type Log = 'pings' | 'payloads' | 'verifications' | 'items';

/**
 * Deletes at most `limit` rows received before `cutoff`, oldest first, in one statement (its own short
 * transaction when run outside one). Returns how many were deleted; fewer than `limit` means none are left.
 * The subselect walks the received_at index, and intake only ever inserts newer rows, so the two never
 * wait for each other's locks. weblogs rows (first/last ping, ping_count) are not touched.
 */
async function deleteBefore(q: Queryable, log: Log, cutoff: Date, limit: number, table = LOGS[log].table): Promise<number> {
  const { key, label, position } = LOGS[log];
  // Rows that were live-stream events move the stream's horizon up in the same statement: a client resuming
  // from before it is told that events may be gone (migrations/005_stream.sql).
  const horizon = position
    ? `, h as (update stream_horizon set pruned_through = greatest(pruned_through, m.p) from (select max(p) as p from gone) m where m.p is not null)`
    : '';
  return withContext(`deleting ${label} received before ${cutoff.toISOString()} failed`, async () => {
    const [r] = await q.query<{ n: number }>(
      `with doomed as (select ${key} from ${table} where received_at < $1 order by received_at limit $2),
            gone as (delete from ${table} t using doomed where t.${key} = doomed.${key} returning ${position ?? '1'} as p)${horizon}
       select count(*)::int as n from gone`,
      [cutoff, limit],
    );
    return Number(r.n);
  });
}

async function countBefore(q: Queryable, log: Log, cutoff: Date): Promise<number> {
  const { table, label } = LOGS[log];
  return withContext(`counting ${label} received before ${cutoff.toISOString()} failed`, async () => {
    const [r] = await q.query<{ n: number }>(`select count(*)::bigint as n from ${table} where received_at < $1`, [cutoff]);
    return Number(r.n);
  });
}

/**
 * The same batched delete on one partition of a partitioned log (its default partition, or the rows
 * migration 011 found): src/operations/retention/partitions.ts says which.
 */
export const deletePartitionRowsBefore = (
  q: Queryable,
  log: 'pings' | 'payloads' | 'items',
  partition: string,
  cutoff: Date,
  limit: number,
): Promise<number> => deleteBefore(q, log, cutoff, limit, `"${partition.replace(/"/g, '""')}"`);
export const deleteVerificationsBefore = (q: Queryable, cutoff: Date, limit: number): Promise<number> =>
  deleteBefore(q, 'verifications', cutoff, limit);
export const countVerificationsBefore = (q: Queryable, cutoff: Date): Promise<number> => countBefore(q, 'verifications', cutoff);
