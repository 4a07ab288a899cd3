// Owns the SQL behind `pingd stats` and the status page: totals, pings per hour over a window, the most
// pinged weblogs and the latest pings.
// Plain values in, plain rows out; hours are UTC.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';
import { totalPings } from '../../intake/ping/window-repository.js';

const HOUR_MS = 3_600_000;

export interface Totals {
  weblogs: number;
  /** Every ping ever accepted (intake's counter, ping_totals: retention does not lower it). */
  pingsAccepted: number;
  /** Raw ping rows still stored (within RETENTION_DAYS). */
  pingsStored: number;
  oldestStoredPing: Date | null;
  newestPing: Date | null;
  weblogsPingedLastHour: number;
  weblogsPingedLastDay: number;
}

export async function getTotals(q: Queryable, now: Date = new Date()): Promise<Totals> {
  return withContext(`reading totals failed`, async () => {
    const [w] = await q.query<{ weblogs: number; newest: Date | null; hour: number; day: number }>(
      `select count(*)::bigint as weblogs,
              max(last_ping_at) as newest,
              count(*) filter (where last_ping_at >= $1)::bigint as hour,
              count(*) filter (where last_ping_at >= $2)::bigint as day
         from weblogs`,
      [new Date(now.getTime() - HOUR_MS), new Date(now.getTime() - 24 * HOUR_MS)],
    );
    const [p] = await q.query<{ stored: number; oldest: Date | null }>(
      'select count(*)::bigint as stored, (select min(received_at) from pings) as oldest from pings',
    );
    return {
      weblogs: Number(w.weblogs),
      pingsAccepted: await totalPings(q),
      pingsStored: Number(p.stored),
      oldestStoredPing: p.oldest ? new Date(p.oldest) : null,
      newestPing: w.newest ? new Date(w.newest) : null,
      weblogsPingedLastHour: Number(w.hour),
      weblogsPingedLastDay: Number(w.day),
    };
  });
}

export interface HourCount {
  /** Start of the UTC hour. */
  hour: Date;
  pings: number;
}

/**
 * Accepted pings per UTC hour for the `hours` hours ending with the current one (oldest first; hours
 * without pings are listed with 0). One range scan of the received_at index.
 */
export async function pingsPerHour(q: Queryable, hours: number, now: Date = new Date()): Promise<HourCount[]> {
  const current = Math.floor(now.getTime() / HOUR_MS) * HOUR_MS;
  const from = new Date(current - (hours - 1) * HOUR_MS);
  const to = new Date(current + HOUR_MS);
  const rows = await withContext('counting pings per hour failed', () =>
    q.query<{ h: number; n: number }>(
      `select floor((extract(epoch from received_at) - extract(epoch from $1::timestamptz)) / 3600)::int as h, count(*)::bigint as n
         from pings
        where received_at >= $1 and received_at < $2
        group by 1`,
      [from, to],
    ),
  );
  const counts = new Map(rows.map((r) => [Number(r.h), Number(r.n)]));
  return Array.from({ length: hours }, (_v, i) => ({ hour: new Date(from.getTime() + i * HOUR_MS), pings: counts.get(i) ?? 0 }));
}

export interface TopWeblog {
  url: string;
  name: string;
  pingCount: number;
  lastPingAt: Date;
}

/** The weblogs with the most accepted pings ever, most first. */
export async function topWeblogs(q: Queryable, limit: number): Promise<TopWeblog[]> {
  return withContext(`reading the most pinged weblogs failed`, async () => {
    const rows = await q.query<{ url: string; name: string; ping_count: number; last_ping_at: Date }>(
      'select url, name, ping_count, last_ping_at from weblogs order by ping_count desc, last_ping_at desc, id limit $1',
      [limit],
    );
    return rows.map((r) => ({ url: r.url, name: r.name, pingCount: Number(r.ping_count), lastPingAt: new Date(r.last_ping_at) }));
  });
}

export interface RecentPing {
  id: number;
  receivedAt: Date;
  method: string;
  name: string;
  url: string;
}

/** The latest accepted pings, newest first: one backward read of the primary key. */
export async function recentPings(q: Queryable, limit: number): Promise<RecentPing[]> {
  return withContext('reading the latest pings failed', async () => {
    const rows = await q.query<{ id: number; received_at: Date; method: string; name: string; url: string }>(
      'select id, received_at, method, name, url from pings order by id desc limit $1',
      [limit],
    );
    return rows.map((r) => ({ id: Number(r.id), receivedAt: new Date(r.received_at), method: r.method, name: r.name, url: r.url }));
  });
}
