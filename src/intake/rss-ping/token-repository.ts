// Owns the single-use tokens of publisher-side authentication (RSS Ping: "a single use token retrieved
// from ping server that sets up a onetime use endpoint"). Tokens live in PostgreSQL so any instance can
// verify them; a token's endpoints are computed when it is issued, and using one is a single
// DELETE … RETURNING, so that of two concurrent uses exactly one wins.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';

export const TOKEN_TTL_SEC = 300;
/**
 * Unexpired tokens one publisher may hold. Beyond it no token is issued until one expires or is used: a new
 * token never evicts a live one (REGRESSION: the oldest was dropped for each new one, so 25 requests by
 * anyone voided the token the publisher had just been given, and its rss_ping got 401).
 */
export const MAX_LIVE_TOKENS = 20;
/** Expired tokens are kept this long so that using one can be answered "expired" rather than "unknown". */
export const EXPIRED_GRACE_SEC = 3600;

export type ConsumeResult =
  { status: 'ok'; publisherId: number; siteUrl: string } | { status: 'expired'; siteUrl: string } | { status: 'unknown' };

export type IssueResult = { ok: true; expiresAt: Date } | { ok: false; retryAt: Date };

/**
 * Stores a newly issued token's endpoints unless the publisher already holds MAX_LIVE_TOKENS unexpired
 * ones (then: when the oldest of them expires). Also purges long-expired tokens.
 */
export async function issueToken(
  q: Queryable,
  publisherId: number,
  endpoints: { sha1: string; md5: string },
  ttlSec = TOKEN_TTL_SEC,
): Promise<IssueResult> {
  return withContext('issuing a token failed', async () => {
    const [r] = await q.query<{ expires_at: Date | null; retry_at: Date | null }>(
      `with purge as (
         delete from rssping_tokens where expires_at < now() - make_interval(secs => $5::int)
       ),
       live as (
         select count(*) as n, min(expires_at) as oldest from rssping_tokens where publisher_id = $3 and expires_at > now()
       ),
       ins as (
         insert into rssping_tokens (endpoint_sha1, endpoint_md5, publisher_id, issued_at, expires_at)
         select $1, $2, $3, now(), now() + make_interval(secs => $4::int) from live where live.n < $6
         returning expires_at
       )
       select (select expires_at from ins) as expires_at, (select oldest from live) as retry_at`,
      [endpoints.sha1, endpoints.md5, publisherId, ttlSec, EXPIRED_GRACE_SEC, MAX_LIVE_TOKENS],
    );
    return r.expires_at ? { ok: true, expiresAt: new Date(r.expires_at) } : { ok: false, retryAt: new Date(r.retry_at ?? Date.now()) };
  });
}

/**
 * Uses an endpoint (40 hex characters: SHA1, 32: MD5; lower case). The row is deleted by the same
 * statement that reads it, whatever the outcome, so an endpoint can never be used twice.
 */
export async function consumeEndpoint(q: Queryable, endpoint: string): Promise<ConsumeResult> {
  const column = endpoint.length === 32 ? 'endpoint_md5' : 'endpoint_sha1';
  return withContext('using a publisher endpoint failed', async () => {
    const [r] = await q.query<{ publisher_id: number; site_url: string; live: boolean }>(
      `delete from rssping_tokens t using rssping_publishers p
       where t.${column} = $1 and p.id = t.publisher_id
       returning p.id as publisher_id, p.site_url, (t.expires_at > now()) as live`,
      [endpoint],
    );
    if (!r) return { status: 'unknown' };
    return r.live ? { status: 'ok', publisherId: Number(r.publisher_id), siteUrl: r.site_url } : { status: 'expired', siteUrl: r.site_url };
  });
}
