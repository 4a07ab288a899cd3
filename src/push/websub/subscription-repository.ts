// Owns the SQL of WebSub subscriptions (websub_subscriptions): storing or renewing one the callback
// confirmed, removing one, recording each delivery's result (failures in a row, failing, last success),
// the sweep of expired leases, the operator's list and the counts by state. Plain values in, plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';

export type SubscriptionState = 'active' | 'failing';

export interface NewSubscription {
  topic: string;
  path: string;
  callback: string;
  secret: string | null;
  leaseSeconds: number;
}

/** Stores a confirmed subscription, or renews it: a new lease from now and the new secret (WebSub §5.3). */
export async function storeSubscription(q: Queryable, s: NewSubscription): Promise<void> {
  await withContext(`storing the WebSub subscription of ${s.callback}`, () =>
    q.query(
      `insert into websub_subscriptions (topic, path, callback, secret, lease_seconds, expires_at)
       values ($1, $2, $3, $4, $5, now() + make_interval(secs => $5::int))
       on conflict (topic, callback) do update
         set path = excluded.path, secret = excluded.secret, lease_seconds = excluded.lease_seconds,
             expires_at = excluded.expires_at, renewed_at = now()`,
      [s.topic, s.path, s.callback, s.secret, s.leaseSeconds],
    ),
  );
}

/** Removes a subscription (its waiting delivery goes with it); false when there was none. */
export async function removeSubscription(q: Queryable, topic: string, callback: string): Promise<boolean> {
  return withContext(`removing the WebSub subscription of ${callback}`, async () => {
    const rows = await q.query('delete from websub_subscriptions where topic = $1 and callback = $2 returning id', [topic, callback]);
    return rows.length > 0;
  });
}

export interface DeliveryResult {
  ok: boolean;
  status: number | null;
  error: string | null;
  /** The rendering sent (recorded as received on success). */
  renderingId: number;
}

/**
 * Records a delivery attempt. A success clears the failures and the failing state; a failure counts one
 * more, and the subscription turns failing at `failAfter` in a row. Returns the failures in a row now.
 */
export async function recordDelivery(q: Queryable, id: number, r: DeliveryResult, failAfter: number): Promise<number> {
  return withContext(`recording a WebSub delivery to subscription ${id}`, async () => {
    const rows = r.ok
      ? await q.query<{ failures: number }>(
          `update websub_subscriptions
              set failures = 0, state = 'active', last_status = $2, last_error = null, last_attempt_at = now(), last_success_at = now(),
                  delivered_rendering_id = greatest(coalesce(delivered_rendering_id, 0), $3)
            where id = $1 returning failures`,
          [id, r.status, r.renderingId],
        )
      : await q.query<{ failures: number }>(
          `update websub_subscriptions
              set failures = failures + 1, state = case when failures + 1 >= $4 then 'failing' else state end,
                  last_status = $2, last_error = $3, last_attempt_at = now()
            where id = $1 returning failures`,
          [id, r.status, r.error, failAfter],
        );
    return rows.length ? Number(rows[0].failures) : 0;
  });
}

/** Deletes subscriptions whose lease has ended (WebSub §5.1: a lease is how long a subscription lasts). */
export async function sweepExpired(q: Queryable): Promise<number> {
  return withContext('sweeping expired WebSub subscriptions', async () => {
    const rows = await q.query('delete from websub_subscriptions where expires_at <= now() returning id');
    return rows.length;
  });
}

export interface SubscriptionView {
  topic: string;
  callback: string;
  state: SubscriptionState;
  expiresAt: Date;
  failures: number;
  lastStatus: number | null;
  lastError: string | null;
  lastSuccessAt: Date | null;
}

/** Unexpired subscriptions, by topic and callback (never the secret). */
export async function listSubscriptions(q: Queryable): Promise<SubscriptionView[]> {
  return withContext('listing WebSub subscriptions', async () => {
    const rows = await q.query<{
      topic: string;
      callback: string;
      state: SubscriptionState;
      expires_at: Date;
      failures: number;
      last_status: number | null;
      last_error: string | null;
      last_success_at: Date | null;
    }>(
      `select topic, callback, state, expires_at, failures, last_status, last_error, last_success_at
         from websub_subscriptions where expires_at > now() order by topic, callback`,
    );
    return rows.map((r) => ({
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

/** Unexpired subscriptions by state, and subscriptions waiting for their verification of intent. */
export async function subscriptionCounts(q: Queryable): Promise<{ active: number; failing: number; pending: number }> {
  return withContext('counting WebSub subscriptions', async () => {
    const [r] = await q.query<{ active: number; failing: number; pending: number }>(
      `select (select count(*) from websub_subscriptions where expires_at > now() and state = 'active')::int as active,
              (select count(*) from websub_subscriptions where expires_at > now() and state = 'failing')::int as failing,
              (select count(*) from websub_tasks where kind = 'verify' and mode = 'subscribe')::int as pending`,
    );
    return { active: Number(r.active), failing: Number(r.failing), pending: Number(r.pending) };
  });
}
