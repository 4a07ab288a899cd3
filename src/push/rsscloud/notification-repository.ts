// Owns the SQL of the rssCloud notification queue (rsscloud_notifications): queueing one notification per
// unexpired subscriber of a changed feed in the verification's own transaction (folded into the one
// already waiting), claiming due ones (FOR UPDATE SKIP LOCKED under a lease) with at most one in flight
// per endpoint host across instances, and finishing, retrying, deferring or dropping them. Plain values in,
// plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';
import type { Protocol } from './params.js';

export interface Notification {
  id: number;
  /** Changes folded in so far: finishing deletes the task only if none came in meanwhile. */
  seq: number;
  /** Claims of the task, this one included. */
  attempts: number;
  host: string;
  /** The subscription, or null when it expired (the notification is dropped). */
  subscription: { id: number; resourceUrl: string; notifyUrl: string; protocol: Protocol; notifyProcedure: string | null } | null;
}

/** Queues a notification to every unexpired subscriber of the feed; returns how many were reached. */
export async function queueNotifications(q: Queryable, feedId: number): Promise<number> {
  return withContext(`queueing rssCloud notifications of feed ${feedId}`, async () => {
    const rows = await q.query(
      `insert into rsscloud_notifications as n (subscription_id, endpoint_host)
       select s.id, s.endpoint_host from rsscloud_subscriptions s where s.feed_id = $1 and s.expires_at > now()
       on conflict (subscription_id) do update set seq = n.seq + 1
       returning id`,
      [feedId],
    );
    return rows.length;
  });
}

// Of the first due tasks (a bounded slice of the due_at index), one per endpoint host, none of a host with
// a task leased anywhere (one notification in flight per host across instances) or busy here ($3).
const CLAIM = `
with cand as (
  select n.id, n.due_at, row_number() over (partition by n.endpoint_host order by n.due_at, n.id) as nth
    from (select id, due_at, endpoint_host from rsscloud_notifications
           where due_at <= now() and endpoint_host <> all($3::text[])
           order by due_at limit $1::int * 8) n
   where not exists (select 1 from rsscloud_notifications b where b.endpoint_host = n.endpoint_host and b.leased_until > now())
), pick as (
  select id from cand where nth = 1 order by due_at, id limit $1::int
), c as (
  select n.id from rsscloud_notifications n join pick on pick.id = n.id where n.due_at <= now() for update of n skip locked
), u as (
  update rsscloud_notifications n
     set due_at = now() + make_interval(secs => $2::int), leased_until = now() + make_interval(secs => $2::int), attempts = n.attempts + 1
    from c where n.id = c.id
  returning n.*
)
select u.id, u.seq, u.attempts, u.endpoint_host, s.id as sub_id, s.resource_url, s.notify_url, s.protocol, s.notify_procedure,
       (s.expires_at > now()) as live
  from u left join rsscloud_subscriptions s on s.id = u.subscription_id
 order by u.id`;

/** Claims up to `limit` due notifications, none of a host in `busyHosts`. */
export async function claimNotifications(
  q: Queryable,
  limit: number,
  leaseSec: number,
  busyHosts: readonly string[],
): Promise<Notification[]> {
  return withContext('claiming rssCloud notifications', async () => {
    const rows = await q.query<{
      id: number;
      seq: number;
      attempts: number;
      endpoint_host: string;
      sub_id: number | null;
      resource_url: string | null;
      notify_url: string | null;
      protocol: Protocol | null;
      notify_procedure: string | null;
      live: boolean | null;
    }>(CLAIM, [limit, leaseSec, busyHosts], { name: 'pingd_claim_rsscloud_notifications' });
    return rows.map((r) => ({
      id: Number(r.id),
      seq: Number(r.seq),
      attempts: Number(r.attempts),
      host: r.endpoint_host,
      subscription:
        r.sub_id !== null && r.live === true
          ? {
              id: Number(r.sub_id),
              resourceUrl: r.resource_url as string,
              notifyUrl: r.notify_url as string,
              protocol: r.protocol as Protocol,
              notifyProcedure: r.notify_procedure,
            }
          : null,
    }));
  });
}

/** Sent: deleted, unless the feed changed again while it ran (then it is sent again now). */
export async function finishNotification(q: Queryable, id: number, seq: number): Promise<void> {
  await withContext(`finishing rssCloud notification ${id}`, () =>
    q.query(
      `with d as (delete from rsscloud_notifications where id = $1 and seq = $2 returning 1)
       update rsscloud_notifications set due_at = now(), leased_until = null, attempts = 0 where id = $1 and not exists (select 1 from d)`,
      [id, seq],
    ),
  );
}

/** Failed: tried again at `dueAt`. */
export async function retryNotification(q: Queryable, id: number, dueAt: Date): Promise<void> {
  await withContext(`retrying rssCloud notification ${id}`, () =>
    q.query('update rsscloud_notifications set due_at = $2, leased_until = null where id = $1', [id, dueAt]),
  );
}

/** Put back until `dueAt` without trying (the host's turn); the claim is given back. */
export async function deferNotification(q: Queryable, id: number, dueAt: Date): Promise<void> {
  await withContext(`deferring rssCloud notification ${id}`, () =>
    q.query('update rsscloud_notifications set due_at = $2, leased_until = null, attempts = greatest(attempts - 1, 0) where id = $1', [
      id,
      dueAt,
    ]),
  );
}

/** Given up (its tries are spent, or its subscription expired). */
export async function dropNotification(q: Queryable, id: number): Promise<void> {
  await withContext(`dropping rssCloud notification ${id}`, () => q.query('delete from rsscloud_notifications where id = $1', [id]));
}

/** Waiting notifications and the oldest one's age, for /status and the queue gauge. */
export async function notificationQueueStats(q: Queryable): Promise<{ depth: number; oldestAgeSec: number }> {
  return withContext('reading the rssCloud notification queue', async () => {
    const [r] = await q.query<{ depth: number; oldest: number | null }>(
      `select count(*)::int as depth, extract(epoch from now() - min(created_at))::float8 as oldest from rsscloud_notifications`,
    );
    return { depth: Number(r.depth), oldestAgeSec: Number(r.oldest ?? 0) };
  });
}
