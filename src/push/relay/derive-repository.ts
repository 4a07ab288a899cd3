// Owns the SQL of the relay's cursor (relay_cursor) and of deriving jobs from committed pings: a page per
// transaction becomes one job per target and weblog (folded into a waiting one), the loop window and the
// queue bound kept, and the cursor moved past the page. Plain values in, plain rows out. Claims and
// outcomes are job-repository.ts's.
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
