// Owns `pingd prune`: one retention pass from the command line, under the same advisory lock as the
// scheduled job, with the configured limits unless flags override them; prints what it removed.
import type { Config } from '../../platform/config.js';
import type { CommandDeps } from '../../platform/command-deps.js';
import { prune, RETENTION_LOCK, type PruneResult } from './prune.js';

export const PRUNE_OPTIONS = {
  days: { type: 'string' },
  'archive-days': { type: 'string' },
  'dry-run': { type: 'boolean' },
  json: { type: 'boolean' },
} as const;

export const PRUNE_USAGE = `pingd prune [--days N] [--archive-days N] [--dry-run] [--json]

  --days N           delete raw pings older than N days (default RETENTION_DAYS; 0 = none)
  --archive-days N   delete rendered hourly archives older than N days (default ARCHIVE_RETENTION_DAYS; 0 = none)
  --dry-run          count what would be deleted, delete nothing
  --json             print the result as JSON

Exit codes: 0 done, 1 failure, 2 usage error, 75 another instance is pruning now (try again later).`;

/** A non-negative whole number of days from a flag, or an error message. */
export function parseDays(raw: unknown, flag: string, fallback: number): number | string {
  if (raw === undefined) return fallback;
  const s = String(raw).trim();
  if (!/^\d{1,5}$/.test(s) || Number(s) > 36500)
    return `${flag} must be a whole number of days between 0 and 36500, got ${JSON.stringify(raw)}`;
  return Number(s);
}

function describe(r: PruneResult): string {
  const verb = r.dryRun ? 'would delete' : 'deleted';
  const lines: string[] = [];
  lines.push(
    r.pingCutoff
      ? `${verb} ${r.pingsDeleted} pings received before ${r.pingCutoff.toISOString()} (and ${r.payloadsDeleted} RSS Ping payloads, ${r.verificationsDeleted} verifications, ${r.itemsDeleted} found items)`
      : 'raw pings are kept forever (days = 0)',
  );
  lines.push(
    r.archiveCutoff
      ? `${verb} ${r.archivesDeleted} hourly archives older than ${r.archiveCutoff.toISOString()}`
      : 'hourly archives are kept forever (archive days = 0)',
  );
  lines.push(`${verb} ${r.relayJobsDeleted} finished relay jobs`);
  if (r.partitionsDropped > 0) lines.push(`dropped ${r.partitionsDropped} day partitions whole`);
  if (r.lockTimeouts > 0) lines.push(`${r.lockTimeouts} partition could not be dropped at once (a long read held its log): run again`);
  return lines.join('\n');
}

export async function pruneCommand(
  values: Record<string, unknown>,
  config: Config,
  deps: CommandDeps<'OK' | 'FAILURE' | 'USAGE' | 'BUSY'>,
): Promise<number> {
  const { EXIT } = deps;
  const days = parseDays(values.days, '--days', config.RETENTION_DAYS);
  const archiveDays = parseDays(values['archive-days'], '--archive-days', config.ARCHIVE_RETENTION_DAYS);
  for (const v of [days, archiveDays]) {
    if (typeof v === 'string') {
      deps.err(`pingd prune: ${v}\nUsage: ${PRUNE_USAGE}`);
      return EXIT.USAGE;
    }
  }
  const db = await deps.openDb(config);
  try {
    const r = await db.withTryAdvisoryLock(RETENTION_LOCK, (q) =>
      prune(q, {
        pingDays: days as number,
        archiveDays: archiveDays as number,
        batchSize: config.RETENTION_BATCH,
        dryRun: Boolean(values['dry-run']),
        relayHistorySec: config.PING_MIN_INTERVAL,
      }),
    );
    if (!r.ran) {
      deps.err('pingd prune: another instance is pruning now; try again later');
      return EXIT.BUSY;
    }
    deps.out(values.json ? JSON.stringify(r.value) : describe(r.value));
    return EXIT.OK;
  } finally {
    await db.close();
  }
}
