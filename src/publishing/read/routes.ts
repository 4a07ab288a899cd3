// Owns the HTTP routes of published documents: one per live document of the registry, and the hourly
// archives (/YYYY/MM/DD/HH.xml). Each answers through serveDocument with its document's policy; a document
// that cannot be read (the database is down and this instance has not kept its bytes) is a 503 with
// Retry-After, not a 500 with the internal error.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { queryParam } from '../../platform/http-schema.js';
import { requestBase, websubLinks } from '../../platform/public-url.js';
import { archivePath, parseArchivePath } from '../documents/archive.js';
import type { DocumentRegistry } from '../documents/registry.js';
import type { Reader } from './reader.js';
import { IMMUTABLE, serveDocument, type ResponseSink, type ServePolicy } from './serve.js';

export interface DocumentRoutesOptions {
  documents: DocumentRegistry;
  reader: Reader;
  /** Seconds between renders: the max-age of live documents and the Retry-After of a 503. */
  cadenceSec: number;
  record: ResponseSink;
  /** PUBLIC_URL and PORT: the base of the documents' Link headers. */
  publicUrl: string | undefined;
  port: number;
}

/** A cursor is `<id>.<µs>` in base 36, at most 23 characters; anything much longer is not one. */
const SINCE_MAX = 64;
/** `?since=<cursor>` (RFC 3229 without the headers); serve.ts refuses a malformed short one with its own 400. */
const SinceQuery = Type.Object({ since: queryParam(SINCE_MAX) });
type SinceQuery = Static<typeof SinceQuery>;

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

  for (const doc of opts.documents.list()) {
    const policy: ServePolicy = {
      document: doc.name,
      deltas: doc.deltas,
      cacheControl: () => live,
      missing: { status: 503, message: `${doc.path} has not been rendered yet; try again in ${cadenceSec} seconds.`, retryAfterSec: cadenceSec },
      // WebSub §4 (discovery): the hub to subscribe at and the topic's own URL, absolute.
      links: (req) => {
        const base = requestBase(opts.publicUrl, opts.port, req);
        return websubLinks(base, `${base}${doc.path}`);
      },
    };
    app.route<{ Querystring: SinceQuery }>({
      method: ['GET', 'HEAD'],
      url: doc.path,
      exposeHeadRoute: false,
      schema: { querystring: SinceQuery },
      handler: (req, reply) => serveDocument(reader, doc.path, policy, req, reply, record).catch((err: Error) => unavailable(req, reply, err)),
    });
  }

  const archivePolicy: ServePolicy = {
    document: 'archive',
    deltas: false,
    cacheControl: (meta) => (meta.closed ? IMMUTABLE : live),
    missing: { status: 404, message: 'There is no archive for this hour (yet).' },
  };
  app.route<{ Params: ArchiveParams }>({
    method: ['GET', 'HEAD'],
    url: '/:year(^\\d{4})/:month(^\\d{2})/:day(^\\d{2})/:hour(^\\d{2}).xml',
    exposeHeadRoute: false,
    schema: { params: ArchiveParams },
    handler: (req, reply) => {
      const { year, month, day, hour } = req.params;
      const ms = parseArchivePath(year, month, day, hour);
      if (ms === null) {
        record('archive', 404, 0);
        return reply.code(404).header('content-type', 'text/plain; charset=utf-8').send('Not a UTC hour.\n');
      }
      return serveDocument(reader, archivePath(ms), archivePolicy, req, reply, record).catch((err: Error) => unavailable(req, reply, err));
    },
  });
}
