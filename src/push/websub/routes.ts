// Owns the hub's HTTP face: POST /websub, where subscribers subscribe and unsubscribe (WebSub §5.1: a form,
// answered 202 once the verification of intent or the denial is queued, 400 with a one-line reason when
// malformed, the refusals of refusals.ts when a bound says no) and publishers publish (hub.mode=publish,
// handed to intake: intake/websub/publish.ts), and GET /api/websub/subscriptions, the
// operator's view of the subscriptions and their delivery health (never their secrets), in keyset pages of
// at most MAX_PAGE, behind the operator API's authorization (also served as GET
// /api/admin/websub/subscriptions).
import type { FastifyInstance, FastifyReply } from 'fastify';
import { formBodiesOnly } from '../../platform/http-form.js';
import { Type, type Static } from '@sinclair/typebox';
import { inBackground, type Db } from '../../platform/db/database.js';
import { adminOnly } from '../../platform/admin-auth.js';
import { ApiError, firstParam, queryParam } from '../../platform/http-schema.js';
import { slash64Key } from '../../platform/net/ip.js';
import { HUB_PATH, requestBase } from '../../platform/public-url.js';
import { callbackHost, classifyTopic, grantedLease, MAX_URL_CHARS, parseSubscriptionRequest, type LeaseBounds } from './request.js';
import { queueIntent, type Intent } from './intent-repository.js';
import { listSubscriptions } from './subscription-repository.js';
import { WEBSUB_RETRY_AFTER_SEC, WEBSUB_REFUSAL_STATUS, refusalReason, type HubLimits, type Refusal } from './refusals.js';
import type { SubscriptionTally } from './subscription-tally.js';
import type { Asking, RefusalMemory } from './refusal-memory.js';
import { readPublishForm, type PublishAnswer } from '../../intake/websub/publish.js';
import { errorHandler } from '../../platform/error-handler.js';

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
  limits: HubLimits;
  /** This instance's count against limits.maxSubscriptions. */
  tally: SubscriptionTally;
  /** This instance's count of feed topics against limits.maxTopics. */
  topicTally: SubscriptionTally;
  /** Told when an intent was queued here (the worker looks at once). */
  queued(): void;
  /** Told of each refusal (the metric). */
  refused(r: Refusal): void;
  /** This instance's memory of the floods it refused (answered without the database). */
  refusalMemory: RefusalMemory;
  /** A publish (hub.mode=publish): its topics through intake, answered once committed. */
  publish(topics: readonly string[], client: { addr: string | null; userAgent: string | null }): Promise<PublishAnswer>;
  /** A publish was answered after `ms` (intake's answer times). */
  published(ms: number): void;
  log: { info(obj: object, msg?: string): void };
  /** ADMIN_TOKEN: the subscriptions list is the operator's (platform/admin-auth.ts). */
  adminToken: string | undefined;
}

/** The form's size bound (16 KiB): the longest parameters the schema takes fit; a real request is a few hundred bytes. */
const FORM_LIMIT = 4 * MAX_URL_CHARS * 2;

/**
 * Subscriptions per page of the operator's list: by default, and at most. The whole list was one answer:
 * 1.3–1.9 MB and 178 ms of the event loop at 5,700 subscriptions, and 16 readers at once pushed intake p50
 * to 4.35 s. A page of 100 measured 22 KB and 2–3 ms of pingd's CPU (embedded database, 16 readers), intake
 * p50 staying at ~5 ms; a page of 500 is about five times that.
 */
export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 500;

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
  /** The cursor of the next page (pass it as ?after=), or null on the last page. */
  next: Nullable(Type.String()),
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
    await formBodiesOnly(scope, FORM_LIMIT);
    scope.setErrorHandler(
      errorHandler((a, _req, reply) => {
        if (a.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
          return text(reply, 415, 'send the parameters as application/x-www-form-urlencoded (WebSub §5.1)');
        return text(reply, a.statusCode, a.statusCode >= 500 ? 'the hub cannot take requests right now; try again later' : a.message);
      }),
    );

    scope.post(HUB_PATH, { schema: { body: Form }, attachValidation: true }, async (req, reply) => {
      let form = (req.body ?? {}) as Record<string, unknown>;
      // A publish names its topics as often as it has them (hub.url repeated): read before the schema's
      // "each parameter once", which is the subscription form's.
      if (form['hub.mode'] === 'publish') {
        const started = performance.now();
        const topics = readPublishForm(form);
        const a = topics.ok
          ? await opts.publish(topics.topics, { addr: req.ip, userAgent: req.headers['user-agent'] ?? null })
          : { status: 400, body: topics.reason, retryAfterSec: undefined };
        opts.published(performance.now() - started);
        if (a.retryAfterSec) reply.header('retry-after', String(a.retryAfterSec));
        return a.status === 204 ? reply.code(204).send() : text(reply, a.status, a.body);
      }
      if (req.validationError) {
        const field = req.validationError.validation?.[0]?.instancePath?.replace(/^\//, '').replace(/~1/g, '/');
        if (field)
          return text(
            reply,
            400,
            `${field} must be given once, and be at most ${Form.properties[field as keyof typeof Form.properties]?.maxLength ?? 0} characters`,
          );
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
      const which = classifyTopic(r.topic, base, opts.paths);
      const topic = which.kind === 'feed' ? which.topic : r.topic;
      const intent: Intent =
        which.kind !== 'deny'
          ? {
              kind: 'verify',
              topic,
              path: which.kind === 'document' ? which.path : null,
              callback: r.callback,
              mode: r.mode,
              leaseSeconds: r.mode === 'subscribe' ? grantedLease(r.leaseSeconds, opts.lease) : null,
              secret: r.mode === 'subscribe' ? (r.secret ?? null) : null,
              reason: null,
              callbackHost: callbackHost(r.callback),
              topicHost: which.kind === 'feed' ? which.host : null,
            }
          : {
              kind: 'deny',
              topic,
              path: null,
              callback: r.callback,
              mode: r.mode,
              leaseSeconds: null,
              secret: null,
              reason: which.reason,
              callbackHost: callbackHost(r.callback),
              topicHost: null,
            };
      const client = slash64Key(req.ip);
      const asking: Asking = {
        mode: intent.mode,
        verify: intent.kind === 'verify',
        callbackHost: intent.callbackHost,
        client,
        topicHost: intent.topicHost,
      };
      const refuse = (refusal: Refusal) => {
        opts.refused(refusal);
        const after = WEBSUB_RETRY_AFTER_SEC[refusal];
        if (after !== null) reply.header('retry-after', String(after));
        return text(reply, WEBSUB_REFUSAL_STATUS[refusal], refusalReason(refusal, opts.limits, intent.callbackHost, intent.topicHost));
      };
      // A flood the database has just refused is refused from memory (refusal-memory.ts).
      const recalled = opts.refusalMemory.recall(asking);
      if (recalled) return refuse(recalled);
      // Only a subscribe can add a subscription (or a feed topic); the others need no count.
      const subscribing = intent.kind === 'verify' && intent.mode === 'subscribe';
      const full = subscribing ? await opts.tally.full() : false;
      const topicsFull = subscribing && which.kind === 'feed' ? await opts.topicTally.full() : false;
      // Committed before the answer: a 202 is a promise the queue keeps across a crash.
      const queued = await queueIntent(
        opts.db,
        intent,
        { client },
        {
          full,
          maxPerHost: opts.limits.maxPerHost,
          maxPending: opts.limits.maxPending,
          maxTopicsPerHost: opts.limits.maxTopicsPerHost,
          maxPerTopicHost: opts.limits.maxPerTopicHost,
          topicsFull,
        },
      );
      if (queued.refusal) {
        opts.refusalMemory.refused(queued.refusal, asking);
        return refuse(queued.refusal);
      }
      if (queued.fresh) opts.tally.added();
      if (queued.newTopic) opts.topicTally.added();
      opts.queued();
      return reply.code(202).send();
    });
  });

  app.get<{ Querystring: Static<typeof PageQuery> }>(
    '/api/websub/subscriptions',
    {
      onRequest: adminOnly(opts.adminToken),
      schema: { querystring: PageQuery, response: { 200: SubscriptionList, 400: ApiError, 401: ApiError } },
    },
    async (req, reply) => sendSubscriptions(opts.db, req.query, reply),
  );
}

/** ?limit= (1 to MAX_PAGE, DEFAULT_PAGE) and ?after= (a `next` cursor). */
export const PageQuery = Type.Object({ limit: queryParam(16), after: queryParam(32) });

export type PageRequest = { ok: true; limit: number; afterId: number | null } | { ok: false; message: string };

/** Reads a list's page parameters; the cursor is the last subscription's id, opaque to the client. */
export function pageRequest(query: Record<string, string | string[] | undefined>): PageRequest {
  const limitRaw = firstParam(query, 'limit');
  const afterRaw = firstParam(query, 'after');
  let limit = DEFAULT_PAGE;
  if (limitRaw !== null) {
    if (!/^\d{1,6}$/.test(limitRaw) || Number(limitRaw) < 1 || Number(limitRaw) > MAX_PAGE)
      return { ok: false, message: `limit must be an integer from 1 to ${MAX_PAGE}.` };
    limit = Number(limitRaw);
  }
  if (afterRaw === null || afterRaw === '') return { ok: true, limit, afterId: null };
  if (!/^[1-9]\d{0,14}$/.test(afterRaw)) return { ok: false, message: 'after must be the `next` of a previous page.' };
  return { ok: true, limit, afterId: Number(afterRaw) };
}

/** The operator's list, one page (GET /api/websub/subscriptions and /api/admin/websub/subscriptions). */
export async function sendSubscriptions(
  db: Db,
  query: Record<string, string | string[] | undefined>,
  reply: FastifyReply,
): Promise<FastifyReply> {
  reply.header('cache-control', 'no-store');
  const page = pageRequest(query);
  if (!page.ok) return reply.code(400).send({ error: 'WEBSUB_LIST_QUERY_INVALID', message: page.message });
  // Background work: on the embedded database intake's statements go first.
  return reply.send(await inBackground(() => subscriptionsAnswer(db, page.afterId, page.limit)));
}

/** One page of the operator's list of unexpired subscriptions (SubscriptionList): never a secret, nor a callback's query. */
export async function subscriptionsAnswer(
  db: Db,
  afterId: number | null = null,
  limit = DEFAULT_PAGE,
): Promise<Static<typeof SubscriptionList>> {
  // One row more than the page: whether there is a next page, without a count.
  const rows = await listSubscriptions(db, afterId, limit + 1);
  const subs = rows.slice(0, limit);
  return {
    next: rows.length > limit ? String(subs[subs.length - 1].id) : null,
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
