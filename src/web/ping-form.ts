// Owns the HTTP GET ping (RSS Feed State, "HTTP Ping"): GET /pingSiteForm?name=&url= (weblogs.com's form) and
// its alias GET /ping. A person reads the answer: an HTML page, 200 on success, a 4xx/503 with the reason.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { firstParam as param, queryParam } from '../platform/http-schema.js';
import { intakeRoute } from '../intake/ping/plugin.js';
import { REFUSAL_STATUS } from '../intake/ping/refusals.js';
import type { RawPing } from '../intake/ping/validate.js';
import { DESCRIPTION } from './pages.js';

/** Longer than any valid field (a 1024-character name, a 2048-character URL, 50 tags of 100): refused by the schema. */
const FIELD_MAX = 8192;
/**
 * GET /pingSiteForm's query: weblogs.com's form fields and the spellings other clients use (the first
 * spelling present wins). Unknown parameters are ignored.
 */
const PingQuery = Type.Object({
  name: queryParam(FIELD_MAX),
  blogname: queryParam(FIELD_MAX),
  title: queryParam(FIELD_MAX),
  url: queryParam(FIELD_MAX),
  blogurl: queryParam(FIELD_MAX),
  u: queryParam(FIELD_MAX),
  changesURL: queryParam(FIELD_MAX),
  changesUrl: queryParam(FIELD_MAX),
  changesurl: queryParam(FIELD_MAX),
  rssUrl: queryParam(FIELD_MAX),
  rssURL: queryParam(FIELD_MAX),
  rssurl: queryParam(FIELD_MAX),
  tags: queryParam(FIELD_MAX),
  category: queryParam(FIELD_MAX),
});
type PingQuery = Static<typeof PingQuery>;

export async function pingFormRoutes(app: FastifyInstance): Promise<void> {
  const handler = async (req: FastifyRequest<{ Querystring: PingQuery }>, reply: FastifyReply) => {
    const q = req.query ?? {};
    const name = param(q, 'name', 'blogname', 'title');
    const url = param(q, 'url', 'blogurl', 'u');
    reply.header('cache-control', 'no-store');
    if (name === null && url === null)
      return reply.code(200).view('ping-page', { title: 'Ping this server', description: DESCRIPTION.ping });
    const raw: RawPing = {
      method: 'pingSiteForm',
      name,
      url,
      changesUrl: param(q, 'changesURL', 'changesUrl', 'changesurl'),
      rssUrl: param(q, 'rssUrl', 'rssURL', 'rssurl'),
      tags: param(q, 'tags', 'category'),
      clientAddr: req.ip,
      userAgent: req.headers['user-agent'] ?? null,
    };
    const r = await app.pings.accept(raw);
    if (r.ok)
      return reply.code(200).view('ping-result', {
        title: 'Ping received',
        description: DESCRIPTION.ping,
        ok: true,
        message: r.message,
        name: r.ping.name,
        url: r.ping.url,
      });
    if (r.retryAfterSec) reply.header('retry-after', String(r.retryAfterSec));
    return reply
      .code(REFUSAL_STATUS[r.reason])
      .view('ping-result', { title: 'Ping refused', description: DESCRIPTION.ping, ok: false, message: r.message, form: { name, url } });
  };
  // A ping's answer is the intake path (scripts and old engines ping with a GET): it leaves uncompressed. Measured
  // in-process, 16 GET pings at a time on the embedded database: ~400 µs of CPU a ping, and brotli of its 1.6 kB
  // answer added ~80 µs (+20%), gzip ~20 µs, to save ~1 kB. The form page without a ping shares the route.
  const opts = { ...intakeRoute(app), config: { compress: false as const }, schema: { querystring: PingQuery } };
  app.get('/pingSiteForm', opts, handler);
  app.get('/ping', opts, handler);
}
