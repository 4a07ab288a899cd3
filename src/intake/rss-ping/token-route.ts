// Owns GET /rssping/token (RSS Ping publisher-side authentication): a registered publisher asks for a
// single-use token, rate-limited per client address, and gets it as the whole text/plain body.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { firstParam, queryParam } from '../../platform/http-schema.js';
import type { Config } from '../../platform/config.js';
import { normalizeUrl, PingValidationError } from '../ping/validate.js';
import { findPublisher } from './publisher-repository.js';
import { issueToken, MAX_LIVE_TOKENS } from './token-repository.js';
import { clientKey, RateLimiter } from '../abuse/rate-limit.js';
import { deriveKey, endpointDigests, newToken, openPassword, SecretBoxError } from './secret-box.js';

/**
 * Token requests one client address may make per minute (IPv6: per /64), counted per instance: enough for a
 * blog host asking for its many sites from one server, not for one client to hold every publisher's tokens.
 */
export const TOKEN_REQUESTS_PER_MIN = 120;

const TEXT_TYPE = 'text/plain; charset=utf-8';

/** GET /rssping/token?site_uri=… */
const TokenQuery = Type.Object({ site_uri: queryParam(8192) });
type TokenQuery = Static<typeof TokenQuery>;

/** Registers GET /rssping/token on `app` (the RSS Ping routes' context: its errors are answered as text there). */
export function tokenRoute(app: FastifyInstance, config: Pick<Config, 'RSSPING_SECRET'>): void {
  const key = config.RSSPING_SECRET ? deriveKey(config.RSSPING_SECRET) : null;
  const tokenRequests = new RateLimiter(TOKEN_REQUESTS_PER_MIN);
  app.addHook('onClose', async () => tokenRequests.close());

  // The token is the whole body (text/plain), so that `curl -s` gives it to a shell variable as is.
  app.get('/rssping/token', { schema: { querystring: TokenQuery } }, async (req: FastifyRequest<{ Querystring: TokenQuery }>, reply) => {
    reply.header('content-type', TEXT_TYPE).header('cache-control', 'no-store');
    if (!key) return reply.code(503).send('Publisher-side authentication is not enabled on this server (RSSPING_SECRET is not set).\n');
    // Per client, before any work: asking for tokens costs a database write each (and would let one client
    // take every publisher's tokens in turn).
    const d = tokenRequests.take(clientKey(req.ip));
    if (!d.ok) {
      return reply
        .code(429)
        .header('retry-after', String(d.retryAfterSec))
        .send(
          `Too many token requests from your address (at most ${TOKEN_REQUESTS_PER_MIN} a minute); ask again in ${d.retryAfterSec} seconds.\n`,
        );
    }
    const siteUri = firstParam(req.query, 'site_uri');
    if (!siteUri) return reply.code(400).send('site_uri is missing: GET /rssping/token?site_uri=<your site URI>\n');
    let url: string;
    try {
      url = normalizeUrl(siteUri, 'site_uri');
    } catch (err) {
      if (err instanceof PingValidationError) return reply.code(400).send(`${err.message}\n`);
      throw err;
    }
    try {
      const publisher = await findPublisher(app.db, url);
      if (!publisher) return reply.code(404).send(`No publisher is registered for ${url}.\n`);
      const password = openPassword(key, publisher.site_url, publisher.password_sealed);
      const token = newToken();
      // The endpoint is computed from site_uri exactly as the publisher sent it here.
      const issued = await issueToken(app.db, publisher.id, endpointDigests(siteUri, password, token));
      if (!issued.ok) {
        const sec = Math.max(1, Math.ceil((issued.retryAt.getTime() - Date.now()) / 1000));
        return reply
          .code(429)
          .header('retry-after', String(sec))
          .send(`${url} already has ${MAX_LIVE_TOKENS} unused tokens; use one, or ask again in ${sec} seconds when the oldest expires.\n`);
      }
      return reply.code(200).send(token);
    } catch (err) {
      req.log.error({ err: { message: (err as Error).message } }, 'rss ping token not issued');
      const why = err instanceof SecretBoxError ? 'the publisher password cannot be read with this server key' : 'database unavailable';
      return reply.code(503).send(`No token could be issued (${why}); please try again later.\n`);
    }
  });
}
