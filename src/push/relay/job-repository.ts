// Owns the SQL of the relay's jobs once derived (relay_jobs): claiming due jobs across targets under a
// lease and the targets' spacing (FOR UPDATE SKIP LOCKED, so instances never send one job twice at once),
// recording a batch of outcomes in one statement, and the queue's figures. Plain values in, plain rows out.
// Deriving them from pings is derive-repository.ts's.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';

export interface RelayJob {
  id: number;
  seq: number;
  /** Claims of the job, this one included. */
  attempts: number;
  target: string;
  weblogUrl: string;
  name: string;
  changesUrl: string | null;
  rssUrl: string | null;
  tags: string[] | null;
  pingId: number;
  /** The target's turn for this job (its spacing): not sent before. */
  sendAt: Date;
  /** The target answered a fault to extendedPing before: send weblogUpdates.ping. */
  pingOnly: boolean;
  /** When this instance claimed it (its clock): the lease runs from here. */
  claimedAt: number;
}

// Targets not spaced ahead or open are locked (another claimer skips them, so their spacing is one
// instance's at a time); each gives up to `room` due jobs, one when its breaker has tripped (the probe).
// Their turns follow each other one gap apart from the target's next free turn, which moves past them.
const CLAIM = `
with t as (
  select url, greatest(next_at, now()) as start, gap_ms,
         case when failures >= $4 then 1 else greatest(1, least($5::int, $6::int / greatest(gap_ms, 1))) end as room
    from relay_targets
   where url = any($1::text[]) and next_at <= now() and (open_until is null or open_until <= now())
   for update skip locked
),
c as (
  select j.id, t.url as target, t.start, t.gap_ms, t.room, row_number() over (partition by t.url order by j.due_at, j.id) - 1 as k
    from t cross join lateral (
      select id, due_at from relay_jobs j where j.target = t.url and j.state = 'pending' and j.due_at <= now()
       order by j.due_at limit t.room for update skip locked
    ) j
  order by k, j.id
  limit $2
),
per as (select target, min(start) as start, max(gap_ms) as gap_ms, count(*) as n from c group by target),
tu as (
  update relay_targets r set next_at = per.start + make_interval(secs => per.n * per.gap_ms / 1000.0)
    from per where r.url = per.target returning r.url, r.ping_only
)
update relay_jobs j set due_at = now() + make_interval(secs => $3::int), leased_until = now() + make_interval(secs => $3::int), attempts = j.attempts + 1
  from c join tu on tu.url = c.target
 where j.id = c.id
returning j.id, j.seq, j.attempts, j.target, j.weblog_url, j.name, j.changes_url, j.rss_url, j.tags, j.ping_id,
          c.start + make_interval(secs => c.k * c.gap_ms / 1000.0) as send_at, tu.ping_only`;

type RawJob = {
  id: number;
  seq: number;
  attempts: number;
  target: string;
  weblog_url: string;
  name: string;
  changes_url: string | null;
  rss_url: string | null;
  tags: string[] | null;
  ping_id: number;
  send_at: Date;
  ping_only: boolean;
};

/**
 * Claims up to `limit` due jobs of `targets` under a lease of `leaseSec` (a claim counts as an attempt),
 * at most `window` ms of each target's turns ahead (and `perTarget` jobs).
 */
export async function claimRelayJobs(
  q: Queryable,
  o: { targets: readonly string[]; limit: number; leaseSec: number; breakerAfter: number; perTarget: number; windowMs: number },
): Promise<RelayJob[]> {
  return withContext('claiming relay jobs', async () => {
    const claimedAt = Date.now();
    const rows = await q.query<RawJob>(CLAIM, [o.targets, o.limit, o.leaseSec, o.breakerAfter, o.perTarget, o.windowMs], {
      name: 'pingd_relay_claim',
    });
    return rows
      .map((r) => ({
        id: Number(r.id),
        seq: Number(r.seq),
        attempts: Number(r.attempts),
        target: r.target,
        weblogUrl: r.weblog_url,
        name: r.name,
        changesUrl: r.changes_url,
        rssUrl: r.rss_url,
        tags: r.tags,
        pingId: Number(r.ping_id),
        sendAt: new Date(r.send_at),
        pingOnly: r.ping_only === true,
        claimedAt,
      }))
      .sort((a, b) => a.sendAt.getTime() - b.sendAt.getTime());
  });
}

export type JobOutcome = 'delivered' | 'refused' | 'failed' | 'deferred';

export interface OutcomeRow {
  id: number;
  seq: number;
  target: string;
  outcome: JobOutcome;
  error: string | null;
  /** failed: when it is tried again; deferred: when it is due again. */
  retryAt: Date | null;
}

export interface TargetUpdate {
  target: string;
  delivered: number;
  refused: number;
  failed: number;
  /** The last error seen in this batch. */
  lastError: string | null;
  /** No request before this (Retry-After, or the breaker's pause); null: no change. */
  openUntil: Date | null;
  /** The target answered a fault to extendedPing and a ping was sent instead. */
  pingOnly: boolean;
}

// Jobs: delivered/refused become history (unless a newer ping was folded in meanwhile, after the lease
// ran out: then it waits $7 s, the longer of PING_MIN_INTERVAL and the loop window); failed ones wait for
// retry_at, or are dead letters after `maxAttempts`; deferred ones give their claim back. Targets: counts,
// the breaker (after `breakerAfter` failures in a row it opens for `breakerPauseSec`, each failed probe
// opens it again, any answer closes it), last error, and the jobs that left the queue (settled: the
// bound's count of waiting weblogs is queued - dropped - settled).
const RECORD = `
with o as (
  select * from unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::timestamptz[]) as o(id, seq, outcome, error, retry_at)
),
jobs as (
  update relay_jobs j set
    state = case when o.outcome in ('delivered', 'refused') and j.seq = o.seq then o.outcome
                 when o.outcome = 'failed' and j.attempts >= $6 then 'dead'
                 else 'pending' end,
    finished_at = case when (o.outcome in ('delivered', 'refused') and j.seq = o.seq) or (o.outcome = 'failed' and j.attempts >= $6) then now() end,
    due_at = case when o.outcome in ('delivered', 'refused') then now() + make_interval(secs => $7::int) else o.retry_at end,
    attempts = case when o.outcome = 'deferred' then greatest(j.attempts - 1, 0) when o.outcome in ('delivered', 'refused') then 0 else j.attempts end,
    leased_until = null,
    last_error = case when o.outcome = 'failed' then o.error else j.last_error end
  from o where j.id = o.id and j.state = 'pending'
  returning j.target, j.state
),
s as (select target, count(*) filter (where state <> 'pending')::bigint as n from jobs group by target),
a as (
  select * from unnest($8::text[], $9::int[], $10::int[], $11::int[], $12::text[], $13::timestamptz[], $14::boolean[])
    as a(target, delivered, refused, failed, last_error, open_until, ping_only)
)
update relay_targets r set
  settled = r.settled + coalesce((select s.n from s where s.target = a.target), 0),
  delivered = r.delivered + a.delivered,
  refused = r.refused + a.refused,
  failed = r.failed + a.failed,
  failures = case when a.delivered + a.refused > 0 then 0 else r.failures + a.failed end,
  open_until = case when a.delivered + a.refused > 0 then a.open_until
                    when r.failures + a.failed >= $15 then greatest(r.open_until, a.open_until, now() + make_interval(secs => $16::float8))
                    else greatest(r.open_until, a.open_until) end,
  last_error = coalesce(a.last_error, r.last_error),
  last_error_at = case when a.last_error is not null then now() else r.last_error_at end,
  last_attempt_at = now(),
  last_success_at = case when a.delivered + a.refused > 0 then now() else r.last_success_at end,
  ping_only = r.ping_only or a.ping_only
from a where r.url = a.target`;

/**
 * Records a batch of outcomes (and what they say of their targets) in one statement. `minIntervalSec`:
 * how long a job folded into after its send waits (the longer of PING_MIN_INTERVAL and the loop window).
 */
export async function recordOutcomes(
  q: Queryable,
  rows: readonly OutcomeRow[],
  given: readonly TargetUpdate[],
  o: { maxAttempts: number; minIntervalSec: number; breakerAfter: number; breakerPauseSec: number },
): Promise<void> {
  if (rows.length === 0 && given.length === 0) return;
  // A job leaves the queue only with a request's outcome, whose target is counted here: the jobs' target
  // must have a row in `a` for `settled` (an attempt with no counts is still an attempt).
  const targets = [...given];
  for (const r of rows) {
    if (r.outcome !== 'deferred' && !targets.some((t) => t.target === r.target)) {
      targets.push({ target: r.target, delivered: 0, refused: 0, failed: 0, lastError: null, openUntil: null, pingOnly: false });
    }
  }
  await withContext(`recording ${rows.length} relay outcomes`, () =>
    q.query(
      RECORD,
      [
        rows.map((r) => r.id),
        rows.map((r) => r.seq),
        rows.map((r) => r.outcome),
        rows.map((r) => r.error),
        rows.map((r) => r.retryAt),
        o.maxAttempts,
        o.minIntervalSec,
        targets.map((t) => t.target),
        targets.map((t) => t.delivered),
        targets.map((t) => t.refused),
        targets.map((t) => t.failed),
        targets.map((t) => t.lastError),
        targets.map((t) => t.openUntil),
        targets.map((t) => t.pingOnly),
        o.breakerAfter,
        o.breakerPauseSec,
      ],
      { name: 'pingd_relay_record' },
    ),
  );
}

/**
 * Waiting jobs (depth) and the age of the oldest, in seconds; and, over every target, the waiting weblogs
 * dropped at the bound and the pings suppressed by the loop window (totals since the counts began).
 */
export async function relayQueueStats(q: Queryable): Promise<{ depth: number; oldestAgeSec: number; dropped: number; suppressed: number }> {
  return withContext('reading the relay queue', async () => {
    const [r] = await q.query<{ depth: number; age: number | null; dropped: number; suppressed: number }>(
      `select count(*)::int as depth, extract(epoch from now() - min(created_at))::float8 as age,
              (select coalesce(sum(dropped), 0) from relay_queues)::float8 as dropped,
              (select coalesce(sum(suppressed), 0) from relay_queues)::float8 as suppressed
         from relay_jobs where state = 'pending'`,
    );
    return {
      depth: Number(r.depth),
      oldestAgeSec: Math.max(0, Number(r.age ?? 0)),
      dropped: Number(r.dropped),
      suppressed: Number(r.suppressed),
    };
  });
}
