// Owns the SQL every durable outbound queue shares (WebSub's tasks, rssCloud's notifications): the claim of
// due rows under a lease (FOR UPDATE SKIP LOCKED, so instances never run one row twice at once), past the
// hosts this instance is busy with and at most `perHost` of any other, and the settling of a whole batch
// of outcomes in one statement (finished, tried again later, put back with the attempt refunded, dropped,
// run again now). A queue is a table with the columns id, seq, attempts, due_at, leased_until, created_at
// and a host column; what a row means, and what its claim reads beside it, are the surface's.
import type { Db, Queryable } from '../db/database.js';
import { withContext } from '../errors.js';
import type { QueueStats } from '../queue/queue-gauge.js';

/** A queue table: its name and the column naming the host its request goes to. */
export interface OutboxTable {
  /** Table name (a constant of the surface's, never input). */
  name: string;
  /** The host column (a constant of the surface's). */
  host: string;
  /** What the queue holds, for error messages ("WebSub tasks"). */
  what: string;
}

/** How one claimed row ends. */
export type Settle =
  /** Done: deleted, unless a request was folded into it while it ran (seq moved: it runs again now). */
  | { id: number; kind: 'finish'; seq: number }
  /** Failed: tried again at `at`; with `seq`, a request folded in meanwhile makes it run now instead. */
  | { id: number; kind: 'retry'; at: Date; seq?: number | null }
  /** Not tried (the host's turn, a stale read): back at `at`, its claim given back. */
  | { id: number; kind: 'defer'; at: Date }
  /** Given up or no longer wanted: deleted. */
  | { id: number; kind: 'drop' }
  /** More to do at once (a feed topic's next change): due now with fresh tries. */
  | { id: number; kind: 'again' };

/**
 * Settles a batch of claimed rows in one statement (one round trip however many: the embedded database
 * serialises every statement, and a statement per outcome was most of a delivery's cost). A finished row
 * not deleted is updated whatever the reason: its seq had moved in this statement's snapshot, or moved
 * while the delete waited for its lock (a change folded in by a verification committing meanwhile; then
 * PostgreSQL re-checks the delete on the new row and skips it). Judging the update by the snapshot's seq
 * left such a row leased until its lease ran out (REGRESSION: two instances, one subscriber got 3 of 5
 * changes within 15 s).
 */
export async function settle(q: Queryable, t: OutboxTable, items: readonly Settle[]): Promise<void> {
  if (items.length === 0) return;
  const ids: number[] = [];
  const kinds: string[] = [];
  const seqs: (number | null)[] = [];
  const ats: (Date | null)[] = [];
  for (const s of items) {
    ids.push(s.id);
    kinds.push(s.kind);
    seqs.push(s.kind === 'finish' ? s.seq : s.kind === 'retry' ? (s.seq ?? null) : null);
    ats.push(s.kind === 'retry' || s.kind === 'defer' ? s.at : null);
  }
  await withContext(`settling ${items.length} ${t.what}`, () =>
    q.query(
      `with s as (select * from unnest($1::bigint[], $2::text[], $3::int[], $4::timestamptz[]) as s(id, kind, seq, at)),
       d as (
         delete from ${t.name} t using s where t.id = s.id and (s.kind = 'drop' or (s.kind = 'finish' and t.seq = s.seq)) returning t.id
       )
       update ${t.name} t
          set due_at = case when s.kind = 'defer' then s.at
                            when s.kind = 'retry' and (s.seq is null or t.seq = s.seq) then s.at
                            else now() end,
              leased_until = null,
              attempts = case when s.kind = 'defer' then greatest(t.attempts - 1, 0)
                              when s.kind in ('finish', 'again') then 0
                              else t.attempts end
         from s
        where t.id = s.id and s.kind <> 'drop' and t.id not in (select id from d)`,
      [ids, kinds, seqs, ats],
      { name: `pingd_settle_${t.name}` },
    ),
  );
}

export interface ClaimOptions {
  limit: number;
  leaseSec: number;
  /** Hosts this instance has its fill of requests in flight to: their rows wait in the queue. */
  busyHosts: readonly string[];
  /** Most rows of one host in one claim. */
  perHost: number;
  /**
   * An expression over the queue's row (`q`) splitting it into lanes that take turns, each oldest first (WebSub:
   * intents beside deliveries); one lane when absent. A constant of the surface's.
   */
  lane?: string;
  /** What the claim returns beside the row (`u.*`): columns of `join`, a constant of the surface's. */
  select?: string;
  join?: string;
}

/**
 * Claims up to `limit` due rows: one due_at index slice per lane ($1 × 8 rows), ranked per host and per
 * lane, at most `perHost` of a host, locked past rows another claimer holds, pushed one lease ahead.
 * Returns `u.*` (the row as updated) and `select`.
 */
export function claim<R>(q: Queryable, t: OutboxTable, o: ClaimOptions): Promise<R[]> {
  return claimRows<R>(q, t, o, false);
}

/** claim(), and with `oneLeasedPerHost` none of a host with a row leased (only under claimOneLeasedPerHost's lock). */
async function claimRows<R>(q: Queryable, t: OutboxTable, o: ClaimOptions, oneLeasedPerHost: boolean): Promise<R[]> {
  const lanes = o.lane ? [`(${o.lane})`, `not (${o.lane})`] : ['true'];
  const slice = lanes
    .map(
      (l, k) => `(select q.id, q.due_at, ${k} as lane, coalesce(q.${t.host}, '#' || q.id) as host from ${t.name} q
       where q.due_at <= now() and ${l} and (q.${t.host} is null or q.${t.host} <> all($3::text[]))
       order by q.due_at limit $1::int * 8)`,
    )
    .join(' union all ');
  const leased = oneLeasedPerHost
    ? `and not exists (select 1 from ${t.name} b where b.${t.host} = cand.host and b.leased_until > now())`
    : '';
  return withContext(`claiming ${t.what}`, () =>
    q.query<R>(
      `with cand as (${slice}),
       ranked as (
         select id, due_at, row_number() over (partition by host order by due_at, id) as nth_of_host,
                row_number() over (partition by lane order by due_at, id) as nth_of_lane
           from cand where true ${leased}
       ), pick as (
         select id from ranked where nth_of_host <= $4::int order by nth_of_lane, due_at, id limit $1::int
       ), c as (
         select t.id from ${t.name} t join pick on pick.id = t.id where t.due_at <= now() for update of t skip locked
       ), u as (
         update ${t.name} t set due_at = now() + make_interval(secs => $2::int), leased_until = now() + make_interval(secs => $2::int),
                attempts = t.attempts + 1
           from c where t.id = c.id
         returning t.*
       )
       select u.*${o.select ? `, ${o.select}` : ''} from u ${o.join ?? ''} order by u.id`,
      [o.limit, o.leaseSec, o.busyHosts, o.perHost],
      { name: `pingd_claim_${t.name}` },
    ),
  );
}

/**
 * claim() of a queue with at most one row leased per host across instances (rssCloud: one notification in
 * flight per endpoint host): none of a host with a row leased anywhere, serialised by
 * the transaction-level advisory lock `lock`. The claim's check for a host's leased row reads the statement's
 * snapshot, and a row lock covers only its row: while one claim's lease was not yet committed, another
 * leased a different row of the host, one queued by a transaction that began earlier (so ranked first) and
 * committed after the first claim had read the queue (REGRESSION: two instances, one endpoint host got 2
 * notifications at once). Under the lock a claim's statement starts after the previous claim committed, so
 * its snapshot holds that claim's leases. A claim is one short statement: the wait is a few ms at most.
 */
export function claimOneLeasedPerHost<R>(db: Db, t: OutboxTable, lock: number, o: ClaimOptions): Promise<R[]> {
  // The embedded database is one session in one process: its statements never interleave, and a
  // transaction would hold intake's session for two more round trips at every claim.
  if (db.kind === 'pglite') return claimRows<R>(db, t, o, true);
  return db.transaction(async (tx) => {
    await tx.query('select pg_advisory_xact_lock($1) is null as locked', [lock]);
    return claimRows<R>(tx, t, o, true);
  });
}

/** Rows waiting or running, and the age of the oldest (the queue gauge, /status). */
export async function queueStats(q: Queryable, t: OutboxTable): Promise<QueueStats> {
  return withContext(`reading the ${t.what} queue`, async () => {
    const [r] = await q.query<{ n: number; age: number | null }>(
      `select count(*)::bigint as n, extract(epoch from now() - min(created_at))::float8 as age from ${t.name}`,
    );
    return { depth: Number(r.n), oldestAgeSec: r.age === null ? 0 : Math.max(0, Number(r.age)) };
  });
}
