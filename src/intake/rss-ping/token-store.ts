// Owns the single-use tokens of publisher-side authentication (RSS Ping: "a single use token retrieved
// from ping server that sets up a onetime use endpoint"). Tokens live in PostgreSQL so any instance can
// verify them; a token's endpoints are computed when it is issued, and using one is a single
// DELETE … RETURNING, so that of two concurrent uses exactly one wins.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';

export const TOKEN_TTL_SEC = 300;
/** Unexpired tokens kept per publisher; older ones are dropped when a new one is issued. */
export const MAX_LIVE_TOKENS = 20;
/** Expired tokens are kept this long so that using one can be answered "expired" rather than "unknown". */
export const EXPIRED_GRACE_SEC = 3600;

export type ConsumeResult = { status: 'ok'; publisherId: number; siteUrl: string } | { status: 'expired'; siteUrl: string } | { status: 'unknown' };

/** Stores a newly issued token's endpoints; returns when it expires. Also purges long-expired tokens. */
export async function issueToken(q: Queryable, publisherId: number, endpoints: { sha1: string; md5: string }, ttlSec = TOKEN_TTL_SEC): Promise<Date> {
  return withContext('issuing a token failed', async () => {
    const [r] = await q.query<{ expires_at: Date }>(
      `with purge as (
         delete from rssping_tokens where expires_at < now() - make_interval(secs => $5::int)
       )
       insert into rssping_tokens (endpoint_sha1, endpoint_md5, publisher_id, issued_at, expires_at)
       values ($1, $2, $3, now(), now() + make_interval(secs => $4::int))
       returning expires_at`,
      [endpoints.sha1, endpoints.md5, publisherId, ttlSec, EXPIRED_GRACE_SEC],
    );
    // A flood of token requests for one site cannot grow the table: keep the newest few.
    await q.query(
      `delete from rssping_tokens where publisher_id = $1 and endpoint_sha1 in (
         select endpoint_sha1 from rssping_tokens where publisher_id = $1 order by issued_at desc, endpoint_sha1 offset $2)`,
      [publisherId, MAX_LIVE_TOKENS],
    );
    return new Date(r.expires_at);
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
