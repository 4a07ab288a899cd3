// Owns the SQL of the per-minute statistics (stats_minutes, stats_minute_hosts): adding an instance's
// tally, reading a window of it, naming the busiest hosts, and dropping minutes past a day.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';
import type { HostCount, SeriesCount } from './minute-tally.js';

/** Adds counts to what other flushes (and other instances) wrote for the same minutes. */
export async function addMinuteCounts(q: Queryable, counts: readonly SeriesCount[], hosts: readonly HostCount[]): Promise<void> {
  await withContext('writing the minute statistics failed', async () => {
    if (counts.length > 0) {
      await q.query(
        `insert into stats_minutes (minute, series, n)
           select * from unnest($1::timestamptz[], $2::text[], $3::bigint[])
         on conflict (minute, series) do update set n = stats_minutes.n + excluded.n`,
        [counts.map((c) => new Date(c.minute)), counts.map((c) => c.series), counts.map((c) => c.n)],
      );
    }
    if (hosts.length > 0) {
      await q.query(
        `insert into stats_minute_hosts (minute, host, accepted, refused)
           select * from unnest($1::timestamptz[], $2::text[], $3::bigint[], $4::bigint[])
         on conflict (minute, host) do update
           set accepted = stats_minute_hosts.accepted + excluded.accepted, refused = stats_minute_hosts.refused + excluded.refused`,
        [hosts.map((h) => new Date(h.minute)), hosts.map((h) => h.host), hosts.map((h) => h.accepted), hosts.map((h) => h.refused)],
      );
    }
  });
}

/**
 * Every stored count of the minutes in [from, to] (minute starts, ms). One range read of the primary key,
 * returned as one row per series with its minutes and counts as arrays: a day is ~9,000 rows, and
 * decoding them one by one (a Date each) took 60–200 ms where the read itself took 2–6 ms (measured).
 */
export async function minuteCounts(q: Queryable, from: number, to: number): Promise<SeriesCount[]> {
  const rows = await withContext('reading the minute statistics failed', () =>
    q.query<{ series: string; minutes: (string | number)[]; ns: (string | number)[] }>(
      `select series, array_agg((extract(epoch from minute) * 1000)::bigint) as minutes, array_agg(n) as ns
         from stats_minutes where minute between $1 and $2 group by series`,
      [new Date(from), new Date(to)],
    ),
  );
  const out: SeriesCount[] = [];
  for (const r of rows)
    for (let i = 0; i < r.minutes.length; i++) out.push({ minute: Number(r.minutes[i]), series: r.series, n: Number(r.ns[i]) });
  return out;
}

/** The hosts with the most pings over the minutes in [from, to], busiest first. */
export async function topHosts(
  q: Queryable,
  from: number,
  to: number,
  limit: number,
): Promise<{ host: string; accepted: number; refused: number }[]> {
  const rows = await withContext('reading the busiest hosts failed', () =>
    q.query<{ host: string; accepted: string | number; refused: string | number }>(
      `select host, sum(accepted) as accepted, sum(refused) as refused
         from stats_minute_hosts where minute between $1 and $2
        group by host order by sum(accepted) + sum(refused) desc, host limit $3`,
      [new Date(from), new Date(to), limit],
    ),
  );
  return rows.map((r) => ({ host: r.host, accepted: Number(r.accepted), refused: Number(r.refused) }));
}

/** Drops minutes before `before` (ms); returns how many rows went. */
export async function pruneMinutes(q: Queryable, before: number): Promise<number> {
  return withContext('pruning the minute statistics failed', async () => {
    const a = await q.query<{ n: string | number }>(
      'with d as (delete from stats_minutes where minute < $1 returning 1) select count(*) as n from d',
      [new Date(before)],
    );
    const b = await q.query<{ n: string | number }>(
      'with d as (delete from stats_minute_hosts where minute < $1 returning 1) select count(*) as n from d',
      [new Date(before)],
    );
    return Number(a[0].n) + Number(b[0].n);
  });
}
