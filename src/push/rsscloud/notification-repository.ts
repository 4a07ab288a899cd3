// Owns the SQL of what the rssCloud notification queue (rsscloud_notifications) holds: queueing one
// notification per unexpired subscriber of a changed feed in the verification's own transaction (folded
// into the one already waiting), and the claim's reading of a notification and its subscription, with at
// most one in flight per endpoint host across instances. Claiming and settling rows are the shared
// outbox's (platform/outbox/outbox-repository.ts). Plain values in, plain rows out.
import type { Db, Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';
import { claimOneLeasedPerHost, queueStats, type OutboxTable } from '../../platform/outbox/outbox-repository.js';
import type { QueueStats } from '../../platform/queue/queue-gauge.js';
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

/** rssCloud's queue, in the shape every outbound queue shares (platform/outbox). */
export const RSSCLOUD_NOTIFICATIONS: OutboxTable = {
  name: 'rsscloud_notifications',
  host: 'endpoint_host',
  what: 'rssCloud notifications',
};

/** Serialises the claims of rssCloud notifications across instances (claimOneLeasedPerHost). */
export const RSSCLOUD_CLAIM_LOCK = 0x72636c64; // 'rcld'

type Raw = { id: number; seq: number; attempts: number; endpoint_host: string; subscription: Notification['subscription'] | string };

/**
 * Claims up to `limit` due notifications, none of a host in `busyHosts`, one per endpoint host and none of
 * a host with a notification leased anywhere (one in flight per host across instances).
 */
export async function claimNotifications(db: Db, limit: number, leaseSec: number, busyHosts: readonly string[]): Promise<Notification[]> {
  const rows = await claimOneLeasedPerHost<Raw>(db, RSSCLOUD_NOTIFICATIONS, RSSCLOUD_CLAIM_LOCK, {
    limit,
    leaseSec,
    busyHosts,
    perHost: 1,
    // The live subscription as one object (null once it expired: the notification is dropped).
    select: `case when s.expires_at > now() then json_build_object('id', s.id, 'resourceUrl', s.resource_url, 'notifyUrl', s.notify_url,
               'protocol', s.protocol, 'notifyProcedure', s.notify_procedure) end as subscription`,
    join: 'left join rsscloud_subscriptions s on s.id = u.subscription_id',
  });
  return rows.map((r) => {
    const sub = typeof r.subscription === 'string' ? (JSON.parse(r.subscription) as Notification['subscription']) : r.subscription;
    return {
      id: Number(r.id),
      seq: Number(r.seq),
      attempts: Number(r.attempts),
      host: r.endpoint_host,
      subscription: sub && { ...sub, id: Number(sub.id) },
    };
  });
}

/** Waiting notifications and the oldest one's age, for /status and the queue gauge. */
export const notificationQueueStats = (q: Queryable): Promise<QueueStats> => queueStats(q, RSSCLOUD_NOTIFICATIONS);
