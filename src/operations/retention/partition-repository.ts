// Owns the SQL that changes the partitions of the logs: listing them, creating a day, dropping one whole.
// Each change is one statement (a DO block: its own transaction on either backend, and on PostgreSQL one
// that gives up rather than queue intake behind it).
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';

/** Session advisory lock key serialising partition changes across instances ('part'). */
const PARTITION_LOCK = 0x70617274;

/**
 * How long a partition change waits for its lock. Dropping a partition takes an ACCESS EXCLUSIVE lock on the
 * log (PostgreSQL needs it to change the partition set while a default partition exists), and every insert
 * queued behind a waiting lock waits too: waiting at most this long bounds what retention can add to a
 * ping's latency; a change that could not get its lock is tried again on the next pass.
 */
export const PARTITION_LOCK_TIMEOUT_MS = 200;

const lit = (d: Date): string => `'${d.toISOString()}'`;
/** Identifiers here come from PARTITIONED_LOGS and names made from dates; quoted all the same. */
const ident = (s: string): string => `"${s.replace(/"/g, '""')}"`;
const str = (s: string): string => `'${s.replace(/'/g, "''")}'`;

export async function listLogPartitions(q: Queryable, log: string): Promise<string[]> {
  const rows = await q.query<{ name: string }>(
    `select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = to_regclass($1) order by 1`,
    [log],
  );
  return rows.map((r) => r.name);
}

/** Whether the error is PostgreSQL giving up on a lock (lock_timeout): the change is retried later. */
export function isLockTimeout(err: unknown): boolean {
  for (let e = err as { code?: string; cause?: unknown } | undefined, i = 0; e && i < 5; e = e.cause as typeof e, i++)
    if (e.code === '55P03') return true;
  return false;
}

/**
 * Creates `name` as the partition of `log` for [from, to): made beside the log, filled with the rows the
 * default partition holds for that range, then attached (ATTACH takes only a SHARE UPDATE EXCLUSIVE lock on
 * the log, which inserts into other partitions do not wait for). Returns false when it already existed.
 */
export async function createDayPartition(q: Queryable, log: string, name: string, from: Date, to: Date): Promise<boolean> {
  return withContext(`creating partition ${name} failed`, async () => {
    const before = await q.query<{ r: string | null }>('select to_regclass($1)::text as r', [name]);
    if (before[0]?.r) return false;
    await q.exec(`do $$ begin
      perform pg_advisory_xact_lock(${PARTITION_LOCK});
      perform set_config('lock_timeout', '${PARTITION_LOCK_TIMEOUT_MS * 5}ms', true);
      -- The catalog cache is not refreshed by an advisory lock: a day another instance made a moment ago may
      -- look missing here, hence the duplicate_table handler too.
      if to_regclass(${str(name)}) is null then
        -- Inserts routed to the default partition wait while its rows for the day move (none, normally):
        -- one arriving between the move and the attach would make the attach fail.
        lock table ${ident(`${log}_default`)} in exclusive mode;
        create table ${ident(name)} (like ${ident(log)} including defaults including constraints including storage);
        with moved as (delete from ${ident(`${log}_default`)} where received_at >= ${lit(from)} and received_at < ${lit(to)} returning *)
          insert into ${ident(name)} select * from moved;
        alter table ${ident(log)} attach partition ${ident(name)} for values from (${lit(from)}) to (${lit(to)});
      end if;
    exception when duplicate_table then null;
    end $$`);
    return true;
  });
}

export async function countRows(q: Queryable, table: string, before?: Date): Promise<number> {
  const [r] = await q.query<{ n: number }>(
    `select count(*)::bigint as n from ${ident(table)}${before ? ' where received_at < $1' : ''}`,
    before ? [before] : [],
  );
  return Number(r.n);
}

/**
 * Drops partition `name` of `log` whole. For the ping log, the live stream's horizon moves past its
 * newest id in the same transaction (migrations/005_stream.sql): a client resuming from before it is told
 * that events may be gone. Throws a lock timeout (isLockTimeout) when the lock did not come in time.
 */
export async function dropPartition(q: Queryable, log: string, name: string): Promise<void> {
  const horizon =
    log === 'pings'
      ? `update stream_horizon set pruned_through = greatest(pruned_through, m.p) from (select max(id) as p from ${ident(name)}) m where m.p is not null;`
      : '';
  await q.exec(`do $$ begin
    perform pg_advisory_xact_lock(${PARTITION_LOCK});
    perform set_config('lock_timeout', '${PARTITION_LOCK_TIMEOUT_MS}ms', true);
    ${horizon}
    drop table if exists ${ident(name)};
  end $$`);
}
