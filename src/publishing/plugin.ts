// Owns publishing as a Fastify resource: the publisher (`app.publisher`), the routes that serve what it
// renders (/changes.xml, /shortChanges.xml, /YYYY/MM/DD/HH.xml and any document registered later), the
// render scheduler (node-cron on RENDER_CRON, UTC, no overlapping runs) and the publishing metrics.
import fp from 'fastify-plugin';
import cron, { type ScheduledTask } from 'node-cron';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../platform/config.js';
import { archivePath, defaultDocuments, parseArchivePath, type LiveDocument } from './documents/documents.js';
import { publishMetrics } from './metrics.js';
import { Publisher } from './render/renderer.js';
import { IMMUTABLE, serveDocument, type ServePolicy } from './read/serve.js';

declare module 'fastify' {
  interface FastifyInstance {
    publisher: Publisher;
  }
}

/** Seconds between two runs of a cron expression (the smallest gap among the next ones), at least 1. */
export function cadenceSeconds(expr: string): number {
  let task: ScheduledTask;
  try {
    task = cron.createTask(expr, () => undefined, { timezone: 'UTC' });
  } catch (err) {
    throw new Error(`RENDER_CRON ${JSON.stringify(expr)} is not a valid cron expression: ${(err as Error).message}`, { cause: err });
  }
  try {
    const runs = task.getNextRuns(30).map((d) => d.getTime());
    let gap = Infinity;
    for (let i = 1; i < runs.length; i++) gap = Math.min(gap, runs[i] - runs[i - 1]);
    return Number.isFinite(gap) ? Math.max(1, Math.round(gap / 1000)) : 60;
  } finally {
    void task.destroy();
  }
}

async function publishPlugin(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;
  const cadenceSec = cadenceSeconds(config.RENDER_CRON);
  const metrics = publishMetrics(app.metrics);
  const publisher = new Publisher({
    db: app.db,
    log: app.log,
    cadenceSec,
    deltaWindowSec: config.PUBLISH_DELTA_WINDOW,
    pointerTtlMs: config.PUBLISH_POINTER_TTL_MS,
    publishDir: config.PUBLISH_DIR,
    metrics: metrics.sink,
  });
  const live = `public, max-age=${cadenceSec}`;

  // A document that cannot be read (the database is down and this instance has not kept its bytes) is a
  // 503 with Retry-After, not a 500 with the internal error.
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

  const route = (doc: LiveDocument) => {
    const policy: ServePolicy = {
      document: doc.name,
      deltas: doc.deltas,
      cacheControl: () => live,
      missing: { status: 503, message: `${doc.path} has not been rendered yet; try again in ${cadenceSec} seconds.`, retryAfterSec: cadenceSec },
    };
    app.route({
      method: ['GET', 'HEAD'],
      url: doc.path,
      exposeHeadRoute: false,
      handler: (req, reply) => serveDocument(publisher, doc.path, policy, req, reply, metrics.responses).catch((err: Error) => unavailable(req, reply, err)),
    });
  };
  // Documents registered by other plugins get their route at once (before the app is ready).
  const register = publisher.register.bind(publisher);
  publisher.register = (doc: LiveDocument) => {
    register(doc);
    route(doc);
  };
  for (const doc of defaultDocuments()) publisher.register(doc);

  const archivePolicy: ServePolicy = {
    document: 'archive',
    deltas: false,
    cacheControl: (meta) => (meta.closed ? IMMUTABLE : live),
    missing: { status: 404, message: 'There is no archive for this hour (yet).' },
  };
  app.route({
    method: ['GET', 'HEAD'],
    url: '/:year(^\\d{4})/:month(^\\d{2})/:day(^\\d{2})/:hour(^\\d{2}).xml',
    exposeHeadRoute: false,
    handler: (req: FastifyRequest<{ Params: { year: string; month: string; day: string; hour: string } }>, reply: FastifyReply) => {
      const { year, month, day, hour } = req.params;
      const ms = parseArchivePath(year, month, day, hour);
      if (ms === null) {
        metrics.responses('archive', 404, 0);
        return reply.code(404).header('content-type', 'text/plain; charset=utf-8').send('Not a UTC hour.\n');
      }
      return serveDocument(publisher, archivePath(ms), archivePolicy, req, reply, (d, s, n) => metrics.responses(d, s, n)).catch((err: Error) => unavailable(req, reply, err));
    },
  });

  app.decorate('publisher', publisher);

  let task: ScheduledTask | undefined;
  const tick = (reason: string) =>
    publisher
      // Half a cadence at most on catching up with finished hours, so live documents stay fresh.
      .tick({ skipIfBusy: true, closeBudgetMs: (cadenceSec * 1000) / 2 })
      .then((r) => {
        if (r && (r.rendered.length || r.failed.length)) {
          app.log.debug({ reason, rendered: r.rendered.map((x) => `${x.path}#${x.id}`), closedHours: r.closedHours, failed: r.failed }, 'render tick');
        }
      })
      .catch((err: Error) => app.log.error({ err: { message: err.message } }, 'render tick failed'));

  if (config.RENDER_SCHEDULER) {
    app.addHook('onReady', async () => {
      task = cron.schedule(config.RENDER_CRON, () => tick('schedule'), { timezone: 'UTC', noOverlap: true, name: 'pingd-render' });
      // Render at once: documents exist before the first cron tick, and hours missed while down get closed.
      void tick('start');
    });
  }
  app.addHook('onClose', async () => {
    if (task) await task.destroy();
    await publisher.close();
  });
}

export default fp(publishPlugin, { name: 'publish', dependencies: ['db', 'metrics'] });
