// Owns the SQL of what the hub's durable queue (websub_tasks) holds: queueing an intent (admitted by the
// hub's bounds, decided in the same statement), the deliveries of a publication, checks and denials, each
// coalesced with the one already waiting; and the claim's reading of a task and its subscription. Claiming
// and settling rows are the shared outbox's (platform/outbox/outbox-repository.ts). Plain values in, plain
// rows out.
import type { Queryable } from '../../platform/db/database.js';
import type { QueueStats } from '../../platform/queue/queue-gauge.js';
import { withContext } from '../../platform/errors.js';
import { claim, queueStats, type OutboxTable } from '../../platform/outbox/outbox-repository.js';
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
  /** A feed topic's host (null: one of pingd's documents, or a denial). */
  topicHost: string | null;
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

export interface AdmissionLimits {
  /** The hub is at WEBSUB_MAX_SUBSCRIPTIONS (its cached count, subscription-tally.ts): no new pair. */
  full: boolean;
  /** WEBSUB_MAX_PER_HOST. */
  maxPerHost: number;
  /** WEBSUB_MAX_PENDING. */
  maxPending: number;
  /** WEBSUB_MAX_TOPICS_PER_HOST: distinct feed topics subscribed from callbacks on one host. */
  maxTopicsPerHost: number;
  /** WEBSUB_MAX_PER_TOPIC_HOST: subscriptions whose feed topic is on one host. */
  maxPerTopicHost: number;
  /** The hub is at WEBSUB_MAX_TOPICS (its cached count): no new feed topic. */
  topicsFull: boolean;
}

export type Queued =
  | { refusal: Refusal }
  | {
      refusal: null;
      /** A subscribe of a pair that was neither stored nor waiting: one more toward the cap. */
      fresh: boolean;
      /** A fresh subscribe of a feed topic nobody is subscribed to (or waiting for) yet: one more toward WEBSUB_MAX_TOPICS. */
      newTopic: boolean;
    };

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
    const [r] = await q.query<{ refusal: Refusal | null; subscribed: boolean; waiting: boolean; topic_subscribed: boolean }>(
      `with facts as (
         select exists (select 1 from websub_subscriptions where topic = $2::text and callback = $4::text and expires_at > now()) as subscribed,
                exists (select 1 from websub_tasks where coalesce_key = md5('intent ' || $2::text || ' ' || $4::text)) as waiting,
                (select count(*) from (select 1 from websub_tasks where callback_host = $9::text and kind <> 'deliver' limit $12::int) h)::int as host_pending,
                (select count(*) from (select 1 from websub_tasks where requested_by = $10::text and kind <> 'deliver' limit $12::int) c)::int as client_pending,
                (select count(*) from (
                   select 1 from websub_subscriptions where callback_host = $9::text and expires_at > now()
                   union all
                   select 1 from websub_tasks t
                    where t.callback_host = $9::text and t.kind in ('verify', 'check') and t.mode = 'subscribe'
                      and not exists (select 1 from websub_subscriptions s where s.topic = t.topic and s.callback = t.callback and s.expires_at > now())
                   limit $13::int) s)::int as host_subscriptions,
                -- Feed topics only ($14 is the topic's host): the crawl a callback host and a topic host may cause.
                $14::text is not null and (
                  exists (select 1 from websub_subscriptions where callback_host = $9::text and topic = $2::text and expires_at > now())
                  or exists (select 1 from websub_tasks where callback_host = $9::text and topic = $2::text and mode = 'subscribe' and kind in ('verify', 'check'))
                ) as host_has_topic,
                case when $14::text is null then 0 else (select count(*) from (
                   select distinct topic from (
                     select topic from websub_subscriptions where callback_host = $9::text and feed_id is not null and expires_at > now()
                     union all
                     select topic from websub_tasks where callback_host = $9::text and mode = 'subscribe' and kind in ('verify', 'check') and topic_host is not null
                   ) a limit $15::int) d)::int end as host_topics,
                case when $14::text is null then 0 else (select count(*) from (
                   select 1 from websub_subscriptions where topic_host = $14::text and expires_at > now()
                   union all
                   select 1 from websub_tasks where topic_host = $14::text and mode = 'subscribe'
                   limit $16::int) h)::int end as topic_host_subscriptions,
                $14::text is not null and (
                  exists (select 1 from websub_subscriptions where topic = $2::text and expires_at > now())
                  or exists (select 1 from websub_tasks where topic = $2::text and mode = 'subscribe' and kind in ('verify', 'check'))
                ) as topic_subscribed
       ), verdict as (
         select f.subscribed, f.waiting, f.topic_subscribed, case
                  when f.waiting then null
                  when $5::text = 'unsubscribe' and not f.subscribed then 'not_subscribed'
                  when f.host_pending >= $12::int then 'host_pending'
                  when f.client_pending >= $12::int then 'client_pending'
                  when $1::text = 'verify' and $5::text = 'subscribe' and not f.subscribed and f.host_subscriptions >= $13::int then 'host_full'
                  when $1::text = 'verify' and $5::text = 'subscribe' and not f.subscribed and $11::boolean then 'full'
                  when $1::text = 'verify' and $5::text = 'subscribe' and not f.subscribed and not f.host_has_topic and f.host_topics >= $15::int then 'host_topics'
                  when $1::text = 'verify' and $5::text = 'subscribe' and not f.subscribed and f.topic_host_subscriptions >= $16::int then 'topic_host_full'
                  when $1::text = 'verify' and $5::text = 'subscribe' and not f.subscribed and not f.topic_subscribed and $17::boolean then 'topics_full'
                end as refusal
           from facts f
       ), queued as (
         insert into websub_tasks as t (kind, coalesce_key, topic, path, callback, mode, lease_seconds, secret, reason, callback_host, requested_by, topic_host)
         select $1::text, md5('intent ' || $2::text || ' ' || $4::text), $2::text, $3::text, $4::text, $5::text, $6::int, $7::text, $8::text, $9::text, $10::text, $14::text
           from verdict where refusal is null
         on conflict (coalesce_key) do update
           set kind = excluded.kind, path = excluded.path, mode = excluded.mode, lease_seconds = excluded.lease_seconds, topic_host = excluded.topic_host,
               secret = excluded.secret, reason = excluded.reason, requested_by = excluded.requested_by, seq = t.seq + 1, attempts = 0,
               due_at = case when t.leased_until > now() then t.due_at else now() end
         returning id
       )
       select refusal, subscribed, waiting, topic_subscribed from verdict`,
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
        i.topicHost,
        a.maxTopicsPerHost,
        a.maxPerTopicHost,
        a.topicsFull,
      ],
      // Planned once per pooled connection (planning is most of its cost: ~1 ms against ~0.3 ms to run).
      { name: 'pingd_queue_websub_intent' },
    );
    if (r.refusal) return { refusal: r.refusal };
    const fresh = i.kind === 'verify' && i.mode === 'subscribe' && !r.subscribed && !r.waiting;
    return { refusal: null, fresh, newTopic: fresh && i.topicHost !== null && !r.topic_subscribed };
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
