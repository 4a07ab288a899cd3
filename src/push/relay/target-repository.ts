// Owns the SQL of the relay's targets and its operator commands: making the configured targets' rows
// exist with their spacing (and their queue counts true), settling the waiting jobs of targets no longer
// configured, the per-target status (`pingd relay status`),
// putting dead letters back in the queue (`pingd relay retry`), and deleting finished jobs for retention.
// Plain values in, plain rows out.
import type { Db, Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';

/**
 * Creates the targets' rows (or updates their spacing): `gapMs` = 60000 / the target's rate per minute. A
 * target configured again loses its "not configured" mark.
 */
export async function syncTargets(q: Queryable, targets: readonly { url: string; gapMs: number }[]): Promise<void> {
  if (targets.length === 0) return;
  await withContext('registering relay targets', () =>
    q.query(
      `insert into relay_targets (url, gap_ms) select * from unnest($1::text[], $2::int[])
       on conflict (url) do update set gap_ms = excluded.gap_ms, unconfigured_at = null
        where relay_targets.gap_ms <> excluded.gap_ms or relay_targets.unconfigured_at is not null`,
      [targets.map((t) => t.url), targets.map((t) => t.gapMs)],
    ),
  );
}

/**
 * Sets each target's count of jobs queued so that queued - dropped - settled is the jobs it has waiting,
 * from the rows (at start: the counts are kept exact by the statements that change them, this repairs any
 * hand edit of relay_jobs). Under the cursor's lock, so no derivation runs meanwhile; an outcome written
 * meanwhile moves a job from waiting to settled, which leaves the sum as true as it was.
 */
export async function reconcileQueues(db: Db, targets: readonly string[]): Promise<void> {
  if (targets.length === 0) return;
  await withContext('counting the relay queues', () =>
    db.transaction(async (tx) => {
      await tx.query('select 1 from relay_cursor where id = 1 for update');
      await tx.query(
        `insert into relay_queues as q (target, queued)
         select t.url, (select count(*) from relay_jobs j where j.target = t.url and j.state = 'pending') + t.settled
           from relay_targets t where t.url = any($1::text[])
         on conflict (target) do update set queued = excluded.queued + q.dropped`,
        [targets],
      );
    }),
  );
}

/** The error a job of a target no longer configured is dead-lettered with (`pingd relay status` shows it). */
export const NOT_CONFIGURED_ERROR = 'NOT_CONFIGURED: a server started without this target in RELAY_TARGETS / RELAY_FILE';

/**
 * Settles the waiting jobs of every target not in `configured` (this instance's targets at start) as dead
 * letters, and marks those targets not configured (since the first start that found them missing). Jobs
 * being sent by an instance that still has the target are settled too: its outcome finds them no longer
 * pending and leaves them dead. Under the cursor's lock, so no derivation adds jobs meanwhile; counted as
 * settled, so each queue's count (queued - dropped - settled) stays true. Returns the jobs settled per target.
 */
export async function settleUnconfigured(db: Db, configured: readonly string[]): Promise<{ target: string; n: number }[]> {
  return withContext('settling the jobs of relay targets no longer configured', () =>
    db.transaction(async (tx) => {
      await tx.query('select 1 from relay_cursor where id = 1 for update');
      const rows = await tx.query<{ target: string; n: number }>(
        `with gone as (
           update relay_jobs j set state = 'dead', finished_at = now(), leased_until = null, last_error = $2
            where j.state = 'pending' and not (j.target = any($1::text[]))
           returning j.target
         ),
         n as (select target, count(*)::bigint as n from gone group by target),
         -- Run whether or not the query reads it (PostgreSQL runs every data-modifying WITH once).
         marked as (
           update relay_targets t set settled = t.settled + coalesce((select n.n from n where n.target = t.url), 0),
                  unconfigured_at = coalesce(t.unconfigured_at, now())
            where not (t.url = any($1::text[]))
           returning 1
         )
         select target, n::int as n from n order by target`,
        [configured, NOT_CONFIGURED_ERROR],
      );
      return rows.map((r) => ({ target: r.target, n: Number(r.n) }));
    }),
  );
}

export interface TargetStatus {
  url: string;
  delivered: number;
  refused: number;
  /** Failed attempts (each retried until the attempts run out). */
  failed: number;
  /** Jobs that ran out of attempts (`pingd relay retry` puts them back). */
  dead: number;
  pending: number;
  oldestPendingAt: Date | null;
  /** Waiting weblogs dropped because the queue was full (RELAY_QUEUE_MAX; the stalest first). */
  dropped: number;
  /** Pings not relayed to the target: the weblog was relayed to it within RELAY_LOOP_WINDOW. */
  suppressed: number;
  /** closed: sending; open: paused until openUntil (failures or Retry-After); probing: the next job tests it. */
  breaker: 'closed' | 'open' | 'probing';
  failures: number;
  openUntil: Date | null;
  pingOnly: boolean;
  lastError: string | null;
  /** When lastError happened: an error before lastSuccessAt is a previous one, not the last attempt's. */
  lastErrorAt: Date | null;
  lastAttemptAt: Date | null;
  lastSuccessAt: Date | null;
  /** Set when a server started without the target (its waiting jobs were dead-lettered then). */
  unconfiguredAt: Date | null;
}

export async function targetStatus(q: Queryable, breakerAfter: number): Promise<TargetStatus[]> {
  return withContext('reading the relay status', async () => {
    const rows = await q.query<{
      url: string;
      delivered: number;
      refused: number;
      failed: number;
      dead: number;
      pending: number;
      oldest: Date | null;
      dropped: number | null;
      suppressed: number | null;
      failures: number;
      open_until: Date | null;
      is_open: boolean;
      ping_only: boolean;
      last_error: string | null;
      last_error_at: Date | null;
      last_attempt_at: Date | null;
      last_success_at: Date | null;
      unconfigured_at: Date | null;
    }>(
      `select t.url, t.delivered, t.refused, t.failed, t.failures, t.open_until, coalesce(t.open_until > now(), false) as is_open, t.ping_only,
              t.last_error, t.last_error_at, t.last_attempt_at, t.last_success_at, t.unconfigured_at,
              (select count(*) from relay_jobs j where j.target = t.url and j.state = 'dead')::int as dead,
              (select count(*) from relay_jobs j where j.target = t.url and j.state = 'pending')::int as pending,
              (select min(created_at) from relay_jobs j where j.target = t.url and j.state = 'pending') as oldest,
              q.dropped, q.suppressed
         from relay_targets t left join relay_queues q on q.target = t.url order by t.url`,
    );
    return rows.map((r) => ({
      url: r.url,
      delivered: Number(r.delivered),
      refused: Number(r.refused),
      failed: Number(r.failed),
      dead: Number(r.dead),
      pending: Number(r.pending),
      oldestPendingAt: r.oldest ? new Date(r.oldest) : null,
      dropped: Number(r.dropped ?? 0),
      suppressed: Number(r.suppressed ?? 0),
      breaker: r.is_open ? 'open' : Number(r.failures) >= breakerAfter ? 'probing' : 'closed',
      failures: Number(r.failures),
      openUntil: r.open_until ? new Date(r.open_until) : null,
      pingOnly: r.ping_only,
      lastError: r.last_error,
      lastErrorAt: r.last_error_at ? new Date(r.last_error_at) : null,
      lastAttemptAt: r.last_attempt_at ? new Date(r.last_attempt_at) : null,
      lastSuccessAt: r.last_success_at ? new Date(r.last_success_at) : null,
      unconfiguredAt: r.unconfigured_at ? new Date(r.unconfigured_at) : null,
    }));
  });
}

/**
 * Puts a target's dead letters back in the queue, due now, with their attempts reset; a dead letter whose
 * weblog already has a newer job waiting is dropped (that job carries the newer ping). The target's
 * breaker is closed too: the operator says it is back. Returns the jobs requeued.
 */
export async function retryDead(q: Queryable, target: string): Promise<number> {
  return withContext(`retrying dead relay jobs of ${target}`, async () => {
    const [r] = await q.query<{ n: number }>(
      `with dropped as (
         delete from relay_jobs d where d.target = $1 and d.state = 'dead'
            and exists (select 1 from relay_jobs p where p.target = d.target and p.weblog_url = d.weblog_url and p.state = 'pending')
         returning d.id
       ),
       -- One per weblog: the newest dead letter (the others are dropped by the next statement's run).
       requeued as (
         update relay_jobs j set state = 'pending', attempts = 0, due_at = now(), leased_until = null, finished_at = null
          where j.id in (select distinct on (weblog_url) id from relay_jobs
                          where target = $1 and state = 'dead' and id not in (select id from dropped) order by weblog_url, id desc)
         returning j.id
       ),
       reset as (
         update relay_targets set failures = 0, open_until = null, next_at = least(next_at, now()) where url = $1 returning 1
       ),
       -- Waiting again: counted as queued, as a derived job is (the bound counts them).
       tally as (
         insert into relay_queues as q (target, queued) select $1, count(*) from requeued
         on conflict (target) do update set queued = q.queued + excluded.queued returning 1
       )
       select (select count(*) from requeued)::int as n, (select count(*) from reset)::int as t`,
      [target],
    );
    // Older dead letters of a weblog just requeued carry older pings: gone.
    await q.query(`delete from relay_jobs where target = $1 and state = 'dead'`, [target]);
    return Number(r.n);
  });
}

/**
 * Whether `target` has a row (it was configured at some point): undefined if not, else when a server
 * started without it (null: configured).
 */
export async function targetKnown(q: Queryable, target: string): Promise<{ unconfiguredAt: Date | null } | undefined> {
  return withContext(`looking up relay target ${target}`, async () => {
    const [r] = await q.query<{ unconfigured_at: Date | null }>('select unconfigured_at from relay_targets where url = $1', [target]);
    return r ? { unconfiguredAt: r.unconfigured_at ? new Date(r.unconfigured_at) : null } : undefined;
  });
}

/**
 * Retention: deletes up to `limit` finished jobs, delivered or refused before `before` and dead letters
 * before `deadBefore`.
 */
export async function pruneFinishedJobs(q: Queryable, before: Date, deadBefore: Date, limit: number): Promise<number> {
  return withContext('deleting finished relay jobs', async () => {
    const rows = await q.query(
      `delete from relay_jobs where id in (
         select id from relay_jobs where state <> 'pending' and finished_at < case when state = 'dead' then $2::timestamptz else $1::timestamptz end
          order by finished_at limit $3
       ) returning 1`,
      [before, deadBefore, limit],
    );
    return rows.length;
  });
}

/** What pruneFinishedJobs would delete (a dry run), counted up to `upTo`. */
export async function countFinishedJobs(q: Queryable, before: Date, deadBefore: Date, upTo = 2_147_483_647): Promise<number> {
  return withContext('counting finished relay jobs', async () => {
    const [r] = await q.query<{ n: number }>(
      `select count(*)::int as n from (
         select 1 from relay_jobs where state <> 'pending' and finished_at < case when state = 'dead' then $2::timestamptz else $1::timestamptz end limit $3
       ) f`,
      [before, deadBefore, upTo],
    );
    return Number(r.n);
  });
}
