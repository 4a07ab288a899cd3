// Owns the SQL of what the hub's durable queue (websub_tasks) holds besides intents (intent-repository.ts):
// the deliveries of a publication, checks and denials, each coalesced with the one already waiting; and the
// claim's reading of a task and its subscription. Claiming and settling rows are the shared outbox's
// (platform/outbox/outbox-repository.ts). Plain values in, plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import type { QueueStats } from '../../platform/queue/queue-gauge.js';
import { withContext } from '../../platform/errors.js';
import { claim, queueStats, type OutboxTable } from '../../platform/outbox/outbox-repository.js';
import type { Mode } from './request.js';
import type { Intent } from './intent-repository.js';

interface TaskBase {
  id: number;
  /** Requests folded into the task so far: finishing deletes the task only if none came in meanwhile. */
  seq: number;
  /** Claims of the task, this one included (a deferral gives its claim back). */
  attempts: number;
  /** The callback's host, which the task's request goes to (null: a row from before it was recorded). */
  host: string | null;
}

export interface IntentTask extends TaskBase, Omit<Intent, 'callbackHost' | 'topicHost' | 'kind'> {
  kind: 'verify' | 'deny';
}

/**
 * A fetch of a feed topic for the hub: after a confirmed subscribe (`callback` set: the subscription is
 * stored if the topic is a feed, denied otherwise), or a poll of a subscribed topic (`callback` null).
 */
export interface CheckTask extends TaskBase {
  kind: 'check';
  topic: string;
  callback: string | null;
  leaseSeconds: number | null;
  secret: string | null;
  topicHost: string | null;
}

export interface DeliveryTask extends TaskBase {
  kind: 'deliver';
  /** The newest rendering queued for the subscriber (a document topic). */
  renderingId: number;
  /** The newest change queued for the subscriber (a feed topic). */
  changeId: number;
  /** The subscription, or null when it was deleted or has expired (the task is dropped). */
  subscription: {
    id: number;
    topic: string;
    path: string;
    callback: string;
    secret: string | null;
    failures: number;
    deliveredRenderingId: number | null;
    /** The feed a feed topic names (null: one of pingd's documents, `path`). */
    feedId: number | null;
    /** The last change of the feed this subscriber went through (delivered or given up). */
    throughChangeId: number;
  } | null;
}

export type Task = IntentTask | DeliveryTask | CheckTask;

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

/** The hub's queue, in the shape every outbound queue shares (platform/outbox). */
export const WEBSUB_TASKS: OutboxTable = { name: 'websub_tasks', host: 'callback_host', what: 'WebSub tasks' };

// The claim's subscription columns (a delivery's; null for intents and checks).
const SUBSCRIPTION = {
  select: `s.id as sub_id, s.topic as sub_topic, s.path as sub_path, s.callback as sub_callback, s.secret as sub_secret,
       s.failures as sub_failures, s.delivered_rendering_id, (s.expires_at > now()) as sub_live, s.feed_id as sub_feed_id,
       s.through_change_id as sub_through_change_id`,
  join: 'left join websub_subscriptions s on s.id = u.subscription_id',
};

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
  change_id: number | null;
  topic_host: string | null;
  sub_id: number | null;
  sub_topic: string | null;
  sub_path: string | null;
  sub_callback: string | null;
  sub_secret: string | null;
  sub_failures: number | null;
  delivered_rendering_id: number | null;
  sub_live: boolean | null;
  sub_feed_id: number | null;
  sub_through_change_id: number | null;
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
      changeId: Number(r.change_id ?? 0),
      subscription: live
        ? {
            id: Number(r.sub_id),
            topic: r.sub_topic as string,
            path: r.sub_path as string,
            callback: r.sub_callback as string,
            secret: r.sub_secret,
            failures: Number(r.sub_failures ?? 0),
            deliveredRenderingId: num(r.delivered_rendering_id),
            feedId: num(r.sub_feed_id),
            throughChangeId: Number(r.sub_through_change_id ?? 0),
          }
        : null,
    };
  }
  if (r.kind === 'check') {
    return {
      ...base,
      kind: 'check',
      topic: r.topic as string,
      callback: r.callback,
      leaseSeconds: num(r.lease_seconds),
      secret: r.secret,
      topicHost: r.topic_host,
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

/**
 * Claims up to `limit` due tasks, none of a host in `busyHosts`, at most `perHost` of any other host (a
 * publication's run of deliveries to one host is not claimed only to be put back). Intents and deliveries
 * take turns, each oldest first, so a verification of intent (WebSub §5.3: "as soon as possible") does not
 * wait behind a publication's backlog, nor deliveries behind a flood of intents.
 */
export async function claimTasks(
  q: Queryable,
  limit: number,
  leaseSec: number,
  busyHosts: readonly string[] = [],
  perHost = limit,
): Promise<Task[]> {
  const rows = await claim<Raw>(q, WEBSUB_TASKS, { limit, leaseSec, busyHosts, perHost, lane: "q.kind <> 'deliver'", ...SUBSCRIPTION });
  return rows.map(taskOf);
}

/**
 * Queues the check of a feed topic whose subscriber confirmed its intent (WebSub §5.3, then the topic is
 * fetched once: a feed is subscribed, anything else denied), folded into one already waiting for the pair.
 */
export async function queuePrimeCheck(
  q: Queryable,
  c: { topic: string; callback: string; leaseSeconds: number; secret: string | null; callbackHost: string; topicHost: string },
): Promise<void> {
  await withContext(`queueing the check of ${c.topic}`, () =>
    q.query(
      `insert into websub_tasks as t (kind, coalesce_key, topic, callback, mode, lease_seconds, secret, callback_host, topic_host)
       values ('check', md5('prime ' || $1::text || ' ' || $2::text), $1, $2, 'subscribe', $3, $4, $5, $6)
       on conflict (coalesce_key) do update set lease_seconds = excluded.lease_seconds, secret = excluded.secret, seq = t.seq + 1, attempts = 0`,
      [c.topic, c.callback, c.leaseSeconds, c.secret, c.callbackHost, c.topicHost],
    ),
  );
}

/** Queues a poll of a subscribed feed topic (at most one waiting per feed). Returns whether one was queued. */
export async function queuePoll(q: Queryable, feedId: number, topic: string): Promise<boolean> {
  return withContext(`queueing a poll of ${topic}`, async () => {
    const rows = await q.query(
      `insert into websub_tasks (kind, coalesce_key, topic) values ('check', 'poll ' || $1::bigint, $2)
       on conflict (coalesce_key) do nothing returning id`,
      [feedId, topic],
    );
    return rows.length > 0;
  });
}

/** Queues a denial (WebSub §5.2) decided by the hub after the request was accepted (the topic is no feed). */
export async function queueDenial(
  q: Queryable,
  d: { topic: string; callback: string; reason: string; callbackHost: string },
): Promise<void> {
  await withContext(`queueing a denial to ${d.callback}`, () =>
    q.query(
      `insert into websub_tasks as t (kind, coalesce_key, topic, callback, mode, reason, callback_host)
       values ('deny', md5('intent ' || $1::text || ' ' || $2::text), $1, $2, 'subscribe', $3, $4)
       on conflict (coalesce_key) do update set kind = 'deny', reason = excluded.reason, secret = null, seq = t.seq + 1, attempts = 0,
         due_at = case when t.leased_until > now() then t.due_at else now() end`,
      [d.topic, d.callback, d.reason.slice(0, 500), d.callbackHost],
    ),
  );
}

/** Tasks waiting or running, and the age of the oldest (the queue gauge, /status). */
export const taskQueueStats = (q: Queryable): Promise<QueueStats> => queueStats(q, WEBSUB_TASKS);

/**
 * Queues a check of each of `topics` that has live subscriptions (the other feeds of a weblog named in one
 * publish: its ping verifies the first). Written in the ping's own transaction. Returns how many.
 */
export async function queueTopicChecks(q: Queryable, topics: readonly string[]): Promise<number> {
  return withContext('queueing checks of published topics', async () => {
    const rows = await q.query(
      `insert into websub_tasks (kind, coalesce_key, topic)
       select 'check', 'poll ' || s.feed_id, s.topic
         from (select distinct on (feed_id) feed_id, topic from websub_subscriptions
                where topic = any($1::text[]) and feed_id is not null and expires_at > now() order by feed_id, id) s
       on conflict (coalesce_key) do nothing
       returning id`,
      [topics],
    );
    return rows.length;
  });
}
