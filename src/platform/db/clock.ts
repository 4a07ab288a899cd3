// Owns the database's clock as the renderers see it: the current time, and the horizon before which every
// committed row is already visible (the start of the oldest transaction still open on another pingd
// connection), plus the read-only snapshot a multi-query read runs in. Plain values in, plain values out.
import type { Queryable } from './database.js';
import { withContext } from '../errors.js';
import { usOf } from './sql-time.js';

export interface Clock {
  /** The database's clock, µs. */
  nowUs: number;
  /**
   * Just before (µs) the start of the oldest transaction still open on another pingd connection, if any. A
   * row is stamped with its transaction's start time but becomes visible only at commit, so everything
   * stamped at or before this instant is already visible; later stamps may still appear. Null when no such
   * transaction is open (always on the embedded database: one session).
   */
  oldestOpenUs: number | null;
}

/** Transactions older than this are ignored (a stuck session must not hold every cursor back forever). */
export const HORIZON_MAX_LAG_US = 60_000_000;

export async function readClock(q: Queryable): Promise<Clock> {
  return withContext('reading the clock', async () => {
    const [r] = await q.query<{ now_us: number; oldest_us: number | null }>(
      `select ${usOf('clock_timestamp()')} as now_us,
              (select ${usOf('min(xact_start)')} from pg_stat_activity
                where datname = current_database() and pid <> pg_backend_pid() and xact_start is not null
                  and application_name = 'pingd') as oldest_us`,
    );
    const nowUs = Number(r.now_us);
    const oldest = r.oldest_us === null ? null : Number(r.oldest_us);
    // A row stamped exactly at the oldest open start may be invisible still: the horizon is 1 µs before.
    return { nowUs, oldestOpenUs: oldest === null || oldest < nowUs - HORIZON_MAX_LAG_US ? null : Math.min(oldest - 1, nowUs) };
  });
}

/** Starts a read-only snapshot on a dedicated connection (server only), so several reads see one state. */
export async function beginSnapshot(q: Queryable): Promise<void> {
  await withContext('starting a snapshot', () => q.exec('begin isolation level repeatable read read only'));
}

export async function endSnapshot(q: Queryable, ok: boolean): Promise<void> {
  await withContext('ending a snapshot', () => q.exec(ok ? 'commit' : 'rollback'));
}
