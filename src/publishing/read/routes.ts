// Owns the HTTP routes of published documents: one per live document of the registry, and the hourly
// archives (/YYYY/MM/DD/HH.xml). Each answers through serveDocument with its document's policy; a document
// that cannot be read (the database is down and this instance has not kept its bytes) is a 503 with
// Retry-After, not a 500 with the internal error.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { requestBase, websubLinks } from '../../platform/public-url.js';
import { REQUEST_ID_HEADER } from '../../platform/request-id.js';
import { archivePath, parseArchivePath } from '../documents/archive.js';
import type { DocumentRegistry } from '../documents/registry.js';
import type { Reader } from './reader.js';
import type { EarlyAnswers } from '../../platform/http-server.js';
import {
  IMMUTABLE,
  notModifiedHeadFor,
  refuseSince,
  serveDocument,
  serveNotModified,
  sinceWithinLimits,
  type ResponseRecorder,
  type ServePolicy,
} from './serve.js';

export interface DocumentRoutesOptions {
  documents: DocumentRegistry;
  reader: Reader;
  /** Seconds between renders: the max-age of live documents and the Retry-After of a 503. */
  cadenceSec: number;
  record: ResponseRecorder;
  /** PUBLIC_URL and PORT: the base of the documents' Link headers. */
  publicUrl: string | undefined;
  port: number;
  /**
   * Where the live documents' 304s are also answered before Fastify (a poll of the exact path naming a
   * current ETag: the same head, id and metrics as the route's); unset, Fastify answers every request.
   */
  early?: EarlyAnswers;
}

/** Distinct Host values whose Link header is remembered per document. */
const LINKS_MAX = 64;

const ArchiveParams = Type.Object({ year: Type.String(), month: Type.String(), day: Type.String(), hour: Type.String() });
type ArchiveParams = Static<typeof ArchiveParams>;

export async function documentRoutes(app: FastifyInstance, opts: DocumentRoutesOptions): Promise<void> {
  const { reader, cadenceSec, record } = opts;
  const live = `public, max-age=${cadenceSec}`;

  const unavailable = (req: FastifyRequest, reply: FastifyReply, err: Error): FastifyReply => {
    req.log.warn({ err: { message: err.message }, url: req.url }, 'published document unavailable');
    if (reply.sent) return reply;
    for (const h of ['etag', 'last-modified', 'content-length', 'content-encoding', 'content-type', 'vary', 'im']) reply.removeHeader(h);
    return reply
      .code(503)
      .header('content-type', 'text/plain; charset=utf-8')
      .header('cache-control', 'no-store')
      .header('retry-after', String(cadenceSec))
      .send(`The document cannot be read right now (database unavailable); try again in ${cadenceSec} seconds.\n`);
  };

  // The documents are the polled routes (`config.polled`): no app-wide hook runs on them (see
  // operations/metrics/plugin.ts everyRoute), so each answer sets its X-Request-Id and records its latency
  // here, from the handler's start (nothing runs on these routes before it) to the reply's send (a stream
  // body: its start); not reply.elapsedTime, which Fastify only starts when a route has an onResponse hook
  // or the app a logger. The handlers return undefined, not the reply: a reply is a thenable that Fastify
  // would wait on for the response's 'finish'.
  const answered = (route: string, req: FastifyRequest, reply: FastifyReply, started: number): void => {
    app.httpLatency(route, req.method, reply.statusCode, performance.now() - started);
  };

  for (const doc of opts.documents.list()) {
    // WebSub §4 (discovery): the hub to subscribe at and the topic's own URL, absolute; one string per
    // PUBLIC_URL or Host value, not rebuilt per request.
    const linkCache = new Map<string, string>();
    const linkFor = (base: string): string => {
      let l = linkCache.get(base);
      if (l === undefined) {
        l = websubLinks(base, `${base}${doc.path}`);
        if (linkCache.size < LINKS_MAX) linkCache.set(base, l);
      }
      return l;
    };
    const policy: ServePolicy = {
      document: doc.name,
      deltas: doc.deltas,
      cacheControl: () => live,
      missing: {
        status: 503,
        message: `${doc.path} has not been rendered yet; try again in ${cadenceSec} seconds.`,
        retryAfterSec: cadenceSec,
      },
      links: (req) => linkFor(requestBase(opts.publicUrl, opts.port, req)),
    };
    opts.early?.add(doc.path, {
      decide(req) {
        const host = req.headers.host;
        if (host === undefined) return null;
        const head = notModifiedHeadFor(reader, doc.path, policy, req.headers, { protocol: 'http', host }, record);
        return head === null ? null : { status: 304, head };
      },
      answered: (req, status, ms) => app.httpLatency(doc.path, req.method as string, status, ms),
    });
    // No querystring schema: Fastify would validate one on every poll (~1 µs); serve.ts checks `?since=`
    // only when it is there.
    app.route({
      method: ['GET', 'HEAD'],
      url: doc.path,
      exposeHeadRoute: false,
      config: { polled: true },
      handler: (req, reply) => {
        const started = performance.now();
        reply.header(REQUEST_ID_HEADER, req.id);
        const since = (req.query as Record<string, string | string[] | undefined>).since;
        if (since !== undefined && !sinceWithinLimits(since)) {
          refuseSince(reply, policy, record);
          answered(doc.path, req, reply, started);
          return;
        }
        const fast = serveNotModified(reader, doc.path, policy, req, reply, record);
        if (fast !== null) {
          answered(doc.path, req, reply, started);
          return;
        }
        return serveDocument(reader, doc.path, policy, req, reply, record)
          .catch((err: Error) => unavailable(req, reply, err))
          .then(() => answered(doc.path, req, reply, started));
      },
    });
  }

  const archivePolicy: ServePolicy = {
    document: 'archive',
    deltas: false,
    cacheControl: (meta) => (meta.closed ? IMMUTABLE : live),
    missing: { status: 404, message: 'There is no archive for this hour (yet).' },
  };
  const archiveRoute = '/:year(^\\d{4})/:month(^\\d{2})/:day(^\\d{2})/:hour(^\\d{2}).xml';
  app.route<{ Params: ArchiveParams }>({
    method: ['GET', 'HEAD'],
    url: archiveRoute,
    exposeHeadRoute: false,
    schema: { params: ArchiveParams },
    config: { polled: true },
    handler: (req, reply) => {
      const started = performance.now();
      reply.header(REQUEST_ID_HEADER, req.id);
      const { year, month, day, hour } = req.params;
      const ms = parseArchivePath(year, month, day, hour);
      if (ms === null) {
        record('archive', 404, 0);
        reply.code(404).header('content-type', 'text/plain; charset=utf-8').send('Not a UTC hour.\n');
        answered(archiveRoute, req, reply, started);
        return;
      }
      return serveDocument(reader, archivePath(ms), archivePolicy, req, reply, record)
        .catch((err: Error) => unavailable(req, reply, err))
        .then(() => answered(archiveRoute, req, reply, started));
    },
  });
}
