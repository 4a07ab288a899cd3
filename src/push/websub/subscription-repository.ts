// Owns the SQL of WebSub subscriptions (websub_subscriptions): storing or renewing one the callback
// confirmed, removing one, recording each delivery's result (failures in a row, failing, last success),
// the sweep of expired leases, the operator's list (keyset pages), the counts by state and the count the
// subscription cap is checked against. Plain values in, plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';
import { columns } from '../../platform/db/columns.js';

export type SubscriptionState = 'active' | 'failing';

export interface NewSubscription {
  topic: string;
  /** The document a topic of ours names; null for a feed topic. */
  path: string | null;
  callback: string;
  secret: string | null;
  leaseSeconds: number;
  /** The callback's host (request.ts, callbackHost). */
  callbackHost: string;
  /** A feed topic: its feed (verification's row) and host. */
  feedId?: number | null;
  topicHost?: string | null;
}

/**
 * Stores a confirmed subscription, or renews it: a new lease from now and the new secret (WebSub §5.3). A
 * new subscription to a feed topic starts after the feed's latest change: it gets only what comes later.
 */
export async function storeSubscription(q: Queryable, s: NewSubscription): Promise<void> {
  await withContext(`storing the WebSub subscription of ${s.callback}`, () =>
    q.query(
      `insert into websub_subscriptions (topic, path, callback, secret, lease_seconds, expires_at, callback_host, feed_id, topic_host, through_change_id)
       values ($1, $2, $3, $4, $5, now() + make_interval(secs => $5::int), $6, $7, $8,
               case when $7::bigint is null then 0 else (select coalesce(max(id), 0) from websub_changes where feed_id = $7::bigint) end)
       on conflict (topic, callback) do update
         set path = excluded.path, secret = excluded.secret, lease_seconds = excluded.lease_seconds,
             expires_at = excluded.expires_at, renewed_at = now(), callback_host = excluded.callback_host,
             feed_id = excluded.feed_id, topic_host = excluded.topic_host`,
      [s.topic, s.path, s.callback, s.secret, s.leaseSeconds, s.callbackHost, s.feedId ?? null, s.topicHost ?? null],
    ),
  );
}

/** Renews an unexpired subscription in place (a new lease from now, the new secret); false when there is none. */
export async function renewSubscription(
  q: Queryable,
  r: { topic: string; callback: string; secret: string | null; leaseSeconds: number },
): Promise<boolean> {
  return withContext(`renewing the WebSub subscription of ${r.callback}`, async () => {
    const rows = await q.query(
      `update websub_subscriptions set secret = $3, lease_seconds = $4, expires_at = now() + make_interval(secs => $4::int), renewed_at = now()
        where topic = $1 and callback = $2 and expires_at > now() returning id`,
      [r.topic, r.callback, r.secret, r.leaseSeconds],
    );
    return rows.length > 0;
  });
}

/**
 * Feed topics with live subscriptions or pending subscribes, as WEBSUB_MAX_TOPICS counts them; read at
 * most once a second (subscription-tally.ts).
 */
export async function countTopics(q: Queryable): Promise<number> {
  return withContext('counting WebSub feed topics', async () => {
    const [r] = await q.query<{ n: number }>(
      `select count(*)::int as n from (
         select topic from websub_subscriptions where feed_id is not null and expires_at > now()
         union
         select topic from websub_tasks where topic_host is not null and mode = 'subscribe' and kind in ('verify', 'check')
       ) t`,
    );
    return Number(r.n);
  });
}

/** Removes a subscription (its waiting delivery goes with it); false when there was none. */
export async function removeSubscription(q: Queryable, topic: string, callback: string): Promise<boolean> {
  return withContext(`removing the WebSub subscription of ${callback}`, async () => {
    const rows = await q.query('delete from websub_subscriptions where topic = $1 and callback = $2 returning id', [topic, callback]);
    return rows.length > 0;
  });
}

export interface DeliveryRecord {
  subscriptionId: number;
  ok: boolean;
  status: number | null;
  error: string | null;
  /** The rendering sent (a document topic: recorded as received on success); 0 for a feed topic. */
  renderingId: number;
  /** A feed topic's change the subscriber went through (delivered, or given up after its tries); null: none. */
  throughChangeId: number | null;
}

/**
 * Records a batch of delivery attempts in one statement. A success clears the failures and the failing
 * state; a failure counts one more, and the subscription turns failing at `failAfter` in a row.
 */
export async function recordDeliveries(q: Queryable, records: readonly DeliveryRecord[], failAfter: number): Promise<void> {
  if (records.length === 0) return;
  await withContext(`recording ${records.length} WebSub deliveries`, () =>
    q.query(
      `update websub_subscriptions s
          set failures = case when r.ok then 0 else s.failures + 1 end,
              state = case when r.ok then 'active' when s.failures + 1 >= $7::int then 'failing' else s.state end,
              last_status = r.status, last_error = case when r.ok then null else r.error end, last_attempt_at = now(),
              last_success_at = case when r.ok then now() else s.last_success_at end,
              delivered_rendering_id = case when r.ok then greatest(coalesce(s.delivered_rendering_id, 0), r.rendering_id)
                                            else s.delivered_rendering_id end,
              through_change_id = case when r.through is null then s.through_change_id else greatest(s.through_change_id, r.through) end
         from unnest($1::bigint[], $2::boolean[], $3::int[], $4::text[], $5::bigint[], $6::bigint[]) as r(id, ok, status, error, rendering_id, through)
        where s.id = r.id`,
      [...columns(records, ['subscriptionId', 'ok', 'status', 'error', 'renderingId', 'throughChangeId']), failAfter],
      { name: 'pingd_record_websub_deliveries' },
    ),
  );
}

/** Deletes subscriptions whose lease has ended (WebSub §5.1: a lease is how long a subscription lasts). */
export async function sweepExpired(q: Queryable): Promise<number> {
  return withContext('sweeping expired WebSub subscriptions', async () => {
    const rows = await q.query('delete from websub_subscriptions where expires_at <= now() returning id');
    return rows.length;
  });
}

export interface SubscriptionView {
  /** The keyset of the operator's list: pages follow the order subscriptions were first stored. */
  id: number;
  topic: string;
  callback: string;
  state: SubscriptionState;
  expiresAt: Date;
  failures: number;
  lastStatus: number | null;
  lastError: string | null;
  lastSuccessAt: Date | null;
}

/**
 * One page of unexpired subscriptions (never the secret): the first `limit` after the subscription `afterId`
 * (none: from the start), in the order they were first stored (id). A page is one range of the primary key,
 * whatever the hub holds; a subscription stored while an operator pages through comes last, so nothing is
 * skipped or shown twice.
 */
export async function listSubscriptions(q: Queryable, afterId: number | null, limit: number): Promise<SubscriptionView[]> {
  return withContext('listing WebSub subscriptions', async () => {
    const rows = await q.query<{
      id: number;
      topic: string;
      callback: string;
      state: SubscriptionState;
      expires_at: Date;
      failures: number;
      last_status: number | null;
      last_error: string | null;
      last_success_at: Date | null;
    }>(
      `select id, topic, callback, state, expires_at, failures, last_status, last_error, last_success_at
         from websub_subscriptions where id > $1 and expires_at > now() order by id limit $2`,
      [afterId ?? 0, limit],
    );
    return rows.map((r) => ({
      id: Number(r.id),
      topic: r.topic,
      callback: r.callback,
      state: r.state,
      expiresAt: new Date(r.expires_at),
      failures: Number(r.failures),
      lastStatus: r.last_status === null ? null : Number(r.last_status),
      lastError: r.last_error,
      lastSuccessAt: r.last_success_at ? new Date(r.last_success_at) : null,
    }));
  });
}

/**
 * Unexpired subscriptions by state, and subscriptions waiting for their verification of intent (or, for a
 * feed topic, for the fetch of the topic that follows it).
 */
export async function subscriptionCounts(q: Queryable): Promise<{ active: number; failing: number; pending: number }> {
  return withContext('counting WebSub subscriptions', async () => {
    const [r] = await q.query<{ active: number; failing: number; pending: number }>(
      `select (select count(*) from websub_subscriptions where expires_at > now() and state = 'active')::int as active,
              (select count(*) from websub_subscriptions where expires_at > now() and state = 'failing')::int as failing,
              (select count(*) from websub_tasks where kind in ('verify', 'check') and mode = 'subscribe')::int as pending`,
    );
    return { active: Number(r.active), failing: Number(r.failing), pending: Number(r.pending) };
  });
}

/**
 * Active and pending subscriptions, as WEBSUB_MAX_SUBSCRIPTIONS counts them: unexpired subscriptions and
 * subscribes waiting for their verification of a pair not stored. A scan of every subscription (15 ms at
 * 10,000, measured): read at most once a second (subscription-tally.ts), never per request.
 */
export async function countForCap(q: Queryable): Promise<number> {
  return withContext('counting WebSub subscriptions for the cap', async () => {
    const [r] = await q.query<{ n: number }>(
      `select ((select count(*) from websub_subscriptions where expires_at > now())
             + (select count(*) from websub_tasks t
                 where t.kind in ('verify', 'check') and t.mode = 'subscribe'
                   and not exists (select 1 from websub_subscriptions s where s.topic = t.topic and s.callback = t.callback and s.expires_at > now())))::int as n`,
    );
    return Number(r.n);
  });
}

export interface TopicDelivery {
  at: Date;
  ok: boolean;
  status: number | null;
}

/**
 * A feed's live subscribers, counted, and the latest delivery attempts to them (newest first, at most
 * `limit`): for the weblog page, which shows how many and how it went, never who.
 */
export async function feedSubscribers(q: Queryable, feedId: number, limit = 5): Promise<{ subscribers: number; recent: TopicDelivery[] }> {
  return withContext(`reading the WebSub subscribers of feed ${feedId}`, async () => {
    const [c] = await q.query<{ n: number }>(
      'select count(*)::int as n from websub_subscriptions where feed_id = $1 and expires_at > now()',
      [feedId],
    );
    const rows = await q.query<{ last_attempt_at: Date; last_status: number | null; ok: boolean }>(
      `select last_attempt_at, last_status, (last_success_at is not null and last_success_at >= last_attempt_at) as ok
         from websub_subscriptions where feed_id = $1 and expires_at > now() and last_attempt_at is not null
        order by last_attempt_at desc limit $2`,
      [feedId, limit],
    );
    return {
      subscribers: Number(c.n),
      recent: rows.map((r) => ({
        at: new Date(r.last_attempt_at),
        ok: Boolean(r.ok),
        status: r.last_status === null ? null : Number(r.last_status),
      })),
    };
  });
}
