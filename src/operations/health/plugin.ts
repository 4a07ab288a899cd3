// Owns liveness and readiness (GET /healthz, GET /readyz), and refusing pings while the database's disk
// is full. (The X-Request-Id header: src/platform/request-id.ts, its hook attached to every route by app.ts.)
// Liveness says the process answers; readiness says this instance can take pings right now: its disk has
// room, the database answers and takes writes, every migration this code ships is applied, and it is not shutting down.
import fp from 'fastify-plugin';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { diskOf } from '../../platform/db/database.js';
import { pendingMigrations } from '../../platform/db/migrate.js';
import { PingdError } from '../../platform/errors.js';
import { diskFullRefusal } from '../../intake/ping/refusals.js';

/** A readiness probe must answer before the orchestrator's own timeout (Docker's HEALTHCHECK: 5 s). */
export const READY_TIMEOUT_MS = 3000;

export type Readiness =
  | { ready: true; database: 'postgres' | 'pglite' }
  | {
      ready: false;
      reason: 'shutting down' | 'disk full' | 'database unreachable' | 'database read-only' | 'migrations pending';
      pending?: string[];
      error?: string;
    };

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

/**
 * GET /healthz: the process answers (200). `degraded` with a reason: it answers, but refuses pings until an
 * operator acts (the disk is full); a restart would not help, and it recovers by itself once space is freed.
 */
const Healthz = Type.Object({
  status: Type.Union([Type.Literal('ok'), Type.Literal('degraded')]),
  reason: Type.Optional(Type.Literal('disk full')),
  uptimeSeconds: Type.Integer(),
});
/** GET /readyz when this instance can take pings. */
const ReadyOk = Type.Object({ status: Type.Literal('ok'), database: Type.Union([Type.Literal('postgres'), Type.Literal('pglite')]) });
/** GET /readyz when it cannot, and why (the driver's own message stays in the log). */
const ReadyNot = Type.Object({
  status: Type.Literal('unavailable'),
  reason: Type.Union([
    Type.Literal('shutting down'),
    Type.Literal('disk full'),
    Type.Literal('database unreachable'),
    Type.Literal('database read-only'),
    Type.Literal('migrations pending'),
  ]),
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
    // Before asking the database: with its disk full it may not be running at all (disk-guard.ts).
    if (diskOf(app.db).full) return { ready: false, reason: 'disk full' };
    let pending: string[];
    let readOnly = false;
    try {
      const bound = Math.min(READY_TIMEOUT_MS, app.config.DB_TIMEOUT_MS);
      pending = await withTimeout(pendingMigrations(app.db), bound);
      // A standby (or a read-only default) answers reads: the migrations' check alone passed on one, with
      // target_session_attrs=any or a proxy routing to the wrong node, while every ping failed (SQLSTATE 25006).
      if (app.db.kind === 'postgres')
        readOnly =
          (await withTimeout(app.db.query<{ transaction_read_only: string }>('show transaction_read_only'), bound))[0]
            ?.transaction_read_only === 'on';
    } catch (err) {
      return { ready: false, reason: 'database unreachable', error: (err as Error).message };
    }
    if (readOnly) return { ready: false, reason: 'database read-only' };
    if (pending.length > 0) return { ready: false, reason: 'migrations pending', pending };
    return { ready: true, database: app.db.kind };
  };

  app.decorate('readiness', check);

  // Every protocol's pings pass intake's screens (app.pings, registered after this plugin): while the disk
  // is full they are refused at once with that reason, not tried in a batch that fails as "database
  // unavailable" (or, before the disk guard, waited out as "did not answer in time").
  app.addHook('onReady', async () => {
    if (!app.hasDecorator('pings')) return;
    app.pings.addScreen({ client: () => (diskOf(app.db).full ? diskFullRefusal() : undefined) });
  });

  app.get('/healthz', { schema: { response: { 200: Healthz } } }, async (_req, reply) => {
    reply.header('cache-control', 'no-store');
    const uptimeSeconds = Math.round(process.uptime());
    if (diskOf(app.db).full) return { status: 'degraded', reason: 'disk full', uptimeSeconds };
    return { status: 'ok', uptimeSeconds };
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
