// Owns an rss_ping's authentication (RSS Ping, "Authentication"): publisher-side through a one-time endpoint
// (used up whatever happens next, and checked to be issued for this site), pingserver-side by fetching
// payload_hash_uri and comparing, or none; and RSSPING_REQUIRE_AUTH refusing what is not authenticated.
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../platform/config.js';
import type { ValidPing } from '../ping/validate.js';
import type { RssPingDocument } from './parse.js';
import { checkPayloadHash } from './hash-auth.js';
import type { AuthLevel } from './payload-repository.js';
import { consumeEndpoint } from './token-repository.js';
import { RssPingRefusal } from './refusal.js';

export interface Auth {
  level: AuthLevel;
  note: string;
}

/** An issued endpoint: the SHA-1 (40) or MD5 (32) hex of site_uri + password + token. */
const ENDPOINT = /^(?:[0-9a-f]{40}|[0-9a-f]{32})$/;

/**
 * How an admitted rss_ping is authenticated: `endpoint` is the one-time endpoint it was posted to (none for
 * POST /rssping); `checkedUrl` the URL throttleBeforeParse found not throttled. Throws the refusal of a
 * ping that fails its authentication (or that RSSPING_REQUIRE_AUTH refuses); `onHashCheck` is told the
 * result of every payload_hash_uri check.
 */
export function rssPingAuthenticator(
  app: FastifyInstance,
  config: Pick<Config, 'RSSPING_VERIFY_HASH_URI' | 'RSSPING_REQUIRE_AUTH'>,
  onHashCheck: (result: string) => void,
): (endpoint: string | undefined, doc: RssPingDocument, ping: ValidPing, checkedUrl: string | null) => Promise<Auth> {
  /** Publisher-side: uses the one-time endpoint (whatever happens next) and checks it was issued for this site. */
  async function publisherAuth(endpoint: string, ping: ValidPing): Promise<Auth> {
    const e = endpoint.toLowerCase();
    if (!ENDPOINT.test(e))
      throw new RssPingRefusal(
        'unauthorized',
        'Unknown endpoint: POST to /rssping/<sha1 hex of site_uri + password + token>, with a token from GET /rssping/token.',
      );
    let r;
    try {
      r = await consumeEndpoint(app.db, e);
    } catch (err) {
      app.log.error({ err: { message: (err as Error).message } }, 'rss ping token check failed');
      throw new RssPingRefusal(
        'unavailable',
        'The endpoint could not be checked (database unavailable); please get a new token and ping again later.',
      );
    }
    if (r.status === 'unknown')
      throw new RssPingRefusal(
        'unauthorized',
        'Unknown or already used endpoint: get a new token from GET /rssping/token (each endpoint works once).',
      );
    if (r.status === 'expired')
      throw new RssPingRefusal('unauthorized', 'Expired endpoint: tokens are valid for 5 minutes; get a new one from GET /rssping/token.');
    if (r.siteUrl !== ping.url) throw new RssPingRefusal('forbidden', `This endpoint was issued for ${r.siteUrl}, not for ${ping.url}.`);
    return { level: 'publisher_side', note: 'publisher_side' };
  }

  /** Pingserver-side: fetch payload_hash_uri (unless the weblog is throttled anyway) and compare. */
  async function pingserverAuth(doc: RssPingDocument, ping: ValidPing, checkedUrl: string | null): Promise<Auth> {
    const phu = doc.payloadHashUri!;
    if (!config.RSSPING_VERIFY_HASH_URI) {
      onHashCheck('disabled');
      return { level: 'none', note: 'this server does not fetch payload_hash_uri' };
    }
    // A throttled ping is refused whatever its hash: don't let repeated pings make us fetch repeatedly.
    const throttled = checkedUrl === ping.url ? undefined : await app.pings.throttled(ping);
    if (throttled) throw RssPingRefusal.of(throttled);
    const check = await checkPayloadHash(app.fetcher, {
      siteUrl: ping.url,
      hashUri: phu.uri,
      algorithm: phu.algorithm,
      payload: doc.payload.bytes,
    });
    onHashCheck(check.outcome);
    if (check.outcome === 'mismatch') throw new RssPingRefusal('forbidden', check.note);
    if (check.outcome === 'match') return { level: 'pingserver_side', note: `pingserver_side (${check.note})` };
    return { level: 'none', note: check.note };
  }

  return async (endpoint, doc, ping, checkedUrl) => {
    const auth: Auth =
      endpoint !== undefined
        ? await publisherAuth(endpoint, ping)
        : doc.payloadHashUri
          ? await pingserverAuth(doc, ping, checkedUrl)
          : { level: 'none', note: 'no payload_hash_uri and no publisher endpoint' };
    if (auth.level === 'none' && config.RSSPING_REQUIRE_AUTH) {
      throw new RssPingRefusal(
        'unauthorized',
        `This server accepts only authenticated rss_pings (pingserver-side or publisher-side); not authenticated: ${auth.note}.`,
      );
    }
    return auth;
  };
}
