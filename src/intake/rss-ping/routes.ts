// Owns the RSS Ping endpoints (seed 003): POST /rssping (and POST /rssping/<one-time endpoint> for
// publisher-side authentication) take an rss_ping document, and GET /rssping/token hands a registered
// publisher its single-use token. An accepted rss_ping is also an ordinary ping: same validation, same
// throttle, committed with its payload in one transaction before the 200 is sent.
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Counter } from 'prom-client';
import type { Config } from '../../platform/config.js';
import { normalizeUrl, PingValidationError, stripControls, type RawPing, type ValidPing } from '../ping/validate.js';
import { THANKS, type PingResult } from '../ping/ping-service.js';
import { canonicalFeedType, parseRssPing, RssPingError, type RssPingDocument } from './parse.js';
import { extractPayload, type PayloadItem } from './payload.js';
import { checkPayloadHash } from './hash-auth.js';
import { storeRssPing, throttleState, type AuthLevel, type PayloadRecord } from './payload-repository.js';
import { findPublisher } from './publisher-repository.js';
import { consumeEndpoint, issueToken } from './token-store.js';
import { deriveKey, endpointDigests, newToken, openPassword, SecretBoxError } from './secret-box.js';
import { rssPingResponseXml } from './response.js';
import { updatesDocument } from '../../publishing/documents/updates.js';

const XML_TYPE = 'text/xml; charset=utf-8';
const TEXT_TYPE = 'text/plain; charset=utf-8';
const ENDPOINT = /^(?:[0-9a-f]{40}|[0-9a-f]{32})$/;

type Outcome = 'accepted' | 'invalid' | 'unauthorized' | 'forbidden' | 'throttled' | 'unavailable' | 'too_large' | 'blocked';

interface Auth {
  level: AuthLevel;
  note: string;
}

/** A refusal decided before storage: HTTP status, message, outcome label. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly outcome: Outcome,
    readonly retryAfterSec?: number,
  ) {
    super(message);
  }
}

const STATUS_OF: Record<string, [number, Outcome]> = {
  invalid: [400, 'invalid'],
  throttled: [429, 'throttled'],
  rate_limited: [429, 'throttled'],
  unavailable: [503, 'unavailable'],
  blocked: [403, 'blocked'],
};

/** The intake's throttle message (ping-service.ts words it the same way for the other protocols). */
export function throttledResult(url: string, lastPingAt: Date | null, minIntervalSec: number): Extract<PingResult, { ok: false }> {
  const next = (lastPingAt ? lastPingAt.getTime() : Date.now()) + minIntervalSec * 1000;
  const retryAfterSec = Math.max(1, Math.ceil((next - Date.now()) / 1000));
  return {
    ok: false,
    reason: 'throttled',
    retryAfterSec,
    message: `${url} was pinged less than ${minIntervalSec} seconds ago; please ping again after ${new Date(next).toISOString().replace(/\.\d{3}Z$/, 'Z')} (in ${retryAfterSec} seconds).`,
  };
}

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
    reply.code(status).header('content-type', XML_TYPE).header('cache-control', 'no-store').send(rssPingResponseXml(flerror, message, auth));

  app.setErrorHandler((err: Error & { statusCode?: number }, req, reply) => {
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) req.log.error({ err }, 'rss ping handler failed');
    if (req.method === 'GET') return reply.code(status).header('content-type', TEXT_TYPE).send(status === 500 ? 'Internal error; please try again later.' : err.message);
    requests.inc({ outcome: status === 413 ? 'too_large' : status === 500 ? 'unavailable' : 'invalid', auth: 'none' });
    const msg = status === 413 ? `The rss_ping is larger than ${config.RSSPING_BODY_LIMIT} bytes.` : status === 500 ? 'Internal error; please try again later.' : err.message;
    return sendXml(reply, status, true, msg);
  });

  /** Publisher-side: uses the one-time endpoint (whatever happens next) and checks it was issued for this site. */
  async function publisherAuth(endpoint: string, ping: ValidPing): Promise<Auth> {
    const e = endpoint.toLowerCase();
    if (!ENDPOINT.test(e)) throw new Refusal(401, 'Unknown endpoint: POST to /rssping/<sha1 hex of site_uri + password + token>, with a token from GET /rssping/token.', 'unauthorized');
    let r;
    try {
      r = await consumeEndpoint(app.db, e);
    } catch (err) {
      app.log.error({ err: { message: (err as Error).message } }, 'rss ping token check failed');
      throw new Refusal(503, 'The endpoint could not be checked (database unavailable); please get a new token and ping again later.', 'unavailable');
    }
    if (r.status === 'unknown') throw new Refusal(401, 'Unknown or already used endpoint: get a new token from GET /rssping/token (each endpoint works once).', 'unauthorized');
    if (r.status === 'expired') throw new Refusal(401, 'Expired endpoint: tokens are valid for 5 minutes; get a new one from GET /rssping/token.', 'unauthorized');
    if (r.siteUrl !== ping.url) throw new Refusal(403, `This endpoint was issued for ${r.siteUrl}, not for ${ping.url}.`, 'forbidden');
    return { level: 'publisher_side', note: 'publisher_side' };
  }

  /** Pingserver-side: fetch payload_hash_uri (unless the weblog is throttled anyway) and compare. */
  async function pingserverAuth(doc: RssPingDocument, ping: ValidPing): Promise<Auth> {
    const phu = doc.payloadHashUri!;
    if (!config.RSSPING_VERIFY_HASH_URI) {
      hashChecks.inc({ result: 'disabled' });
      return { level: 'none', note: 'this server does not fetch payload_hash_uri' };
    }
    // A throttled ping is refused whatever its hash: don't let repeated pings make us fetch repeatedly.
    const t = await throttleState(app.db, ping.url, config.PING_MIN_INTERVAL).catch(() => ({ throttled: false, lastPingAt: null }));
    if (t.throttled) {
      const r = app.pings.emit('rssPing', throttledResult(ping.url, t.lastPingAt, config.PING_MIN_INTERVAL)) as Extract<PingResult, { ok: false }>;
      throw new Refusal(429, r.message, 'throttled', r.retryAfterSec);
    }
    const check = await checkPayloadHash(app.fetcher, { siteUrl: ping.url, hashUri: phu.uri, algorithm: phu.algorithm, payload: doc.payload.bytes });
    hashChecks.inc({ result: check.outcome });
    if (check.outcome === 'mismatch') throw new Refusal(403, check.note, 'forbidden');
    if (check.outcome === 'match') return { level: 'pingserver_side', note: `pingserver_side (${check.note})` };
    return { level: 'none', note: check.note };
  }

  const post = async (req: FastifyRequest<{ Params: { endpoint?: string } }>, reply: FastifyReply) => {
    try {
      let doc: RssPingDocument;
      let item: PayloadItem;
      let ping: ValidPing;
      try {
        doc = parseRssPing(req.body as Buffer | undefined, req.headers['content-type']);
        const raw: RawPing = {
          method: 'rssPing',
          name: doc.siteName,
          url: doc.siteUri,
          rssUrl: doc.feeds[0].uri,
          clientAddr: req.ip,
          userAgent: req.headers['user-agent'] ?? null,
        };
        // The abuse screen (blocklist, per-address rate), as for the other protocols.
        const abuse = app.hasDecorator('abuse') ? app.abuse : undefined;
        const refuse = (r: PingResult | undefined) => {
          if (r && !r.ok) {
            const [status, outcome] = STATUS_OF[r.reason] ?? [403, 'blocked'];
            throw new Refusal(status, r.message, outcome, r.retryAfterSec);
          }
        };
        refuse(abuse?.screenClient(raw));
        const v = app.pings.validate(raw);
        if (!v.ok) throw new Refusal(400, v.result.message, 'invalid');
        ping = v.ping;
        refuse(abuse?.screenPing(ping, doc.feeds.slice(1).map((f) => f.uri)));
        for (const f of doc.feeds) normalizeUrl(f.uri, 'feed_uri');
        item = extractPayload(doc.payload.text, ping.url, doc.payload.type);
      } catch (err) {
        if (err instanceof RssPingError || err instanceof PingValidationError) throw new Refusal(400, err.message, 'invalid');
        throw err;
      }

      const endpoint = req.params.endpoint;
      const auth: Auth =
        endpoint !== undefined
          ? await publisherAuth(endpoint, ping)
          : doc.payloadHashUri
            ? await pingserverAuth(doc, ping)
            : { level: 'none', note: 'no payload_hash_uri and no publisher endpoint' };
      if (auth.level === 'none' && config.RSSPING_REQUIRE_AUTH) {
        throw new Refusal(401, `This server accepts only authenticated rss_pings (pingserver-side or publisher-side); not authenticated: ${auth.note}.`, 'unauthorized');
      }

      const record: PayloadRecord = {
        siteName: ping.name,
        feeds: doc.feeds.map((f) => ({ uri: normalizeUrl(f.uri, 'feed_uri'), type: clip(canonicalFeedType(f.type) ?? f.type, 100) })),
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

      let outcome;
      try {
        outcome = await storeRssPing(app.db, ping, record, config.PING_MIN_INTERVAL);
      } catch (err) {
        // Nothing was committed (one transaction), so refusing is the truth: the sender may retry.
        req.log.error({ err: { message: (err as Error).message } }, 'rss ping could not be stored');
        const r = app.pings.emit('rssPing', { ok: false, reason: 'unavailable', message: 'The ping could not be stored (database unavailable); please ping again later.' });
        throw new Refusal(503, r.message, 'unavailable');
      }
      if (outcome.status === 'throttled') {
        const r = app.pings.emit('rssPing', throttledResult(ping.url, outcome.lastPingAt, config.PING_MIN_INTERVAL)) as Extract<PingResult, { ok: false }>;
        throw new Refusal(429, r.message, 'throttled', r.retryAfterSec);
      }
      app.pings.emit('rssPing', { ok: true, message: THANKS, id: outcome.id, receivedAt: outcome.receivedAt, ping });
      requests.inc({ outcome: 'accepted', auth: auth.level });
      const how = auth.level === 'none' ? `Not authenticated: ${auth.note}.` : `Authenticated: ${auth.note}.`;
      return sendXml(reply, 200, false, `${THANKS} ${how}`, auth.level);
    } catch (err) {
      if (!(err instanceof Refusal)) throw err;
      requests.inc({ outcome: err.outcome, auth: 'none' });
      if (err.retryAfterSec) reply.header('retry-after', String(err.retryAfterSec));
      return sendXml(reply, err.status, true, err.message);
    }
  };

  // /updates.xml is a document of the publishing layer (rendered, cached and delta-encoded like changes.xml).
  if (app.hasDecorator('publisher')) app.publisher.register(updatesDocument());
  else app.log.warn('the publishing plugin is not loaded: /updates.xml is not served');

  app.post('/rssping', { bodyLimit: config.RSSPING_BODY_LIMIT }, post);
  app.post('/rssping/:endpoint', { bodyLimit: config.RSSPING_BODY_LIMIT }, post);

  // The token is the whole body (text/plain), so that `curl -s` gives it to a shell variable as is.
  app.get('/rssping/token', async (req: FastifyRequest<{ Querystring: Record<string, string | string[] | undefined> }>, reply) => {
    reply.header('content-type', TEXT_TYPE).header('cache-control', 'no-store');
    if (!key) return reply.code(503).send('Publisher-side authentication is not enabled on this server (RSSPING_SECRET is not set).\n');
    const q = req.query.site_uri;
    const siteUri = Array.isArray(q) ? q[0] : q;
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
      await issueToken(app.db, publisher.id, endpointDigests(siteUri, password, token));
      return reply.code(200).send(token);
    } catch (err) {
      req.log.error({ err: { message: (err as Error).message } }, 'rss ping token not issued');
      const why = err instanceof SecretBoxError ? 'the publisher password cannot be read with this server key' : 'database unavailable';
      return reply.code(503).send(`No token could be issued (${why}); please try again later.\n`);
    }
  });
}
