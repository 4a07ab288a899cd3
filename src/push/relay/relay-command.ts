// Owns `pingd relay`: `status` (per target: delivered / refused / failed counts, dead letters, the queue
// with what its bound dropped and the loop window suppressed, breaker state, last error) and
// `retry <target>` (dead letters back in the queue), for a person or, with --json, a script.
import { redactUrl } from '../../platform/redact.js';
import type { Config } from '../../platform/config.js';
import type { CommandDeps } from '../../platform/command-deps.js';
import { DEFAULT_RELAY_TIMING } from './relay.js';
import { retryDead, targetKnown, targetStatus, type TargetStatus } from './target-repository.js';

export const RELAY_OPTIONS = {
  json: { type: 'boolean' },
} as const;

export const RELAY_USAGE = `pingd relay status [--json]
pingd relay retry <target URL>

  status   per target: relays delivered, refused (flerror 1) and failed (attempts, retried), dead letters
           (out of attempts), jobs waiting and the oldest, waiting weblogs dropped because the queue held
           RELAY_QUEUE_MAX (the stalest first), pings suppressed because the weblog was relayed within
           RELAY_LOOP_WINDOW, the circuit breaker, the last error (as previous, with its time, when a
           success came after it)
  retry    puts the target's dead letters back in the queue (due now) and closes its breaker; refused for a
           target not configured (a server started without it dead-lettered its waiting jobs)

Exit codes: 0 done, 1 failure (database unavailable, unknown or not configured target), 2 usage error.`;

const iso = (d: Date | null) => (d ? d.toISOString().replace(/\.\d{3}Z$/, 'Z') : '-');

/** `pingd relay retry` of a target a server started without (tests compare it whole). */
export function notConfiguredRefusal(target: string, since: Date): string {
  return `pingd relay retry: ${redactUrl(target)} is not configured: a server started without it in RELAY_TARGETS / RELAY_FILE at ${iso(since)} and made its waiting jobs dead letters; add it back, restart the server, then retry`;
}

/**
 * The last error, as the last attempt's only when no success came after it: an error followed by a success
 * is shown as previous, with its time (it was shown as if current, after hours of deliveries).
 */
function lastError(r: TargetStatus): string {
  if (!r.lastError) return '';
  const current = r.lastErrorAt !== null && (r.lastSuccessAt === null || r.lastErrorAt > r.lastSuccessAt);
  if (current) return `, error: ${r.lastError}`;
  return `, previous error${r.lastErrorAt ? ` at ${iso(r.lastErrorAt)}` : ''}: ${r.lastError}`;
}

/** The human-readable status: pure, so tests can check it from rows. */
export function formatStatus(rows: TargetStatus[], now = new Date()): string {
  if (rows.length === 0) return 'no relay targets yet (set RELAY_TARGETS or RELAY_FILE)';
  const out: string[] = [];
  for (const r of rows) {
    // Shown without the user, password or query token a target URL may carry (RELAY_TARGETS is secret).
    out.push(redactUrl(r.url));
    if (r.unconfiguredAt)
      out.push(
        `  not configured since ${iso(r.unconfiguredAt)}: not relayed to; its waiting jobs were made dead letters (RELAY_TARGETS / RELAY_FILE)`,
      );
    out.push(`  delivered ${r.delivered}   refused ${r.refused}   failed attempts ${r.failed}   dead letters ${r.dead}`);
    const age = r.oldestPendingAt ? ` (oldest ${Math.max(0, Math.round((now.getTime() - r.oldestPendingAt.getTime()) / 1000))} s)` : '';
    out.push(
      `  waiting   ${r.pending}${age}   dropped ${r.dropped} (queue full)   suppressed ${r.suppressed} (relayed within the loop window)`,
    );
    const breaker =
      r.breaker === 'open'
        ? `open until ${iso(r.openUntil)}`
        : r.breaker === 'probing'
          ? `probing (${r.failures} failures in a row)`
          : 'closed';
    out.push(`  breaker   ${breaker}${r.pingOnly ? '   method: weblogUpdates.ping (extendedPing was refused)' : ''}`);
    out.push(`  last      attempt ${iso(r.lastAttemptAt)}, success ${iso(r.lastSuccessAt)}${lastError(r)}`);
  }
  return out.join('\n');
}

export async function relayCommand(
  values: Record<string, unknown>,
  positionals: string[],
  config: Config,
  deps: CommandDeps<'OK' | 'FAILURE' | 'USAGE'>,
): Promise<number> {
  const [sub, ...rest] = positionals;
  if (sub !== 'status' && sub !== 'retry') {
    deps.err(`pingd relay: expected status or retry\nUsage: ${RELAY_USAGE}`);
    return deps.EXIT.USAGE;
  }
  if ((sub === 'status' && rest.length > 0) || (sub === 'retry' && rest.length !== 1)) {
    deps.err(`pingd relay ${sub}: wrong arguments\nUsage: ${RELAY_USAGE}`);
    return deps.EXIT.USAGE;
  }
  const db = await deps.openDb(config);
  try {
    if (sub === 'status') {
      const rows = await targetStatus(db, DEFAULT_RELAY_TIMING.breakerAfter);
      deps.out(
        values.json
          ? JSON.stringify(
              rows.map((r) => ({ ...r, url: redactUrl(r.url) })),
              null,
              2,
            )
          : formatStatus(rows),
      );
      return deps.EXIT.OK;
    }
    const target = rest[0];
    const known = await targetKnown(db, target);
    if (!known) {
      deps.err(`pingd relay retry: no target ${JSON.stringify(target)} (see pingd relay status for the URLs)`);
      return deps.EXIT.FAILURE;
    }
    // Queued again, they would wait for ever (no instance claims them) until the next start settled them again.
    if (known.unconfiguredAt) {
      deps.err(notConfiguredRefusal(target, known.unconfiguredAt));
      return deps.EXIT.FAILURE;
    }
    const n = await retryDead(db, target);
    deps.out(
      values.json ? JSON.stringify({ target: redactUrl(target), requeued: n }) : `${n} dead letters of ${redactUrl(target)} queued again`,
    );
    return deps.EXIT.OK;
  } finally {
    await db.close();
  }
}
