// Owns liveness and readiness (GET /healthz, GET /readyz). (The X-Request-Id header: src/platform/request-id.ts, its
// hook attached to every route by app.ts.)
// Liveness says the process answers; readiness says this instance can take pings right now: the database
// answers, every migration this code ships is applied, and the process is not shutting down.
import fp from 'fastify-plugin';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { pendingMigrations } from '../../platform/db/migrate.js';
import { PingdError } from '../../platform/errors.js';

/** A readiness probe must answer before the orchestrator's own timeout (Docker's HEALTHCHECK: 5 s). */
export const READY_TIMEOUT_MS = 3000;

export type Readiness =
  | { ready: true; database: 'postgres' | 'pglite' }
  | { ready: false; reason: 'shutting down' | 'database unreachable' | 'migrations pending'; pending?: string[]; error?: string };

class ReadinessTimeout extends PingdError<'READY_TIMEOUT'> {
  constructor(message: string) {
    super('READY_TIMEOUT', message);
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_r, reject) => {
    timer = setTimeout(() => reject(new ReadinessTimeout(`the database did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** GET /healthz: the process answers. */
const Healthz = Type.Object({ status: Type.Literal('ok'), uptimeSeconds: Type.Integer() });
/** GET /readyz when this instance can take pings. */
const ReadyOk = Type.Object({ status: Type.Literal('ok'), database: Type.Union([Type.Literal('postgres'), Type.Literal('pglite')]) });
/** GET /readyz when it cannot, and why (the driver's own message stays in the log). */
const ReadyNot = Type.Object({
  status: Type.Literal('unavailable'),
  reason: Type.Union([Type.Literal('shutting down'), Type.Literal('database unreachable'), Type.Literal('migrations pending')]),
  pending: Type.Optional(Type.Array(Type.String())),
});

async function healthPlugin(app: FastifyInstance): Promise<void> {
  let closing = false;
  let lastReady: boolean | undefined;
  // preClose runs before the server stops listening: from then on the load balancer is told to go away.
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });

  const check = async (): Promise<Readiness> => {
    if (closing) return { ready: false, reason: 'shutting down' };
    let pending: string[];
    try {
      pending = await withTimeout(pendingMigrations(app.db), Math.min(READY_TIMEOUT_MS, app.config.DB_TIMEOUT_MS));
    } catch (err) {
      return { ready: false, reason: 'database unreachable', error: (err as Error).message };
    }
    if (pending.length > 0) return { ready: false, reason: 'migrations pending', pending };
    return { ready: true, database: app.db.kind };
  };

  app.decorate('readiness', check);

  app.get('/healthz', { schema: { response: { 200: Healthz } } }, async (_req, reply) => {
    reply.header('cache-control', 'no-store');
    return { status: 'ok', uptimeSeconds: Math.round(process.uptime()) };
  });

  app.get('/readyz', { schema: { response: { 200: ReadyOk, 503: ReadyNot } } }, async (req, reply) => {
    const r = await check();
    reply.header('cache-control', 'no-store');
    // Log transitions only: a probe every few seconds against a dead database must not flood the log.
    if (r.ready !== lastReady) {
      if (r.ready) req.log.info('ready');
      else if (r.reason !== 'shutting down') req.log.warn({ reason: r.reason, error: r.error, pending: r.pending }, 'not ready');
      lastReady = r.ready;
    }
    if (r.ready) return { status: 'ok', database: r.database };
    // The driver's message (host names, addresses) goes to the log, not to whoever can reach the probe.
    return reply.code(503).send({ status: 'unavailable', reason: r.reason, ...(r.pending ? { pending: r.pending } : {}) });
  });
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Whether this instance can take pings now (what GET /readyz answers). */
    readiness(): Promise<Readiness>;
  }
}

export default fp(healthPlugin, { name: 'health', dependencies: ['db'] });
