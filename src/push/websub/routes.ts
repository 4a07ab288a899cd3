// Owns the hub's HTTP face: POST /websub, where subscribers subscribe and unsubscribe (WebSub §5.1: a form,
// answered 202 once the verification of intent or the denial is queued, 400 with a one-line reason when
// malformed, 503 at the subscription cap), and GET /api/websub/subscriptions, the operator's view of the
// subscriptions and their delivery health (never their secrets), behind the operator API's authorization
// (also served as GET /api/admin/websub/subscriptions).
import type { FastifyInstance, FastifyReply } from 'fastify';
import formbody from '@fastify/formbody';
import { Type, type Static } from '@sinclair/typebox';
import type { Db } from '../../platform/db/database.js';
import { adminOnly } from '../../platform/admin-auth.js';
import { ApiError } from '../../platform/http-schema.js';
import { HUB_PATH, requestBase } from '../../platform/public-url.js';
import { grantedLease, MAX_URL_CHARS, parseSubscriptionRequest, topicPath, type LeaseBounds } from './request.js';
import { queueIntent, type Intent } from './task-repository.js';
import { listSubscriptions } from './subscription-repository.js';

/**
 * A callback as the operator API shows it: a callback's query often carries the subscriber's own token
 * (`?key=…`): the subscriber's secret, not the operator's, so the query is replaced by `?…`.
 */
export function withoutQuery(callback: string): string {
  const q = callback.indexOf('?');
  return q < 0 ? callback : `${callback.slice(0, q)}?…`;
}

export interface WebsubRouteOptions {
  db: Db;
  /** The topics' document paths. */
  paths: readonly string[];
  publicUrl: string | undefined;
  /** The listening port (the base of topics when PUBLIC_URL is unset and the Host is odd). */
  port: number;
  lease: LeaseBounds;
  maxSubscriptions: number;
  /** Told when an intent was queued here (the worker looks at once). */
  queued(): void;
  log: { info(obj: object, msg?: string): void };
  /** ADMIN_TOKEN: the subscriptions list is the operator's (platform/admin-auth.ts). */
  adminToken: string | undefined;
}

/** The form's size bound (16 KiB): the longest parameters the schema takes fit; a real request is a few hundred bytes. */
const FORM_LIMIT = 4 * MAX_URL_CHARS * 2;
/** When a refused subscriber may try again: leases end and subscriptions are swept within the hour. */
const FULL_RETRY_AFTER_SEC = 3600;

// Each hub.* parameter once, as text; the handler reads them (others are ignored, WebSub §5.1).
const Form = Type.Object(
  {
    'hub.callback': Type.Optional(Type.String({ maxLength: 2 * MAX_URL_CHARS })),
    'hub.mode': Type.Optional(Type.String({ maxLength: 64 })),
    'hub.topic': Type.Optional(Type.String({ maxLength: 2 * MAX_URL_CHARS })),
    'hub.lease_seconds': Type.Optional(Type.String({ maxLength: 64 })),
    'hub.secret': Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: true },
);

const Nullable = <T extends ReturnType<typeof Type.String | typeof Type.Integer>>(t: T) => Type.Union([t, Type.Null()]);
export const SubscriptionList = Type.Object({
  subscriptions: Type.Array(
    Type.Object({
      topic: Type.String(),
      callback: Type.String(),
      state: Type.Union([Type.Literal('active'), Type.Literal('failing')]),
      expires_at: Type.String(),
      failures: Type.Integer(),
      last_status: Nullable(Type.Integer()),
      last_error: Nullable(Type.String()),
      last_success_at: Nullable(Type.String()),
    }),
  ),
});

function text(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/plain; charset=utf-8').send(`${body}\n`);
}

export async function websubRoutes(app: FastifyInstance, opts: WebsubRouteOptions): Promise<void> {
  // Form bodies here only: the pitfalls guide's note on WebSub, and no other route's parsers change.
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    await scope.register(formbody, { bodyLimit: FORM_LIMIT });
    scope.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
      const status = err.statusCode && err.statusCode >= 400 ? err.statusCode : 500;
      if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return text(reply, 415, 'send the parameters as application/x-www-form-urlencoded (WebSub §5.1)');
      if (status >= 500) app.log.error({ err }, 'websub request failed');
      return text(reply, status, status >= 500 ? 'the hub cannot take requests right now; try again later' : err.message);
    });

    scope.post(HUB_PATH, { schema: { body: Form }, attachValidation: true }, async (req, reply) => {
      let form = (req.body ?? {}) as Record<string, unknown>;
      if (req.validationError) {
        const field = req.validationError.validation?.[0]?.instancePath?.replace(/^\//, '').replace(/~1/g, '/');
        if (field) return text(reply, 400, `${field} must be given once, and be at most ${Form.properties[field as keyof typeof Form.properties]?.maxLength ?? 0} characters`);
        // No form at all (an empty POST): the parameters are missing.
        form = {};
      }
      const parsed = parseSubscriptionRequest(form);
      if (!parsed.ok) return text(reply, 400, parsed.reason);
      const r = parsed.request;
      if (r.secret && (new URL(r.callback).protocol === 'http:' || req.protocol === 'http')) {
        // WebSub §5.1: a secret SHOULD only be sent over HTTPS. Taken anyway: refusing would leave the
        // subscriber with no signature at all.
        opts.log.info({ callback: r.callback, requestProtocol: req.protocol }, 'websub: hub.secret over plain http');
      }

      // The same base the documents' discovery Link headers name (rel="self"), so the topic they advertise is ours.
      const base = requestBase(opts.publicUrl, opts.port, req);
      const ours = topicPath(r.topic, base, opts.paths);
      const intent: Intent = ours.ok
        ? {
            kind: 'verify',
            topic: r.topic,
            path: ours.path,
            callback: r.callback,
            mode: r.mode,
            leaseSeconds: r.mode === 'subscribe' ? grantedLease(r.leaseSeconds, opts.lease) : null,
            secret: r.mode === 'subscribe' ? (r.secret ?? null) : null,
            reason: null,
          }
        : { kind: 'deny', topic: r.topic, path: null, callback: r.callback, mode: r.mode, leaseSeconds: null, secret: null, reason: ours.reason };
      // Committed before the answer: a 202 is a promise the queue keeps across a crash.
      if (!(await queueIntent(opts.db, intent, opts.maxSubscriptions))) {
        reply.header('retry-after', String(FULL_RETRY_AFTER_SEC));
        return text(reply, 503, `this hub keeps at most ${opts.maxSubscriptions} subscriptions and has no room for another; try again later`);
      }
      opts.queued();
      return reply.code(202).send();
    });
  });

  app.get(
    '/api/websub/subscriptions',
    { onRequest: adminOnly(opts.adminToken), schema: { response: { 200: SubscriptionList, 401: ApiError } } },
    async (_req, reply) => reply.header('cache-control', 'no-store').send(await subscriptionsAnswer(opts.db)),
  );
}

/** The operator's list of unexpired subscriptions (SubscriptionList): never a secret, nor a callback's query. */
export async function subscriptionsAnswer(db: Db): Promise<Static<typeof SubscriptionList>> {
  const subs = await listSubscriptions(db);
  return {
    subscriptions: subs.map((s) => ({
      topic: s.topic,
      callback: withoutQuery(s.callback),
      state: s.state,
      expires_at: s.expiresAt.toISOString(),
      failures: s.failures,
      last_status: s.lastStatus,
      last_error: s.lastError,
      last_success_at: s.lastSuccessAt ? s.lastSuccessAt.toISOString() : null,
    })),
  };
}
