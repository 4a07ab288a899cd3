// Owns the SQL of a subscriber's request entering the hub's queue (websub_tasks): an intent to verify
// (subscribe, unsubscribe) or a denial, admitted by the hub's bounds in the same statement that queues it.
// Plain values in, plain rows out.
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
  /** A feed topic's host (null: one of pingd's documents, or a denial). */
  topicHost: string | null;
}

/** Who asked: the client address the intent is counted under (IPv6: its /64). */
export interface IntentOrigin {
  client: string;
}

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
