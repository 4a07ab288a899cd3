// Owns the RSS Ping endpoints (RSS Ping): POST /rssping (and POST /rssping/<one-time endpoint> for
// publisher-side authentication) take an rss_ping document, and GET /rssping/token (token-route.ts) hands a
// registered publisher its single-use token. An accepted rss_ping is also an ordinary ping: same
// validation, same throttle, committed with its payload in one transaction before the 200 is sent. The
// steps are other modules' (early-throttle.ts, auth.ts, payload-record.ts); this one runs them in order
// and answers.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { Counter } from 'prom-client';
import type { Config } from '../../platform/config.js';
import { normalizeUrl, PingValidationError, type RawPing, type ValidPing } from '../ping/validate.js';
import { THANKS } from '../ping/ping-service.js';
import { intakeRoute } from '../ping/plugin.js';
import { readRssPing, RssPingError, scanRssPing, type RssPingDocument } from './parse.js';
import { extractPayload, type PayloadItem } from './payload.js';
import { insertPayload, type AuthLevel } from './payload-repository.js';
import { rssPingResponseXml } from './response.js';
import { RssPingRefusal } from './refusal.js';
import { throttleBeforeParse } from './early-throttle.js';
import { rssPingAuthenticator } from './auth.js';
import { payloadRecord } from './payload-record.js';
import { tokenRoute } from './token-route.js';
import { errorHandler } from '../../platform/error-handler.js';

const XML_TYPE = 'text/xml; charset=utf-8';
const TEXT_TYPE = 'text/plain; charset=utf-8';

/** The one-time endpoint of publisher-side authentication (checked by the handler: a wrong one is a 401). */
const EndpointParams = Type.Object({ endpoint: Type.String() });

export default async function rssPingRoutes(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;

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
  const authenticate = rssPingAuthenticator(app, config, (result) => hashChecks.inc({ result }));

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

  app.setErrorHandler(
    errorHandler((a, req, reply) => {
      // Any failure of ours is a 500 here (a 503 too), with no more said.
      const status = a.statusCode >= 500 ? 500 : a.statusCode;
      const internal = 'Internal error; please try again later.';
      if (req.method === 'GET')
        return reply
          .code(status)
          .header('content-type', TEXT_TYPE)
          .send(status === 500 ? internal : a.message);
      requests.inc({ outcome: status === 413 ? 'too_large' : status === 500 ? 'unavailable' : 'invalid', auth: 'none' });
      const msg =
        status === 413 ? `The rss_ping is larger than ${config.RSSPING_BODY_LIMIT} bytes.` : status === 500 ? internal : a.message;
      return sendXml(reply, status, true, msg);
    }),
  );

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
        checkedUrl = await throttleBeforeParse(app.pings, config, scanned.siteUri, req.params.endpoint);
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

      const auth = await authenticate(req.params.endpoint, doc, ping, checkedUrl);
      const record = payloadRecord(doc, ping, feedUrls, item, auth);

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

  tokenRoute(app, config);
}
