// Owns the SQL of the relay's outbox (relay_jobs, relay_cursor): deriving jobs from committed pings page
// by page, claiming due jobs across targets under a lease and the targets' spacing (FOR UPDATE SKIP LOCKED,
// so instances never send one job twice at once), and recording a batch of outcomes in one statement.
// Plain values in, plain rows out.
import type { Db, Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';
import { notHeldId } from '../../spam/spam-repository.js';

/** Which pings are relayed: every accepted one ('listed'), or each once verification released it ('require'). */
export type RelayRule = 'listed' | 'require';

/** The newest position of a rule: where a new cursor starts (relaying begins with the pings after it). */
const LATEST = {
  listed: 'select coalesce(max(id), 0)::bigint as pos from pings',
  require: 'select coalesce(max(release_id), 0)::bigint as pos from ping_verifications where release_id is not null',
};

/**
 * Makes sure the cursor exists for `rule`: a new one (or one left by the other rule) starts at the newest
 * position, so turning the relay on does not send the whole history. An existing one is kept: pings that
 * arrived while no instance relayed are caught up.
 */
export async function ensureCursor(q: Queryable, rule: RelayRule): Promise<number> {
  return withContext('preparing the relay cursor', async () => {
    const [r] = await q.query<{ position: number }>(
      `insert into relay_cursor (id, rule, position) select 1, $1, pos from (${LATEST[rule]}) l
       on conflict (id) do update set rule = excluded.rule, position = excluded.position where relay_cursor.rule <> excluded.rule
       returning position`,
      [rule],
    );
    if (r) return Number(r.position);
    const [c] = await q.query<{ position: number }>('select position from relay_cursor where id = 1');
    return Number(c.position);
  });
}

/** A page of the source: pings by id, or released pings by release position (both visible in order). */
const SOURCE = {
  listed: `select p.id as pos, p.id as ping_id, p.weblog_id, p.url, p.name, p.changes_url, p.rss_url, p.tags, p.user_agent
             from pings p where p.id > $1 order by p.id limit $2`,
  require: `select v.release_id as pos, p.id as ping_id, p.weblog_id, p.url, p.name, p.changes_url, p.rss_url, p.tags, p.user_agent
              from ping_verifications v cross join lateral (select * from pings p where p.id = v.ping_id and p.received_at = v.received_at limit 1) p where v.release_id > $1 order by v.release_id limit $2`,
};

// One statement per page: the newest ping of each weblog (a relay of its own, by the marker in its
// User-Agent, is never relayed again; nor is a weblog held as spam, skipped here where its job would be made,
// so a held weblog's pings are not relayed later either, once it is released) becomes one job per target, folded into the job already waiting for
// that target and weblog (the job keeps relaying the weblog's newest ping); a weblog relayed to a target
// lately is due one PING_MIN_INTERVAL after that.
// Loops the marker misses (a forwarder that passes our relay back without it: A → forwarder → A) end at
// the second hop: a weblog relayed to a target within the loop window ($6 s) is not relayed to it again,
// and a ping folded into a job that is being sent (its lease runs) rides on that send (its seq is kept, so
// the send's outcome finishes the job: the echo of a forwarder that passes the ping on before it answers
// comes back while the relay is in flight). Both are counted per target as suppressed. A job that starts
// waiting is counted as queued (a new job has seq 0 and no running lease: a fold sets seq >= 1 or keeps a
// running lease), the count the bound is kept with.
const derive = (rule: RelayRule) => `
with src as (${SOURCE[rule]}),
newest as (
  select distinct on (url) * from src where (user_agent is null or strpos(user_agent, $4) = 0) and ${notHeldId('src.weblog_id')}
   order by url, pos desc
),
cand as (
  select t.target, n.url, n.name, n.changes_url, n.rss_url, n.tags, n.ping_id,
         (select max(d.finished_at) from relay_jobs d
           where d.target = t.target and d.weblog_url = n.url and d.state in ('delivered', 'refused')) as last,
         exists (select 1 from relay_jobs p where p.target = t.target and p.weblog_url = n.url and p.state = 'pending') as waiting
    from newest n cross join unnest($3::text[]) as t(target)
),
ins as (
  insert into relay_jobs as j (target, weblog_url, name, changes_url, rss_url, tags, ping_id, due_at)
  select c.target, c.url, c.name, c.changes_url, c.rss_url, c.tags, c.ping_id, greatest(now(), c.last + make_interval(secs => $5::int))
    from cand c where c.last is null or c.last <= now() - make_interval(secs => $6::int)
  on conflict (target, weblog_url) where state = 'pending' do update
    set name = excluded.name, changes_url = excluded.changes_url, rss_url = excluded.rss_url, tags = excluded.tags,
        ping_id = excluded.ping_id, seq = case when j.leased_until > now() then j.seq else j.seq + 1 end
  returning j.id, j.target, j.weblog_url, coalesce(j.leased_until > now(), false) as sending, j.seq
),
-- New jobs of weblogs that had one waiting when this statement began: that job was finished meanwhile (its
-- outcome committed after this statement's snapshot, so last did not see it). Checked again by RECHECK.
racy as (
  select i.id from ins i join cand c on c.target = i.target and c.url = i.weblog_url where i.seq = 0 and not i.sending and c.waiting
),
counts as (
  select target, count(*) filter (where seq = 0 and not sending) as queued, count(*) filter (where sending) as suppressed from ins group by target
  union all
  select target, 0, count(*) from cand where last > now() - make_interval(secs => $6::int) group by target
),
per as (select target, sum(queued)::bigint as queued, sum(suppressed)::bigint as suppressed from counts group by target),
tally as (
  insert into relay_queues as q (target, queued, suppressed) select target, queued, suppressed from per
  on conflict (target) do update set queued = q.queued + excluded.queued, suppressed = q.suppressed + excluded.suppressed
  returning 1
),
cur as (
  update relay_cursor set position = coalesce((select max(pos) from src), position), derived_at = now()
   where id = 1
  returning position
)
select (select position from cur) as position, (select count(*) from src)::int as read, (select count(*) from ins)::int as queued,
       coalesce((select json_object_agg(target, suppressed) from per where suppressed > 0), '{}') as suppressed,
       coalesce((select array_agg(id) from racy), '{}') as racy`;

// The derivation's new jobs whose weblog had a job waiting when it began (racy), seen again by a statement
// of its own (a newer snapshot, on PostgreSQL's READ COMMITTED): one whose weblog was relayed to the target
// within the loop window after all (an echo that came while the relay's outcome was being written) is
// taken back, and counted as suppressed instead of queued. The jobs are this transaction's own, unseen by others.
const RECHECK = `
with late as (
  delete from relay_jobs j where j.id = any($1::bigint[]) and j.state = 'pending'
     and exists (select 1 from relay_jobs d where d.target = j.target and d.weblog_url = j.weblog_url and d.state in ('delivered', 'refused')
                   and d.finished_at > now() - make_interval(secs => $2::int))
  returning j.target
),
n as (select target, count(*)::bigint as n from late group by target)
update relay_queues q set queued = q.queued - n.n, suppressed = q.suppressed + n.n from n where q.target = n.target
returning q.target, n.n::int as n`;

// The bound, after each page in the same transaction: a target with more than $2 weblogs waiting loses the
// stalest (its newest ping oldest) until it has $2, each counted as dropped. Jobs being sent (a running
// lease) are kept; ones another transaction holds are skipped (dropped by the next page). `settled` is
// read without a lock: an outcome written meanwhile makes the count look higher by its jobs, and as many
// more may be dropped, never fewer.
const TRIM = `
with over as (
  select q.target, q.queued - q.dropped - t.settled - $2::bigint as excess
    from relay_queues q join relay_targets t on t.url = q.target
   where q.target = any($1::text[]) and q.queued - q.dropped - t.settled > $2::bigint
),
victims as (
  select v.id from over cross join lateral (
    select j.id from relay_jobs j
     where j.target = over.target and j.state = 'pending' and (j.leased_until is null or j.leased_until <= now())
     order by j.ping_id limit over.excess for update skip locked
  ) v
),
gone as (delete from relay_jobs j using victims v where j.id = v.id returning j.target),
n as (select target, count(*)::bigint as n from gone group by target),
upd as (update relay_queues q set dropped = q.dropped + n.n from n where q.target = n.target returning q.target, n.n)
select target, n::int as n from upd`;

export interface DerivedPage {
  /** Source rows read (a full page: call again). */
  read: number;
  /** Jobs queued or folded into waiting ones. */
  queued: number;
  position: number;
  /** Per target, pings not relayed: the weblog was relayed to it within the loop window (or is being sent). */
  suppressed: Record<string, number>;
  /** Per target, waiting weblogs dropped at the bound (the stalest first). */
  dropped: Record<string, number>;
}

/**
 * Turns the next page of pings after the cursor into jobs for `targets`, keeps each target's queue within
 * `queueMax` weblogs, and moves the cursor past the page, in one transaction: a crash before the commit
 * leaves all as it was, so no ping is lost or queued twice. The cursor row is locked first (skipping it
 * when another instance holds it: that one is deriving).
 */
export async function deriveJobs(
  db: Db,
  o: {
    rule: RelayRule;
    targets: readonly string[];
    marker: string;
    minIntervalSec: number;
    loopWindowSec: number;
    queueMax: number;
    pageSize: number;
  },
): Promise<DerivedPage | null> {
  return withContext('deriving relay jobs', () =>
    db.transaction(async (tx) => {
      const [c] = await tx.query<{ position: number; rule: RelayRule }>(
        'select position, rule from relay_cursor where id = 1 for update skip locked',
      );
      if (!c || c.rule !== o.rule) return null;
      const [r] = await tx.query<{
        position: number;
        read: number;
        queued: number;
        suppressed: Record<string, number | string> | string;
        racy: (number | string)[];
      }>(derive(o.rule), [Number(c.position), o.pageSize, o.targets, o.marker, o.minIntervalSec, o.loopWindowSec], {
        name: `pingd_relay_derive_${o.rule}`,
      });
      const suppressed = numbers(typeof r.suppressed === 'string' ? (JSON.parse(r.suppressed) as Record<string, number>) : r.suppressed);
      if (r.racy.length > 0) {
        for (const x of await tx.query<{ target: string; n: number }>(RECHECK, [r.racy, o.loopWindowSec], {
          name: 'pingd_relay_recheck',
        })) {
          suppressed[x.target] = (suppressed[x.target] ?? 0) + Number(x.n);
        }
      }
      const trimmed = await tx.query<{ target: string; n: number }>(TRIM, [o.targets, o.queueMax], { name: 'pingd_relay_trim' });
      return {
        read: Number(r.read),
        queued: Number(r.queued),
        position: Number(r.position),
        suppressed,
        dropped: Object.fromEntries(trimmed.map((x) => [x.target, Number(x.n)])),
      };
    }),
  );
}

const numbers = (o: Record<string, number | string>): Record<string, number> =>
  Object.fromEntries(Object.entries(o).map(([k, v]) => [k, Number(v)]));

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
