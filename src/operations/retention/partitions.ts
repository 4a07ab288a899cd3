// Owns the shape of the partitioned logs over time (migrations/011_partitioned_logs.sql): which day
// partitions must exist ahead of the clock, which ones retention drops whole, and which it trims row by row.
import type { Queryable } from '../../platform/db/database.js';
import { createDayPartition, listLogPartitions } from './partition-repository.js';

/** The append-only logs partitioned by received_at, one partition per UTC day. */
export const PARTITIONED_LOGS = ['pings', 'rssping_payloads', 'feed_items'] as const;
export type PartitionedLog = (typeof PARTITIONED_LOGS)[number];

/** Days created ahead of today: a week of scheduler outages before rows fall into the default partition. */
export const AHEAD_DAYS = 7;

const DAY_MS = 86_400_000;

export interface LogPartition {
  name: string;
  /** day: one UTC day; before: everything before `to` (the rows migration 011 found); default: the rest. */
  kind: 'day' | 'before' | 'default';
  from: Date | null;
  to: Date | null;
}

export const utcDay = (d: Date): Date => new Date(Math.floor(d.getTime() / DAY_MS) * DAY_MS);

const ymd = (d: Date): string => d.toISOString().slice(0, 10).replace(/-/g, '');

const parseYmd = (s: string): Date => new Date(`${s.slice(0, 4)}-${s.slice(4, 6)}-${s.slice(6, 8)}T00:00:00Z`);

export const dayPartitionName = (log: PartitionedLog, day: Date): string => `${log}_d${ymd(utcDay(day))}`;

/** Reads a partition's range from its name (the names are made only here and in migration 011). */
export function parsePartition(log: PartitionedLog, name: string): LogPartition | null {
  if (name === `${log}_default`) return { name, kind: 'default', from: null, to: null };
  const rest = name.startsWith(`${log}_`) ? name.slice(log.length + 1) : '';
  let m = /^d(\d{8})$/.exec(rest);
  if (m) {
    const from = parseYmd(m[1]);
    return { name, kind: 'day', from, to: new Date(from.getTime() + DAY_MS) };
  }
  m = /^before_(\d{8})$/.exec(rest);
  if (m) return { name, kind: 'before', from: null, to: parseYmd(m[1]) };
  return null;
}

/** The UTC days in [from, to) that no partition covers yet. */
export function daysMissing(parts: LogPartition[], from: Date, to: Date): Date[] {
  const out: Date[] = [];
  for (let t = utcDay(from).getTime(); t < to.getTime(); t += DAY_MS) {
    const covered = parts.some(
      (p) => p.kind !== 'default' && (p.from === null || p.from.getTime() <= t) && p.to !== null && t < p.to.getTime(),
    );
    if (!covered) out.push(new Date(t));
  }
  return out;
}

/**
 * What retention does to a log for `cutoff`: partitions wholly before it are dropped (one catalog change,
 * no row is read); the default partition and a `before` partition that reaches past the cutoff keep their
 * newer rows and lose the older ones in batches. A day partition that straddles the cutoff is kept whole
 * until the next day: raw pings are kept RETENTION_DAYS and at most a day more.
 */
export function retentionPlan(parts: LogPartition[], cutoff: Date): { drop: LogPartition[]; trim: LogPartition[] } {
  const drop = parts.filter((p) => p.kind !== 'default' && p.to !== null && p.to.getTime() <= cutoff.getTime());
  const trim = parts.filter((p) => p.kind === 'default' || (p.kind === 'before' && p.to !== null && p.to.getTime() > cutoff.getTime()));
  drop.sort((a, b) => (a.to?.getTime() ?? 0) - (b.to?.getTime() ?? 0));
  return { drop, trim };
}

export async function logPartitions(q: Queryable, log: PartitionedLog): Promise<LogPartition[]> {
  const names = await listLogPartitions(q, log);
  return names.map((n) => parsePartition(log, n)).filter((p): p is LogPartition => p !== null);
}

/**
 * Creates the day partitions of every log covering [from, to) that do not exist yet (rows already in the
 * default partition for such a day move into it). Safe from several instances at once. Returns the
 * partitions created.
 */
export async function ensureLogPartitions(q: Queryable, from: Date, to: Date): Promise<string[]> {
  const made: string[] = [];
  for (const log of PARTITIONED_LOGS) {
    for (const day of daysMissing(await logPartitions(q, log), from, to)) {
      if (await createDayPartition(q, log, dayPartitionName(log, day), day, new Date(day.getTime() + DAY_MS)))
        made.push(dayPartitionName(log, day));
    }
  }
  return made;
}

/**
 * The days the scheduler keeps made: tomorrow and the AHEAD_DAYS - 1 after it. Never today: a partition made
 * for the range intake is writing into makes a batch already routed to the default partition fail
 * ("violates partition constraint", measured on PostgreSQL 15), so days are made before any row can be
 * meant for them. On a new database the first day's rows stay in the default partition.
 */
export const aheadWindow = (now: Date): { from: Date; to: Date } => {
  const tomorrow = utcDay(now).getTime() + DAY_MS;
  return { from: new Date(tomorrow), to: new Date(tomorrow + AHEAD_DAYS * DAY_MS) };
};
