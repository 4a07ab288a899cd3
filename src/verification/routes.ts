// Owns GET /api/weblogs?url=: a weblog as pingd knows it (name, feed, pings) with its feed's HTTP state and
// the latest verification — how a blogger answers "did my ping arrive, and what did you see?".
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { firstParam, queryParam } from '../platform/http-schema.js';
import { MAX_URL_LENGTH, normalizeUrl, PingValidationError } from '../intake/ping/validate.js';
import { weblogView, type WeblogView } from './feed-repository.js';

const Query = Type.Object({ url: queryParam(MAX_URL_LENGTH + 64) });
type Query = Static<typeof Query>;

const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);
const Str = () => Nullable(Type.String());
const Int = () => Type.Union([Type.Integer(), Type.Null()]);

const Item = Type.Object({ title: Str(), link: Str(), guid: Str() });
const Weblog = Type.Object({
  url: Type.String(),
  name: Type.String(),
  rssUrl: Str(),
  lastPingAt: Type.String(),
  pingCount: Type.Integer(),
  feed: Type.Union([
    Type.Object({
      url: Type.String(),
      fetchUrl: Type.String(),
      status: Int(),
      outcome: Str(),
      etag: Str(),
      lastModified: Str(),
      lastFetchAt: Str(),
      nextFetchAfter: Str(),
      failures: Type.Integer(),
      gone: Type.Boolean(),
      hints: Type.Record(Type.String(), Type.Unknown()),
    }),
    Type.Null(),
  ]),
  verification: Type.Union([
    Type.Object({ outcome: Type.String(), at: Type.String(), httpStatus: Int(), feedUrl: Str(), newItems: Type.Array(Item) }),
    Type.Null(),
  ]),
});
const ApiError = Type.Object({ error: Type.String(), message: Type.String() });

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function weblogJson(w: WeblogView): Static<typeof Weblog> {
  const f = w.feed;
  return {
    url: w.url,
    name: w.name,
    rssUrl: w.rssUrl,
    lastPingAt: w.lastPingAt.toISOString(),
    pingCount: w.pingCount,
    feed: f
      ? {
          url: f.url,
          fetchUrl: f.fetchUrl,
          status: f.lastStatus,
          outcome: f.lastOutcome,
          etag: f.etag,
          lastModified: f.lastModified,
          lastFetchAt: iso(f.lastFetchAt),
          nextFetchAfter: iso(f.nextFetchAfter),
          failures: f.failures,
          gone: f.gone,
          hints: f.hints as Record<string, unknown>,
        }
      : null,
    verification: w.verification,
  };
}

export async function weblogRoutes(app: FastifyInstance): Promise<void> {
  app.get<{ Querystring: Query }>(
    '/api/weblogs',
    { schema: { querystring: Query, response: { 200: Weblog, 400: ApiError, 404: ApiError } } },
    async (req, reply) => {
      const raw = firstParam(req.query, 'url');
      if (!raw) return reply.code(400).send({ error: 'URL_REQUIRED', message: 'Give the weblog as ?url=<its address>.' });
      let url: string;
      try {
        url = normalizeUrl(raw);
      } catch (err) {
        if (err instanceof PingValidationError) return reply.code(400).send({ error: 'URL_INVALID', message: err.message });
        throw err;
      }
      const w = await weblogView(app.db, url);
      if (!w)
        return reply.code(404).send({ error: 'WEBLOG_UNKNOWN', message: `No ping from ${url} has been accepted (or it was pruned).` });
      return reply.header('cache-control', 'no-store').send(weblogJson(w));
    },
  );
}
