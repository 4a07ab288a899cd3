// Owns the RSS Ping endpoints (RSS Ping): POST /rssping (and POST /rssping/<one-time endpoint> for
// publisher-side authentication) take an rss_ping document, and GET /rssping/token hands a registered
// publisher its single-use token. An accepted rss_ping is also an ordinary ping: same validation, same
// throttle, committed with its payload in one transaction before the 200 is sent.
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { firstParam, queryParam } from '../../platform/http-schema.js';
import { Counter } from 'prom-client';
import type { Config } from '../../platform/config.js';
import { normalizeUrl, PingValidationError, type RawPing, type ValidPing } from '../ping/validate.js';
import { stripControls } from '../../platform/xml/escape.js';
import { THANKS } from '../ping/ping-service.js';
import { intakeRoute } from '../ping/plugin.js';
import { REFUSAL_STATUS, type RefusalReason, type Refused, type RssPingRefusalReason } from '../ping/refusals.js';
import { canonicalFeedType, readRssPing, RssPingError, scanRssPing, type RssPingDocument } from './parse.js';
import { extractPayload, type PayloadItem } from './payload.js';
import { checkPayloadHash } from './hash-auth.js';
import { insertPayload, type AuthLevel, type PayloadRecord } from './payload-repository.js';
import { findPublisher } from './publisher-repository.js';
import { consumeEndpoint, issueToken, MAX_LIVE_TOKENS } from './token-store.js';
import { clientKey, RateLimiter } from '../abuse/rate-limit.js';
import { deriveKey, endpointDigests, newToken, openPassword, SecretBoxError } from './secret-box.js';
import { rssPingResponseXml } from './response.js';

/**
 * Token requests one client address may make per minute (IPv6: per /64), counted per instance: enough for a
 * blog host asking for its many sites from one server, not for one client to hold every publisher's tokens.
 */
export const TOKEN_REQUESTS_PER_MIN = 120;

/** The longest the throttle read before the parse is waited for (then the parse and the commit decide). */
const EARLY_THROTTLE_READ_MS = 250;

const XML_TYPE = 'text/xml; charset=utf-8';
const TEXT_TYPE = 'text/plain; charset=utf-8';
const ENDPOINT = /^(?:[0-9a-f]{40}|[0-9a-f]{32})$/;

/** The outcome label of pingd_rssping_total: accepted, or why it was refused. */
type Outcome = 'accepted' | Exclude<RefusalReason, 'rate_limited'> | RssPingRefusalReason;

interface Auth {
  level: AuthLevel;
  note: string;
}

/** A refusal decided by this adapter or by intake: its outcome label gives its status (REFUSAL_STATUS). */
class RssPingRefusal extends Error {
  readonly status: number;
  constructor(
    readonly outcome: Exclude<Outcome, 'accepted'>,
    message: string,
    readonly retryAfterSec?: number,
  ) {
    super(message);
    this.status = REFUSAL_STATUS[outcome];
  }

  /** Intake's refusal (screens, validation, throttle, storage), as this adapter answers it. */
  static of(r: Refused): RssPingRefusal {
    // A client over its rate limit is counted with the throttled ones here, as it always was.
    return new RssPingRefusal(r.reason === 'rate_limited' ? 'throttled' : r.reason, r.message, r.retryAfterSec);
  }
}

/** The one-time endpoint of publisher-side authentication (checked by the handler: a wrong one is a 401). */
const EndpointParams = Type.Object({ endpoint: Type.String() });
/** GET /rssping/token?site_uri=… */
const TokenQuery = Type.Object({ site_uri: queryParam(8192) });
type TokenQuery = Static<typeof TokenQuery>;

const clip = (s: string | null | undefined, max = 2048) => (s == null ? null : stripControls(s).slice(0, max));

export default async function rssPingRoutes(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;
  const key = config.RSSPING_SECRET ? deriveKey(config.RSSPING_SECRET) : null;

  const requests = new Counter({
    name: 'pingd_rssping_total',
    help: 'rss_pings received, by outcome and by the authentication level of accepted ones.',
    labelNames: ['outcome', 'auth'] as const,
    registers: [app.metrics],
  });
  const hashChecks = new Counter({
    name: 'pingd_rssping_hash_checks_total',
    help: 'Pingserver-side authentication attempts (payload_hash_uri fetches), by result.',
    labelNames: ['result'] as const,
    registers: [app.metrics],
  });

  // Senders use text/xml, application/xml, form types or nothing at all: take every body as bytes and
  // decode it ourselves (the payload must be hashed as sent).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: config.RSSPING_BODY_LIMIT }, (_req, body, done) => done(null, body));

  const sendXml = (reply: FastifyReply, status: number, flerror: boolean, message: string, auth?: AuthLevel) =>
    reply
      .code(status)
      .header('content-type', XML_TYPE)
      .header('cache-control', 'no-store')
      .send(rssPingResponseXml(flerror, message, auth));

  app.setErrorHandler((err: Error & { statusCode?: number }, req, reply) => {
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) req.log.error({ err }, 'rss ping handler failed');
    if (req.method === 'GET')
      return reply
        .code(status)
        .header('content-type', TEXT_TYPE)
        .send(status === 500 ? 'Internal error; please try again later.' : err.message);
    requests.inc({ outcome: status === 413 ? 'too_large' : status === 500 ? 'unavailable' : 'invalid', auth: 'none' });
    const msg =
      status === 413
        ? `The rss_ping is larger than ${config.RSSPING_BODY_LIMIT} bytes.`
        : status === 500
          ? 'Internal error; please try again later.'
          : err.message;
    return sendXml(reply, status, true, msg);
  });

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

  /**
   * The throttle, read from the <site_uri> the pre-scan found, before the document is parsed: a throttled
   * weblog is refused whatever the rest of its rss_ping holds, so its parse is never paid for. Only where
   * a throttled weblog's answer is "throttled" whatever else the ping says: not on a publisher endpoint
   * (a malformed ping does not use it up, a used one is a 401, then comes the throttle) nor when
   * authentication is required (an unauthenticated ping is a 401). Returns the URL found not throttled
   * (null when nothing was checked: the full path decides).
   */
  async function throttleBeforeParse(siteUri: string | null, endpoint: string | undefined): Promise<string | null> {
    if (siteUri === null || endpoint !== undefined || config.RSSPING_REQUIRE_AUTH || config.PING_MIN_INTERVAL <= 0) return null;
    let url: string;
    try {
      url = normalizeUrl(siteUri, 'url');
    } catch {
      return null; // validation says why, after the parse
    }
    // throttled() reads the weblog's URL and the method alone; the ping is admitted after the parse.
    const read = app.pings.throttled({
      method: 'rssPing',
      name: '',
      url,
      changesUrl: null,
      rssUrl: null,
      tags: null,
      clientAddr: null,
      userAgent: null,
    });
    // Only an economy: a database busy elsewhere (the embedded one's single session held by a render) is not
    // waited for here, or a ping would wait for it before the commit's own DB_TIMEOUT_MS even began.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(resolve, EARLY_THROTTLE_READ_MS, 'late')));
    const throttled = await Promise.race([read, late]).finally(() => clearTimeout(timer));
    if (throttled === 'late') return null;
    if (throttled) throw RssPingRefusal.of(throttled);
    return url;
  }

  /** Pingserver-side: fetch payload_hash_uri (unless the weblog is throttled anyway) and compare. */
  async function pingserverAuth(doc: RssPingDocument, ping: ValidPing, checkedUrl: string | null): Promise<Auth> {
    const phu = doc.payloadHashUri!;
    if (!config.RSSPING_VERIFY_HASH_URI) {
      hashChecks.inc({ result: 'disabled' });
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
    hashChecks.inc({ result: check.outcome });
    if (check.outcome === 'mismatch') throw new RssPingRefusal('forbidden', check.note);
    if (check.outcome === 'match') return { level: 'pingserver_side', note: `pingserver_side (${check.note})` };
    return { level: 'none', note: check.note };
  }

  const post = async (req: FastifyRequest<{ Params: { endpoint?: string } }>, reply: FastifyReply) => {
    try {
      let doc: RssPingDocument;
      let item: PayloadItem;
      let ping: ValidPing;
      let feedUrls: string[];
      let checkedUrl: string | null;
      try {
        // Cheap checks and the pre-scan's limits first, then the throttle, and only then the parse.
        const scanned = scanRssPing(req.body as Buffer | undefined, req.headers['content-type']);
        checkedUrl = await throttleBeforeParse(scanned.siteUri, req.params.endpoint);
        doc = readRssPing(scanned);
        const raw: RawPing = {
          method: 'rssPing',
          name: doc.siteName,
          url: doc.siteUri,
          rssUrl: doc.feeds[0].uri,
          clientAddr: req.ip,
          userAgent: req.headers['user-agent'] ?? null,
        };
        // The intake path's screens and validation, as for every protocol (the further feed_uris screened too).
        const admitted = app.pings.admit(
          raw,
          doc.feeds.slice(1).map((f) => f.uri),
        );
        if (!admitted.ok) throw RssPingRefusal.of(admitted.result);
        ping = admitted.ping;
        feedUrls = doc.feeds.map((f) => normalizeUrl(f.uri, 'feed_uri'));
        item = extractPayload(doc.payload.text, ping.url, doc.payload.type);
      } catch (err) {
        if (err instanceof RssPingError || err instanceof PingValidationError) throw new RssPingRefusal('invalid', err.message);
        throw err;
      }

      const endpoint = req.params.endpoint;
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

      const record: PayloadRecord = {
        siteName: ping.name,
        feeds: doc.feeds.map((f, i) => ({ uri: feedUrls[i], type: clip(canonicalFeedType(f.type) ?? f.type, 100) })),
        auth: auth.level,
        authNote: clip(auth.note, 500),
        payloadType: clip(doc.payload.type, 200),
        payloadEncoding: clip(doc.payload.encoding, 100),
        payloadAttributes: Object.fromEntries(Object.entries(doc.payload.attributes).map(([k, v]) => [clip(k, 200)!, clip(v)!])),
        payloadFormat: item.format,
        payload: doc.payload.text,
        payloadSha1: createHash('sha1').update(doc.payload.bytes).digest('hex'),
        payloadHash: clip(doc.payloadHash?.value, 200),
        payloadHashAlgorithm: doc.payloadHash?.algorithm ?? null,
        payloadHashUri: clip(doc.payloadHashUri?.uri),
        publisherMboxHash: clip(doc.publisherMboxHash?.value, 200),
        publisherMboxHashAlgorithm: doc.publisherMboxHash?.algorithm ?? null,
        headline: item.headline,
        itemLink: item.link,
        itemGuid: clip(item.guid),
        itemUri: clip(item.uri)!,
        summary: item.summary,
        tokenized: item.tokenized,
      };

      // Committed through intake like every ping (same throttle and batcher), the payload in its transaction.
      const result = await app.pings.store(ping, (tx, accepted) => insertPayload(tx, accepted.id, accepted.receivedAt, ping.url, record));
      if (!result.ok) throw RssPingRefusal.of(result);
      requests.inc({ outcome: 'accepted', auth: auth.level });
      const how = auth.level === 'none' ? `Not authenticated: ${auth.note}.` : `Authenticated: ${auth.note}.`;
      return sendXml(reply, 200, false, `${THANKS} ${how}`, auth.level);
    } catch (err) {
      if (!(err instanceof RssPingRefusal)) throw err;
      requests.inc({ outcome: err.outcome, auth: 'none' });
      if (err.retryAfterSec) reply.header('retry-after', String(err.retryAfterSec));
      return sendXml(reply, err.status, true, err.message);
    }
  };

  const timed = intakeRoute(app);
  app.post('/rssping', { bodyLimit: config.RSSPING_BODY_LIMIT, ...timed }, post);
  app.post('/rssping/:endpoint', { bodyLimit: config.RSSPING_BODY_LIMIT, ...timed, schema: { params: EndpointParams } }, post);

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
