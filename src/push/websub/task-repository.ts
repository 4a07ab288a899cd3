// Owns the SQL of the hub's durable queue (websub_tasks): queueing an intent (admitted by the hub's bounds,
// decided in the same statement) and the deliveries of a publication, each coalesced with the one already
// waiting; claiming due tasks (FOR UPDATE SKIP LOCKED, so instances sharing the database never run one task
// twice) under a lease, past the hosts this instance is busy with; and finishing, retrying or deferring
// them. Plain values in, plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';
import type { Mode } from './request.js';
import type { Refusal } from './refusals.js';

export interface Intent {
  kind: 'verify' | 'deny';
  topic: string;
  /** The document the topic names (verify only). */
  path: string | null;
  callback: string;
  mode: Mode;
  leaseSeconds: number | null;
  secret: string | null;
  /** The denial's hub.reason (deny only). */
  reason: string | null;
  /** The callback's host (request.ts, callbackHost). */
  callbackHost: string;
}

/** Who asked: the client address the intent is counted under (IPv6: its /64). */
export interface IntentOrigin {
  client: string;
}

interface TaskBase {
  id: number;
  /** Requests folded into the task so far: finishing deletes the task only if none came in meanwhile. */
  seq: number;
  /** Claims of the task, this one included (a deferral gives its claim back). */
  attempts: number;
  /** The callback's host, which the task's request goes to (null: a row from before it was recorded). */
  host: string | null;
}

export interface IntentTask extends TaskBase, Omit<Intent, 'callbackHost'> {}

export interface DeliveryTask extends TaskBase {
  kind: 'deliver';
  /** The newest rendering queued for the subscriber. */
  renderingId: number;
  /** The subscription, or null when it was deleted or has expired (the task is dropped). */
  subscription: {
    id: number;
    topic: string;
    path: string;
    callback: string;
    secret: string | null;
    failures: number;
    deliveredRenderingId: number | null;
  } | null;
}

export type Task = IntentTask | DeliveryTask;

export interface AdmissionLimits {
  /** The hub is at WEBSUB_MAX_SUBSCRIPTIONS (its cached count, subscription-tally.ts): no new pair. */
  full: boolean;
  /** WEBSUB_MAX_PER_HOST. */
  maxPerHost: number;
  /** WEBSUB_MAX_PENDING. */
  maxPending: number;
}

export type Queued =
  | { refusal: Refusal }
  | { refusal: null; /** A subscribe of a pair that was neither stored nor waiting: one more toward the cap. */ fresh: boolean };

/**
 * Queues an intent, or folds it into the one waiting for the same topic and callback (the latest request
 * wins; one that is running is left to finish and the new one runs after it), unless a bound refuses it.
 * A request folded into one waiting adds no request to the callback and always passes. Otherwise, in order:
 * an unsubscribe of a pair with no unexpired subscription is refused (not_subscribed: there is nothing to
 * verify, WebSub §5.3's check protects a subscription that does not exist, so no request is sent); every
 * intent is a request to the callback, so `maxPending` bounds those waiting per callback host and per client
 * (host_pending, client_pending); a subscribe of a new pair needs room on its host (host_full: active and
 * pending subscriptions of the host, `maxPerHost`) and in the hub (full). The counts stop at their bound
 * (each an index range of at most that many rows), so a refusal costs the same at any size. The facts and
 * the insert are one statement; instances (PostgreSQL connections) racing at a bound may pass it by the
 * requests in flight at that instant.
 */
export async function queueIntent(q: Queryable, i: Intent, from: IntentOrigin, a: AdmissionLimits): Promise<Queued> {
  return withContext('queueing a WebSub intent', async () => {
    const [r] = await q.query<{ refusal: Refusal | null; subscribed: boolean; waiting: boolean }>(
      `with facts as (
         select exists (select 1 from websub_subscriptions where topic = $2::text and callback = $4::text and expires_at > now()) as subscribed,
                exists (select 1 from websub_tasks where coalesce_key = md5('intent ' || $2::text || ' ' || $4::text)) as waiting,
                (select count(*) from (select 1 from websub_tasks where callback_host = $9::text and kind <> 'deliver' limit $12::int) h)::int as host_pending,
                (select count(*) from (select 1 from websub_tasks where requested_by = $10::text and kind <> 'deliver' limit $12::int) c)::int as client_pending,
                (select count(*) from (
                   select 1 from websub_subscriptions where callback_host = $9::text and expires_at > now()
                   union all
                   select 1 from websub_tasks t
                    where t.callback_host = $9::text and t.kind = 'verify' and t.mode = 'subscribe'
                      and not exists (select 1 from websub_subscriptions s where s.topic = t.topic and s.callback = t.callback and s.expires_at > now())
                   limit $13::int) s)::int as host_subscriptions
       ), verdict as (
         select f.subscribed, f.waiting, case
                  when f.waiting then null
                  when $5::text = 'unsubscribe' and not f.subscribed then 'not_subscribed'
                  when f.host_pending >= $12::int then 'host_pending'
                  when f.client_pending >= $12::int then 'client_pending'
                  when $1::text = 'verify' and $5::text = 'subscribe' and not f.subscribed and f.host_subscriptions >= $13::int then 'host_full'
                  when $1::text = 'verify' and $5::text = 'subscribe' and not f.subscribed and $11::boolean then 'full'
                end as refusal
           from facts f
       ), queued as (
         insert into websub_tasks as t (kind, coalesce_key, topic, path, callback, mode, lease_seconds, secret, reason, callback_host, requested_by)
         select $1::text, md5('intent ' || $2::text || ' ' || $4::text), $2::text, $3::text, $4::text, $5::text, $6::int, $7::text, $8::text, $9::text, $10::text
           from verdict where refusal is null
         on conflict (coalesce_key) do update
           set kind = excluded.kind, path = excluded.path, mode = excluded.mode, lease_seconds = excluded.lease_seconds,
               secret = excluded.secret, reason = excluded.reason, requested_by = excluded.requested_by, seq = t.seq + 1, attempts = 0,
               due_at = case when t.leased_until > now() then t.due_at else now() end
         returning id
       )
       select refusal, subscribed, waiting from verdict`,
      [
        i.kind,
        i.topic,
        i.path,
        i.callback,
        i.mode,
        i.leaseSeconds,
        i.secret,
        i.reason,
        i.callbackHost,
        from.client,
        a.full,
        a.maxPending,
        a.maxPerHost,
      ],
      // Planned once per pooled connection (planning is most of its cost: ~1 ms against ~0.3 ms to run).
      { name: 'pingd_queue_websub_intent' },
    );
    if (r.refusal) return { refusal: r.refusal };
    return { refusal: null, fresh: i.kind === 'verify' && i.mode === 'subscribe' && !r.subscribed && !r.waiting };
  });
}

/** Whether any unexpired subscription names the document (no work, and no read of it, otherwise). */
export async function hasSubscribers(q: Queryable, path: string): Promise<boolean> {
  return withContext(`looking for subscribers of ${path}`, async () => {
    const rows = await q.query('select 1 from websub_subscriptions where path = $1 and expires_at > now() limit 1', [path]);
    return rows.length > 0;
  });
}

/**
 * Queues a delivery of `renderingId` (or newer) to every unexpired subscription of `path`. A delivery
 * already waiting for a subscription takes the newer rendering and keeps its time (due now, or the
 * subscriber's backoff); one running is run again after it. Returns the subscriptions reached.
 */
export async function queueDeliveries(q: Queryable, path: string, renderingId: number): Promise<number> {
  return withContext(`queueing WebSub deliveries of ${path}`, async () => {
    const rows = await q.query(
      `insert into websub_tasks as t (kind, coalesce_key, subscription_id, rendering_id, callback_host)
       select 'deliver', 'deliver ' || s.id, s.id, $2, s.callback_host from websub_subscriptions s where s.path = $1 and s.expires_at > now()
       on conflict (coalesce_key) do update set rendering_id = greatest(t.rendering_id, excluded.rendering_id), seq = t.seq + 1
       returning id`,
      [path, renderingId],
    );
    return rows.length;
  });
}

// A claim pushes due_at one lease ahead and marks the task running (leased_until) until it is finished.
// The tasks of the hosts in $3 (this instance has their requests in flight) are passed over: they wait in
// the queue, not in a worker's place. Of the first due tasks (a bounded slice of the due_at index for
// intents, and one for deliveries), at most $4 per host are taken, so a publication's run of deliveries to
// one host is not claimed only to be put back (a subscriber host's callbacks are queued side by side); and
// intents and deliveries take turns, each oldest first, so a verification of intent (WebSub §5.3: "as soon
// as possible") does not wait behind a publication's backlog, nor deliveries behind a flood of intents.
const CLAIM = `
with cand as (
  (select id, due_at, false as deliver, coalesce(callback_host, '#' || id) as host from websub_tasks
    where due_at <= now() and kind <> 'deliver' and (callback_host is null or callback_host <> all($3::text[]))
    order by due_at limit $1::int * 8)
  union all
  (select id, due_at, true as deliver, coalesce(callback_host, '#' || id) as host from websub_tasks
    where due_at <= now() and kind = 'deliver' and (callback_host is null or callback_host <> all($3::text[]))
    order by due_at limit $1::int * 8)
), ranked as (
  select id, due_at,
         row_number() over (partition by host order by due_at, id) as nth_of_host,
         row_number() over (partition by deliver order by due_at, id) as nth_of_kind
    from cand
), pick as (
  select id from ranked where nth_of_host <= $4::int order by nth_of_kind, due_at, id limit $1::int
), c as (
  select t.id from websub_tasks t join pick on pick.id = t.id where t.due_at <= now() for update of t skip locked
),
u as (
  update websub_tasks t set due_at = now() + make_interval(secs => $2::int), leased_until = now() + make_interval(secs => $2::int), attempts = t.attempts + 1
    from c where t.id = c.id
  returning t.*
)
select u.id, u.kind, u.seq, u.attempts, u.callback_host, u.topic, u.path, u.callback, u.mode, u.lease_seconds, u.secret, u.reason, u.rendering_id,
       s.id as sub_id, s.topic as sub_topic, s.path as sub_path, s.callback as sub_callback, s.secret as sub_secret,
       s.failures as sub_failures, s.delivered_rendering_id, (s.expires_at > now()) as sub_live
  from u left join websub_subscriptions s on s.id = u.subscription_id
 order by u.id`;

type Raw = {
  id: number;
  kind: Task['kind'];
  seq: number;
  attempts: number;
  callback_host: string | null;
  topic: string | null;
  path: string | null;
  callback: string | null;
  mode: Mode | null;
  lease_seconds: number | null;
  secret: string | null;
  reason: string | null;
  rendering_id: number | null;
  sub_id: number | null;
  sub_topic: string | null;
  sub_path: string | null;
  sub_callback: string | null;
  sub_secret: string | null;
  sub_failures: number | null;
  delivered_rendering_id: number | null;
  sub_live: boolean | null;
};

const num = (v: number | null) => (v === null ? null : Number(v));

function taskOf(r: Raw): Task {
  const base = { id: Number(r.id), seq: Number(r.seq), attempts: Number(r.attempts), host: r.callback_host };
  if (r.kind === 'deliver') {
    const live = r.sub_id !== null && r.sub_live === true;
    return {
      ...base,
      kind: 'deliver',
      renderingId: Number(r.rendering_id ?? 0),
      subscription: live
        ? {
            id: Number(r.sub_id),
            topic: r.sub_topic as string,
            path: r.sub_path as string,
            callback: r.sub_callback as string,
            secret: r.sub_secret,
            failures: Number(r.sub_failures ?? 0),
            deliveredRenderingId: num(r.delivered_rendering_id),
          }
        : null,
    };
  }
  return {
    ...base,
    kind: r.kind,
    topic: r.topic as string,
    path: r.path,
    callback: r.callback as string,
    mode: r.mode as Mode,
    leaseSeconds: num(r.lease_seconds),
    secret: r.secret,
    reason: r.reason,
  };
}

/** Claims up to `limit` due tasks, none of a host in `busyHosts`, at most `perHost` of any other host. */
export async function claimTasks(
  q: Queryable,
  limit: number,
  leaseSec: number,
  busyHosts: readonly string[] = [],
  perHost = limit,
): Promise<Task[]> {
  return withContext('claiming WebSub tasks', async () => {
    const rows = await q.query<Raw>(CLAIM, [limit, leaseSec, busyHosts, perHost], { name: 'pingd_claim_websub_tasks' });
    return rows.map(taskOf);
  });
}

/** The task is done: deleted, unless a request was folded into it while it ran (then it runs again now). */
export async function finishTask(q: Queryable, id: number, seq: number): Promise<void> {
  await withContext(`finishing WebSub task ${id}`, () =>
    q.query(
      `with d as (delete from websub_tasks where id = $1 and seq = $2 returning 1)
       update websub_tasks set due_at = now(), leased_until = null, attempts = 0 where id = $1 and not exists (select 1 from d)`,
      [id, seq],
    ),
  );
}

/**
 * The task failed and is tried again at `dueAt` (its claim counts as an attempt). With `seq`, a request
 * folded in while it ran (the subscriber asked again) runs now instead.
 */
export async function retryTask(q: Queryable, id: number, dueAt: Date, seq: number | null = null): Promise<void> {
  await withContext(`retrying WebSub task ${id}`, () =>
    q.query(
      'update websub_tasks set due_at = case when $3::int is null or seq = $3 then $2 else now() end, leased_until = null where id = $1',
      [id, dueAt, seq],
    ),
  );
}

/** The task is put back until `dueAt` without trying (the host's turn, a stale read); the claim is given back. */
export async function deferTask(q: Queryable, id: number, dueAt: Date): Promise<void> {
  await withContext(`deferring WebSub task ${id}`, () =>
    q.query('update websub_tasks set due_at = $2, leased_until = null, attempts = greatest(attempts - 1, 0) where id = $1', [id, dueAt]),
  );
}

/** A delivery whose subscription is gone or expired. */
export async function dropTask(q: Queryable, id: number): Promise<void> {
  await withContext(`dropping WebSub task ${id}`, () => q.query('delete from websub_tasks where id = $1', [id]));
}
