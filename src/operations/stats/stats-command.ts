// Owns `pingd stats`: totals, pings per UTC hour over the last day and the most pinged weblogs, as a
// table for a person or JSON for a script.
import type { Config } from '../../platform/config.js';
import type { Db } from '../../platform/db/database.js';
import type { CommandDeps } from '../../platform/command-deps.js';
import { getTotals, pingsPerHour, topWeblogs, type HourCount, type Totals, type TopWeblog } from './stats-repository.js';

export const STATS_OPTIONS = {
  hours: { type: 'string' },
  top: { type: 'string' },
  json: { type: 'boolean' },
} as const;

export const STATS_USAGE = `pingd stats [--hours N] [--top N] [--json]

  --hours N   pings per hour for the last N hours (default 24, at most 720)
  --top N     list the N most pinged weblogs (default 10, at most 1000)
  --json      print the result as JSON

Exit codes: 0 done, 1 failure (database unavailable), 2 usage error.`;

export interface StatsReport {
  generatedAt: Date;
  totals: Totals;
  perHour: HourCount[];
  top: TopWeblog[];
}

function bounded(raw: unknown, flag: string, fallback: number, max: number): number | string {
  if (raw === undefined) return fallback;
  const s = String(raw).trim();
  if (!/^\d{1,4}$/.test(s) || Number(s) < 1 || Number(s) > max)
    return `${flag} must be a whole number between 1 and ${max}, got ${JSON.stringify(raw)}`;
  return Number(s);
}

const iso = (d: Date | null) => (d ? d.toISOString().replace(/\.\d{3}Z$/, 'Z') : '-');

/** The human-readable report: pure, so tests can check it from rows. */
export function formatStats(s: StatsReport): string {
  const t = s.totals;
  const out: string[] = [];
  out.push(`weblogs                 ${t.weblogs}`);
  out.push(`pings accepted (ever)   ${t.pingsAccepted}`);
  out.push(`pings stored            ${t.pingsStored} (oldest ${iso(t.oldestStoredPing)})`);
  out.push(`newest ping             ${iso(t.newestPing)}`);
  out.push(`weblogs pinged          ${t.weblogsPingedLastHour} in the last hour, ${t.weblogsPingedLastDay} in the last day`);
  out.push('', `pings per hour (UTC), last ${s.perHour.length} hours:`);
  const peak = Math.max(1, ...s.perHour.map((h) => h.pings));
  for (const h of s.perHour) {
    const bar = '#'.repeat(Math.round((h.pings / peak) * 40));
    out.push(`  ${h.hour.toISOString().slice(0, 13).replace('T', ' ')}:00  ${String(h.pings).padStart(8)}  ${bar}`);
  }
  out.push('', `top ${s.top.length} weblogs by pings accepted:`);
  if (s.top.length === 0) out.push('  (none yet)');
  for (const w of s.top) out.push(`  ${String(w.pingCount).padStart(8)}  ${iso(w.lastPingAt)}  ${w.url}  ${JSON.stringify(w.name)}`);
  return out.join('\n');
}

export async function collectStats(db: Db, hours: number, top: number, now: Date = new Date()): Promise<StatsReport> {
  return {
    generatedAt: now,
    totals: await getTotals(db, now),
    perHour: await pingsPerHour(db, hours, now),
    top: await topWeblogs(db, top),
  };
}

export async function statsCommand(values: Record<string, unknown>, config: Config, deps: CommandDeps<'OK' | 'USAGE'>): Promise<number> {
  const hours = bounded(values.hours, '--hours', 24, 720);
  const top = bounded(values.top, '--top', 10, 1000);
  for (const v of [hours, top]) {
    if (typeof v === 'string') {
      deps.err(`pingd stats: ${v}\nUsage: ${STATS_USAGE}`);
      return deps.EXIT.USAGE;
    }
  }
  const db = await deps.openDb(config);
  try {
    const s = await collectStats(db, hours as number, top as number);
    deps.out(values.json ? JSON.stringify(s, null, 2) : formatStats(s));
    return deps.EXIT.OK;
  } finally {
    await db.close();
  }
}
