// Owns the SQL of the hub's durable queue (websub_tasks): queueing an intent (bounded by the subscription
// cap) and the deliveries of a publication, each coalesced with the one already waiting; claiming due tasks
// (FOR UPDATE SKIP LOCKED, so instances sharing the database never run one task twice) under a lease; and
// finishing, retrying or deferring them. Plain values in, plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';
import type { Mode } from './request.js';

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
}

interface TaskBase {
  id: number;
  /** Requests folded into the task so far: finishing deletes the task only if none came in meanwhile. */
  seq: number;
  /** Claims of the task, this one included (a deferral gives its claim back). */
  attempts: number;
}

export interface IntentTask extends TaskBase, Intent {}

export interface DeliveryTask extends TaskBase {
  kind: 'deliver';
  /** The newest rendering queued for the subscriber. */
  renderingId: number;
  /** The subscription, or null when it was deleted or has expired (the task is dropped). */
  subscription: { id: number; topic: string; path: string; callback: string; secret: string | null; failures: number; deliveredRenderingId: number | null } | null;
}

export type Task = IntentTask | DeliveryTask;

/**
 * Queues an intent, or folds it into the one waiting for the same topic and callback (the latest request
 * wins; one that is running is left to finish and the new one runs after it). A subscribe of a new pair is
 * refused (false) when active and pending subscriptions already number `maxSubscriptions`. The check and the
 * insert are one statement; instances racing at the cap may pass it by the requests in flight at that
 * instant.
 */
export async function queueIntent(q: Queryable, i: Intent, maxSubscriptions: number): Promise<boolean> {
  return withContext('queueing a WebSub intent', async () => {
    const rows = await q.query(
      `with counted as (
         select topic, callback from websub_subscriptions where expires_at > now()
         union
         select topic, callback from websub_tasks where kind = 'verify' and mode = 'subscribe'
       ), room as (
         select not $9::boolean
             or exists (select 1 from counted where topic = $2 and callback = $4)
             or (select count(*) from counted) < $10 as ok
       )
       insert into websub_tasks as t (kind, coalesce_key, topic, path, callback, mode, lease_seconds, secret, reason)
       select $1, md5('intent ' || $2 || ' ' || $4), $2, $3, $4, $5, $6, $7, $8 from room where room.ok
       on conflict (coalesce_key) do update
         set kind = excluded.kind, path = excluded.path, mode = excluded.mode, lease_seconds = excluded.lease_seconds,
             secret = excluded.secret, reason = excluded.reason, seq = t.seq + 1, attempts = 0,
             due_at = case when t.leased_until > now() then t.due_at else now() end
       returning id`,
      [i.kind, i.topic, i.path, i.callback, i.mode, i.leaseSeconds, i.secret, i.reason, i.kind === 'verify' && i.mode === 'subscribe', maxSubscriptions],
    );
    return rows.length > 0;
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
      `insert into websub_tasks as t (kind, coalesce_key, subscription_id, rendering_id)
       select 'deliver', 'deliver ' || s.id, s.id, $2 from websub_subscriptions s where s.path = $1 and s.expires_at > now()
       on conflict (coalesce_key) do update set rendering_id = greatest(t.rendering_id, excluded.rendering_id), seq = t.seq + 1
       returning id`,
      [path, renderingId],
    );
    return rows.length;
  });
}

// A claim pushes due_at one lease ahead and marks the task running (leased_until) until it is finished.
const CLAIM = `
with c as (
  select id from websub_tasks where due_at <= now() order by due_at limit $1 for update skip locked
),
u as (
  update websub_tasks t set due_at = now() + make_interval(secs => $2::int), leased_until = now() + make_interval(secs => $2::int), attempts = t.attempts + 1
    from c where t.id = c.id
  returning t.*
)
select u.id, u.kind, u.seq, u.attempts, u.topic, u.path, u.callback, u.mode, u.lease_seconds, u.secret, u.reason, u.rendering_id,
       s.id as sub_id, s.topic as sub_topic, s.path as sub_path, s.callback as sub_callback, s.secret as sub_secret,
       s.failures as sub_failures, s.delivered_rendering_id, (s.expires_at > now()) as sub_live
  from u left join websub_subscriptions s on s.id = u.subscription_id
 order by u.id`;

type Raw = {
  id: number;
  kind: Task['kind'];
  seq: number;
  attempts: number;
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
  const base = { id: Number(r.id), seq: Number(r.seq), attempts: Number(r.attempts) };
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
  return { ...base, kind: r.kind, topic: r.topic as string, path: r.path, callback: r.callback as string, mode: r.mode as Mode, leaseSeconds: num(r.lease_seconds), secret: r.secret, reason: r.reason };
}

export async function claimTasks(q: Queryable, limit: number, leaseSec: number): Promise<Task[]> {
  return withContext('claiming WebSub tasks', async () => {
    const rows = await q.query<Raw>(CLAIM, [limit, leaseSec], { name: 'pingd_claim_websub_tasks' });
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
    q.query('update websub_tasks set due_at = case when $3::int is null or seq = $3 then $2 else now() end, leased_until = null where id = $1', [id, dueAt, seq]),
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
