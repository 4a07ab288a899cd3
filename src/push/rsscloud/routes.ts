// Owns rssCloud's REST face, as rsscloud-server 4.0.0 answers it: POST /rsscloud/ping (url=) and POST
// /rsscloud/pleaseNotify (notifyProcedure, port, path, protocol, domain, url1…urlN), each a form, each
// answered `<result …/>` / `<notifyResult …/>` or the same as JSON when the client asks for it (406 when it
// takes neither). Every answer the protocol decides, a refusal too, is HTTP 200 with the verdict in
// `success` and the reason in `msg` (rsscloud-server's controllers never set another status, and its suite
// asserts the 200; FeedLand reads the body whatever the status); a Retry-After header says when to ask
// again where pingd knows. Only what is not the protocol's keeps its HTTP status: 406, a body too large
// (413) or not a form (415), and a failure of pingd's own (500).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { FORM_NOT_UTF8, formBodiesOnly } from '../../platform/http-form.js';
import { Type } from '@sinclair/typebox';
import { canonicalAddress } from '../../platform/net/ip.js';
import { intakeRoute } from '../../intake/ping/plugin.js';
import { negotiate, resultJson, resultXml, type Element } from './answers.js';
import { pingResource } from './ping.js';
import { parseNotify, restFields } from './params.js';
import type { NotifyRefusal } from './refusals.js';
import type { NotifyAnswer } from './subscribe.js';
import type { NotifyRequest } from './params.js';
import { errorHandler } from '../../platform/error-handler.js';
import { RSSCLOUD_NOTIFY_PATH } from '../../platform/public-url.js';

export interface RsscloudRouteOptions {
  maxUrls: number;
  subscribe(r: NotifyRequest, clientAddr: string | null): Promise<NotifyAnswer>;
  refused(reason: string): void;
}

/** A form of a few parameters: 64 KiB is far above any honest request (rsscloud-server takes 100 KB). */
const FORM_LIMIT = 64 * 1024;

/** Every field is text; the handlers check them (url1…urlN are the resources). */
const Form = Type.Object({}, { additionalProperties: true });

function answer(req: FastifyRequest, reply: FastifyReply, element: Element, success: boolean, msg: string, status = 200): FastifyReply {
  const as = negotiate(req.headers.accept);
  reply.code(as === null ? 406 : status).header('cache-control', 'no-store');
  if (as === 'json') return reply.type('application/json; charset=utf-8').send(resultJson(success, msg));
  if (as === null) return reply.type('text/plain; charset=utf-8').send('Not Acceptable');
  return reply.type('text/xml; charset=utf-8').send(resultXml(element, success, msg));
}

export async function rsscloudRoutes(app: FastifyInstance, opts: RsscloudRouteOptions): Promise<void> {
  await app.register(async (scope) => {
    await formBodiesOnly(scope, FORM_LIMIT);
    scope.setErrorHandler(
      errorHandler((a, req, reply) => {
        const element: Element = req.url.startsWith(RSSCLOUD_NOTIFY_PATH) ? 'notifyResult' : 'result';
        if (a.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
          return answer(req, reply, element, false, 'Send the parameters as application/x-www-form-urlencoded.', 415);
        if (a.statusCode >= 500) return answer(req, reply, element, false, 'Internal error; please try again later.', 500);
        if (a.statusCode === 413) return answer(req, reply, element, false, `The request body is larger than ${FORM_LIMIT} bytes.`, 413);
        // The form was read and its parameters are refused (not UTF-8): the protocol's refusal, a 200.
        if (a.code === FORM_NOT_UTF8) return answer(req, reply, element, false, a.message);
        return answer(req, reply, element, false, a.message, a.statusCode);
      }),
    );

    scope.post('/rsscloud/ping', { schema: { body: Type.Optional(Form) }, ...intakeRoute(app) }, async (req, reply) => {
      const form = (req.body ?? {}) as Record<string, unknown>;
      const url = form.url;
      if (Array.isArray(url)) return answer(req, reply, 'result', false, 'The parameter url must be given once.');
      const r = await pingResource(app.pings, app.db, typeof url === 'string' ? url : undefined, {
        addr: canonicalAddress(req.ip),
        userAgent: req.headers['user-agent'] ?? null,
      });
      if (r.ok) return answer(req, reply, 'result', true, r.msg);
      if (r.retryAfterSec) reply.header('retry-after', String(r.retryAfterSec));
      return answer(req, reply, 'result', false, r.msg);
    });

    scope.post(RSSCLOUD_NOTIFY_PATH, { schema: { body: Type.Optional(Form) } }, async (req, reply) => {
      const refuse = (reason: NotifyRefusal, msg: string, retryAfterSec?: number) => {
        opts.refused(reason);
        if (retryAfterSec) reply.header('retry-after', String(retryAfterSec));
        return answer(req, reply, 'notifyResult', false, msg);
      };
      const fields = restFields((req.body ?? {}) as Record<string, unknown>);
      if ('error' in fields) return refuse('invalid', fields.error);
      const client = canonicalAddress(req.ip);
      const parsed = parseNotify(fields, client, opts.maxUrls);
      if (!parsed.ok) return refuse('invalid', parsed.msg);
      const r = await opts.subscribe(parsed.request, client);
      if (!r.ok) return refuse(r.reason, r.msg, r.retryAfterSec);
      return answer(req, reply, 'notifyResult', true, r.msg);
    });
  });
}
