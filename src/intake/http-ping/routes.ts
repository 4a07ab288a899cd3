// Owns the HTTP GET ping (RSS Feed State, "HTTP Ping"): GET /pingSiteForm?name=&url= (weblogs.com's form) and
// its alias GET /ping. A person reads the answer: an HTML page, 200 on success, a 4xx/503 with the reason.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { firstParam as param, queryParam } from '../../platform/http-schema.js';
import { escapeHtml } from '../../platform/xml/escape.js';
import type { PingResult } from '../ping/ping-service.js';
import { REFUSAL_STATUS } from '../ping/refusals.js';
import type { RawPing } from '../ping/validate.js';

/**
 * GET /pingSiteForm's query: weblogs.com's form fields and the spellings other clients use (the first
 * spelling present wins). Unknown parameters are ignored.
 */
/** Longer than any valid field (a 1024-character name, a 2048-character URL, 50 tags of 100): refused by the schema. */
const FIELD_MAX = 8192;
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

export function page(title: string, body: string): string {
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · pingd</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}label{display:block;margin:.6rem 0}input{width:100%;padding:.3rem}.ok{color:#075}.err{color:#a00}</style>
</head><body>
<h1>${escapeHtml(title)}</h1>
${body}
</body></html>
`;
}

export function formHtml(values: { name?: string | null; url?: string | null; changesUrl?: string | null; rssUrl?: string | null } = {}): string {
  const v = (s: string | null | undefined) => escapeHtml(s ?? '');
  return `<form method="get" action="/pingSiteForm">
<label>Weblog name <input name="name" value="${v(values.name)}" required maxlength="1024"></label>
<label>Weblog URL <input name="url" type="url" value="${v(values.url)}" required maxlength="2048" placeholder="https://example.com/"></label>
<label>Changes URL (optional) <input name="changesURL" type="url" value="${v(values.changesUrl)}" maxlength="2048"></label>
<label>RSS URL (optional) <input name="rssUrl" type="url" value="${v(values.rssUrl)}" maxlength="2048"></label>
<button type="submit">Ping</button>
</form>`;
}

function resultHtml(r: PingResult, name: string | null, url: string | null): string {
  if (r.ok) {
    return page('Ping received', `<p class="ok">${escapeHtml(r.message)} We have recorded that <a href="${escapeHtml(r.ping.url)}">${escapeHtml(r.ping.name)}</a> (${escapeHtml(r.ping.url)}) changed.</p>\n<p><a href="/pingSiteForm">Ping another weblog</a></p>`);
  }
  return page('Ping refused', `<p class="err">${escapeHtml(r.message)}</p>\n${formHtml({ name, url })}`);
}

export default async function httpPingRoutes(app: FastifyInstance): Promise<void> {
  const handler = async (req: FastifyRequest<{ Querystring: PingQuery }>, reply: FastifyReply) => {
    const q = req.query ?? {};
    const name = param(q, 'name', 'blogname', 'title');
    const url = param(q, 'url', 'blogurl', 'u');
    reply.header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-store');
    if (name === null && url === null) {
      return reply.code(200).send(page('Ping this server', `<p>Tell us your weblog has changed: it will appear in <a href="/changes.xml">changes.xml</a> for crawlers to pick up.</p>\n${formHtml()}`));
    }
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
    const result = await app.pings.accept(raw);
    const status = result.ok ? 200 : REFUSAL_STATUS[result.reason];
    if (!result.ok && result.retryAfterSec) reply.header('retry-after', String(result.retryAfterSec));
    return reply.code(status).send(resultHtml(result, name, url));
  };
  app.get('/pingSiteForm', { schema: { querystring: PingQuery } }, handler);
  app.get('/ping', { schema: { querystring: PingQuery } }, handler);
  app.get('/', { schema: { querystring: Type.Object({}) } }, async (_req, reply) =>
    reply
      .header('content-type', 'text/html; charset=utf-8')
      .send(
        page(
          'pingd',
          `<p>A weblogUpdates ping server. Blog engines: XML-RPC <code>weblogUpdates.ping</code> / <code>extendedPing</code> at <code>POST /RPC2</code>, or <code>GET /pingSiteForm?name=…&amp;url=…</code>.</p>\n<p>Crawlers: <a href="/changes.xml">changes.xml</a> (last hour), <a href="/shortChanges.xml">shortChanges.xml</a> (last 5 minutes), hourly archives at <code>/YYYY/MM/DD/HH.xml</code>.</p>\n${formHtml()}`,
        ),
      ),
  );
}
