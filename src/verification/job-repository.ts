// Owns the SQL of the verification queue: claiming due jobs (FOR UPDATE SKIP LOCKED, so instances sharing
// the database never take the same job) under a lease, deferring them, settling every open job of a weblog
// with one fetch's outcome, and the queue's depth and age. Plain values in, plain rows out.
import type { Queryable } from '../platform/db/database.js';
import { withContext } from '../platform/errors.js';
import type { QueueStats } from '../platform/queue/queue-gauge.js';
import type { Outcome } from '../platform/outcomes.js';

export interface Job {
  pingId: number;
  weblogId: number;
  receivedAt: Date;
  attempts: number;
  /** The feed the ping named (extendedPing's rssUrl, rss_ping's first feed_uri), if any. */
  pingRssUrl: string | null;
  weblogUrl: string;
  weblogName: string;
  weblogFeedId: number | null;
  weblogRssUrl: string | null;
  /** Progress kept across deferrals: requests sent so far, the first one's time, where to go on. */
  progress: Progress;
}

export interface Progress {
  requests: number;
  startedAt: Date | null;
  /** The target of an XML redirect not yet fetched, and the redirects left after it. */
  resume: { url: string; hopsLeft: number } | null;
}

// A claim pushes due_at one lease ahead: if this instance dies mid-job, another claims it after the lease.
const CLAIM = `
with c as (
  select ping_id from ping_verifications
   where outcome is null and due_at <= now()
   order by due_at
   limit $1
   for update skip locked
),
u as (
  update ping_verifications v set due_at = now() + make_interval(secs => $2::int), attempts = v.attempts + 1
    from c where v.ping_id = c.ping_id
  returning v.ping_id, v.weblog_id, v.received_at, v.attempts, v.requests, v.started_at, v.resume_url, v.resume_hops
)
select u.ping_id, u.weblog_id, u.received_at, u.attempts, u.requests, u.started_at, u.resume_url, u.resume_hops, p.rss_url as ping_rss_url,
       w.url as weblog_url, w.name as weblog_name, w.feed_id, w.rss_url as weblog_rss_url
  from u join weblogs w on w.id = u.weblog_id left join lateral (select p.rss_url from pings p where p.id = u.ping_id and p.received_at = u.received_at limit 1) p on true
 order by u.received_at`;

export async function claimVerifyJobs(q: Queryable, limit: number, leaseSec: number): Promise<Job[]> {
  return withContext('claiming verification jobs', async () => {
    const rows = await q.query<{
      ping_id: number;
      weblog_id: number;
      received_at: Date;
      attempts: number;
      requests: number;
      started_at: Date | null;
      resume_url: string | null;
      resume_hops: number | null;
      ping_rss_url: string | null;
      weblog_url: string;
      weblog_name: string;
      feed_id: number | null;
      weblog_rss_url: string | null;
    }>(CLAIM, [limit, leaseSec], { name: 'pingd_claim_verifications' });
    return rows.map((r) => ({
      pingId: Number(r.ping_id),
      weblogId: Number(r.weblog_id),
      receivedAt: new Date(r.received_at),
      attempts: Number(r.attempts),
      pingRssUrl: r.ping_rss_url,
      weblogUrl: r.weblog_url,
      weblogName: r.weblog_name,
      weblogFeedId: r.feed_id === null ? null : Number(r.feed_id),
      weblogRssUrl: r.weblog_rss_url,
      progress: {
        requests: Number(r.requests),
        startedAt: r.started_at ? new Date(r.started_at) : null,
        resume: r.resume_url ? { url: r.resume_url, hopsLeft: Number(r.resume_hops ?? 0) } : null,
      },
    }));
  });
}

/**
 * Puts a claimed job back until `dueAt` (politeness, backoff) with its progress, so that its next run goes
 * on where this one stopped; `refund` takes back the claim's attempt.
 */
export async function deferJob(q: Queryable, pingId: number, dueAt: Date, progress: Progress, refund = true): Promise<void> {
  await withContext(`deferring verification ${pingId}`, () =>
    q.query(
      `update ping_verifications set due_at = $2, attempts = attempts - $3::int, requests = $4, started_at = $5, resume_url = $6, resume_hops = $7
        where ping_id = $1 and outcome is null`,
      [
        pingId,
        dueAt,
        refund ? 1 : 0,
        progress.requests,
        progress.startedAt,
        progress.resume?.url ?? null,
        progress.resume?.hopsLeft ?? null,
      ],
    ),
  );
}

export interface Settled {
  /** Jobs settled (the claimed one and every other open job of the weblog received before the fetch). */
  n: number;
  /** The latest receive time among them. */
  lastReceivedAt: Date | null;
}

/**
 * Settles the job and every open job of its weblog received up to `upTo` (the fetch started after them,
 * so it answered them too) with one outcome, and what it found new (the stream's `verified` events).
 */
export async function settleJobs(
  q: Queryable,
  pingId: number,
  weblogId: number,
  upTo: Date,
  outcome: Outcome,
  httpStatus: number | null,
  feedId: number | null,
  newItems: { title: string | null; link: string | null; guid: string | null }[] | null = null,
): Promise<Settled> {
  return withContext(`settling verification ${pingId}`, async () => {
    const [r] = await q.query<{ n: number; last: Date | null }>(
      `with s as (
         update ping_verifications set outcome = $4, done_at = now(), http_status = $5, feed_id = $6, new_items = $7::jsonb
          where outcome is null and (ping_id = $1 or (weblog_id = $2 and received_at <= $3))
         returning received_at
       ) select count(*)::int as n, max(received_at) as last from s`,
      [pingId, weblogId, upTo, outcome, httpStatus, feedId, newItems === null ? null : JSON.stringify(newItems)],
    );
    return { n: Number(r.n), lastReceivedAt: r.last ? new Date(r.last) : null };
  });
}

export async function verifyQueueStats(q: Queryable): Promise<QueueStats> {
  return withContext('reading the verification queue', async () => {
    const [r] = await q.query<{ n: number; age: number | null }>(
      'select count(*)::bigint as n, extract(epoch from now() - min(received_at))::float8 as age from ping_verifications where outcome is null',
    );
    return { depth: Number(r.n), oldestAgeSec: r.age === null ? 0 : Math.max(0, Number(r.age)) };
  });
}
