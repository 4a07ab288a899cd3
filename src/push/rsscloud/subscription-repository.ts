// Owns the SQL of rssCloud subscriptions: the bounds' counts (each an index range stopped at its bound),
// storing or renewing a request's subscriptions in one transaction, recording each notification's result,
// the sweep of expired ones, and the counts pages and metrics show (never an endpoint). Plain values in,
// plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';
import { columns } from '../../platform/db/columns.js';
import type { Protocol } from './params.js';

export interface Room {
  /** Unexpired subscriptions in all (up to the bound). */
  total: number;
  /** Unexpired subscriptions of the endpoint's host (up to the bound). */
  host: number;
  /** Unexpired subscriptions the requester asked for (up to the bound). */
  requester: number;
  /** Of the request's resources, those the endpoint already has (a renewal adds nothing). */
  renewals: number;
}

export async function roomFor(
  q: Queryable,
  endpointHost: string,
  notifyUrl: string,
  urls: readonly string[],
  requester: string | null,
  max: { total: number; perHost: number; perRequester: number },
): Promise<Room> {
  return withContext('counting rssCloud subscriptions', async () => {
    const [r] = await q.query<{ total: number; host: number; requester: number; renewals: number }>(
      `select (select count(*) from (select 1 from rsscloud_subscriptions where expires_at > now() limit $1::int) a)::int as total,
              (select count(*) from (select 1 from rsscloud_subscriptions where endpoint_host = $2 and expires_at > now() limit $3::int) h)::int as host,
              (select count(*) from (select 1 from rsscloud_subscriptions where requested_by = $6 and expires_at > now() limit $7::int) c)::int as requester,
              (select count(*) from rsscloud_subscriptions where notify_url = $4 and resource_url = any($5::text[]) and expires_at > now())::int as renewals`,
      [max.total, endpointHost, max.perHost, notifyUrl, urls, requester, max.perRequester],
    );
    return { total: Number(r.total), host: Number(r.host), requester: Number(r.requester), renewals: Number(r.renewals) };
  });
}

export interface NewSubscription {
  feedId: number;
  resourceUrl: string;
  notifyUrl: string;
  endpointHost: string;
  protocol: Protocol;
  /** The method an xml-rpc endpoint is called with; null for the other protocols. */
  notifyProcedure: string | null;
  requestedBy: string | null;
  leaseSec: number;
}

/** Stores or renews one subscription (a renewal keeps its counts and pushes its expiry). */
export async function storeSubscription(q: Queryable, s: NewSubscription): Promise<void> {
  await withContext('storing an rssCloud subscription', () =>
    q.query(
      `insert into rsscloud_subscriptions (feed_id, resource_url, notify_url, endpoint_host, protocol, notify_procedure, requested_by, expires_at)
       values ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8::int))
       on conflict (resource_url, notify_url) do update
          set feed_id = excluded.feed_id, protocol = excluded.protocol, notify_procedure = excluded.notify_procedure,
              requested_by = excluded.requested_by, renewed_at = now(), expires_at = excluded.expires_at`,
      [s.feedId, s.resourceUrl, s.notifyUrl, s.endpointHost, s.protocol, s.notifyProcedure, s.requestedBy, s.leaseSec],
    ),
  );
}

export interface Attempt {
  subscriptionId: number;
  ok: boolean;
  status: number | null;
  error: string | null;
  /** The notification is given up after this try (its last). */
  dropped: boolean;
}

/** Records a batch of notification attempts in one statement (counts, failures in a row, the last status). */
export async function recordAttempts(q: Queryable, attempts: readonly Attempt[]): Promise<void> {
  if (attempts.length === 0) return;
  await withContext(`recording ${attempts.length} rssCloud notifications`, () =>
    q.query(
      `update rsscloud_subscriptions s
          set last_attempt_at = now(), last_status = a.status, last_error = a.error,
              delivered = s.delivered + case when a.ok then 1 else 0 end,
              failed = s.failed + case when a.ok then 0 else 1 end,
              dropped = s.dropped + case when a.dropped then 1 else 0 end,
              failures = case when a.ok then 0 else s.failures + 1 end,
              last_success_at = case when a.ok then now() else s.last_success_at end
         from unnest($1::bigint[], $2::int[], $3::text[], $4::boolean[], $5::boolean[]) as a(id, status, error, ok, dropped)
        where s.id = a.id`,
      columns(attempts, ['subscriptionId', 'status', 'error', 'ok', 'dropped']),
      { name: 'pingd_record_rsscloud_attempts' },
    ),
  );
}

/** Deletes expired subscriptions (their waiting notifications go with them); returns how many. */
export async function sweepExpired(q: Queryable): Promise<number> {
  return withContext('deleting expired rssCloud subscriptions', async () => {
    const rows = await q.query('delete from rsscloud_subscriptions where expires_at <= now() returning 1');
    return rows.length;
  });
}

/** Whether a feed has an unexpired subscription: read before a verification cuts anything for rssCloud. */
export async function hasSubscriptions(q: Queryable, feedId: number): Promise<boolean> {
  const rows = await q.query('select 1 from rsscloud_subscriptions where feed_id = $1 and expires_at > now() limit 1', [feedId]);
  return rows.length > 0;
}

export interface ResourceSubscribers {
  /** Unexpired subscriptions of the feed. */
  subscribers: number;
  /** The latest tries, newest first: when, and how each went (never to whom). */
  recent: { at: Date; ok: boolean; status: number | null; error: string | null }[];
  delivered: number;
  failed: number;
  dropped: number;
}

/** What the weblog page shows of a feed's rssCloud subscribers: counts and the last tries' outcomes. */
export async function resourceSubscribers(q: Queryable, feedUrl: string, recent = 5): Promise<ResourceSubscribers> {
  return withContext(`reading the rssCloud subscribers of ${feedUrl}`, async () => {
    const rows = await q.query<{
      expires_at: Date;
      delivered: number;
      failed: number;
      dropped: number;
      last_attempt_at: Date | null;
      last_status: number | null;
      last_error: string | null;
      last_success_at: Date | null;
    }>(
      `select s.expires_at, s.delivered, s.failed, s.dropped, s.last_attempt_at, s.last_status, s.last_error, s.last_success_at
         from rsscloud_subscriptions s join feeds f on f.id = s.feed_id
        where (f.url = $1 or f.fetch_url = $1) and s.expires_at > now()
        order by s.last_attempt_at desc nulls last limit 1000`,
      [feedUrl],
    );
    const out: ResourceSubscribers = { subscribers: rows.length, recent: [], delivered: 0, failed: 0, dropped: 0 };
    for (const r of rows) {
      out.delivered += Number(r.delivered);
      out.failed += Number(r.failed);
      out.dropped += Number(r.dropped);
      if (r.last_attempt_at && out.recent.length < recent) {
        const at = new Date(r.last_attempt_at);
        const ok = r.last_success_at !== null && new Date(r.last_success_at).getTime() === at.getTime();
        out.recent.push({ at, ok, status: r.last_status === null ? null : Number(r.last_status), error: ok ? null : r.last_error });
      }
    }
    return out;
  });
}

/**
 * Unexpired subscriptions, notifications delivered in the last minute (each subscription's latest: a
 * subscriber notified twice within the minute counts once) and dropped in all, from every instance.
 */
export async function subscriptionStats(q: Queryable): Promise<{ subscriptions: number; deliveredLastMinute: number; dropped: number }> {
  return withContext('counting rssCloud subscriptions', async () => {
    const [r] = await q.query<{ subscriptions: number; delivered: number; dropped: number }>(
      `select count(*) filter (where expires_at > now())::int as subscriptions,
              count(*) filter (where last_success_at > now() - interval '1 minute')::int as delivered,
              coalesce(sum(dropped), 0)::int as dropped
         from rsscloud_subscriptions`,
    );
    return { subscriptions: Number(r.subscriptions), deliveredLastMinute: Number(r.delivered), dropped: Number(r.dropped) };
  });
}
