// Owns publishing as a Fastify resource: the document registry (`app.documents`), the renderer
// (`app.renderer`) and its schedule, the reader behind the document routes, and the publishing metrics.
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../platform/config.js';
import { documentBase } from '../platform/public-url.js';
import { publishedDocuments } from './documents/published.js';
import { listingFor } from './documents/listing.js';
import type { DocumentRegistry } from './documents/registry.js';
import { publishMetrics } from './metrics.js';
import { Reader } from './read/reader.js';
import { documentRoutes } from './read/routes.js';
import { Renderer } from './render/renderer.js';
import { applyHoldRule } from '../spam/spam-repository.js';
import { pendingMigrations } from '../platform/db/migrate.js';
import { touchWatermark, WEBLOG_REMOVALS_WATERMARK } from './rendering-repository.js';
import { cadenceSeconds, scheduleRenders } from './render/schedule.js';
import { scheduleRescoring, SpamRescorer } from './spam-rescorer.js';

/** What other layers may know of publishing's output: when a document changed, and its current bytes. */
export interface Publications {
  /** Registers a listener told of every path that got a new current rendering (in the rendering instance). */
  onPublished(listener: (path: string) => void): void;
  /** The current rendering of `path` (uncompressed), if any. */
  read(path: string): Promise<{ contentType: string; body: Buffer; renderingId: number } | undefined>;
  /** Each live document's current rendering (null before the first): what a status page shows. */
  states(): Promise<DocumentState[]>;
}

export interface DocumentState {
  path: string;
  name: string;
  rendering: { renderedAtMs: number; updatedMs: number; entries: number; renderMs: number; bytes: number } | null;
}

declare module 'fastify' {
  interface FastifyInstance {
    documents: DocumentRegistry;
    renderer: Renderer;
    publications: Publications;
    /** Rescores weblogs from every family of spam signals (runOnce; scheduled every SPAM_RESCORE_INTERVAL). */
    spamRescorer: SpamRescorer;
  }
}

/** How often a start whose database could not take the spam hold rule tries it again. */
const HOLD_RULE_RETRY_MS = 10_000;

async function publishingPlugin(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;
  const cadenceSec = cadenceSeconds(config.RENDER_CRON);
  const reader = new Reader({ db: app.db, pointerTtlMs: config.PUBLISH_POINTER_TTL_MS });
  const metrics = publishMetrics(app.metrics, () => reader.cachedBytes);
  const documents = publishedDocuments(listingFor(config.VERIFY_PINGS), documentBase(config.PUBLIC_URL, config.PORT));
  const listeners: ((path: string) => void)[] = [];
  // Weblogs scored before may be held or released by this start's SPAM_FILTER and SPAM_THRESHOLD: their
  // `held` is set anew and, when one changed, every renderer drops the windows it keeps (one statement over
  // weblog_spam, at start only). Instances sharing a database must share both settings.
  // A server started with migrations pending (it answers /readyz 503) has nothing scored yet. Best effort:
  // a start must not fail because the database is away or read-only (a standby before its promotion); the
  // rule is tried again every HOLD_RULE_RETRY_MS until it has run once.
  const applyHolds = async (): Promise<void> => {
    if ((await pendingMigrations(app.db)).length > 0) return;
    await app.db.transaction(async (tx) => {
      if ((await applyHoldRule(tx, { hold: config.SPAM_FILTER === 'hold', threshold: config.SPAM_THRESHOLD })) > 0)
        await touchWatermark(tx, WEBLOG_REMOVALS_WATERMARK);
    });
  };
  await applyHolds().catch((err: unknown) => {
    app.log.warn({ err: { message: (err as Error).message } }, 'spam: the hold rule could not be applied at start; trying again');
    const retry = setInterval(() => {
      applyHolds().then(
        () => clearInterval(retry),
        () => undefined,
      );
    }, HOLD_RULE_RETRY_MS);
    retry.unref();
    app.addHook('onClose', async () => clearInterval(retry));
  });
  const renderer = new Renderer(documents, {
    db: app.db,
    log: app.log,
    deltaWindowSec: config.PUBLISH_DELTA_WINDOW,
    publishDir: config.PUBLISH_DIR,
    metrics: metrics.sink,
    cadenceSec,
    sliceMs: config.RENDER_SLICE_MS,
    onPublished: (path) => {
      reader.invalidate(path);
      for (const l of listeners) l(path);
    },
  });
  await documentRoutes(app, {
    documents,
    reader,
    cadenceSec,
    record: metrics.responses,
    publicUrl: config.PUBLIC_URL,
    port: config.PORT,
    // Behind a trusted proxy the Link's host comes from X-Forwarded-Host (Fastify's req.host): Fastify answers.
    early: config.PUBLIC_URL !== undefined || config.TRUST_PROXY === false ? app.earlyAnswers : undefined,
  });
  const spamRescorer = new SpamRescorer({
    db: app.db,
    log: app.log,
    rule: { hold: config.SPAM_FILTER === 'hold', threshold: config.SPAM_THRESHOLD },
    batch: config.SPAM_RESCORE_BATCH,
  });
  app.decorate('documents', documents);
  app.decorate('renderer', renderer);
  app.decorate('spamRescorer', spamRescorer);
  app.decorate('publications', {
    onPublished: (l: (path: string) => void) => void listeners.push(l),
    read: async (path: string) => {
      const meta = await reader.current(path);
      if (!meta) return undefined;
      return { contentType: meta.contentType, body: await toBuffer(await reader.fullBody(meta, 'identity')), renderingId: meta.id };
    },
    states: () =>
      Promise.all(
        documents.list().map(async (d) => {
          const m = await reader.current(d.path);
          const rendering = m
            ? {
                renderedAtMs: Math.floor(m.createdUs / 1000),
                updatedMs: m.updatedMs,
                entries: m.entries,
                renderMs: m.renderMs,
                bytes: m.identityLength,
              }
            : null;
          return { path: d.path, name: d.name, rendering };
        }),
      ),
  } satisfies Publications);

  let stopSchedule: (() => Promise<void>) | undefined;
  if (config.RENDER_SCHEDULER) {
    app.addHook('onReady', async () => {
      stopSchedule = scheduleRenders(renderer, { cron: config.RENDER_CRON, cadenceSec, log: app.log });
    });
  }
  // Nothing to rescore under SPAM_FILTER=off: no weblog is scored.
  let stopRescoring: (() => Promise<void>) | undefined;
  if (config.SPAM_FILTER !== 'off' && config.SPAM_RESCORE_INTERVAL > 0) {
    app.addHook('onReady', async () => {
      stopRescoring = scheduleRescoring(spamRescorer, config.SPAM_RESCORE_INTERVAL, app.log);
    });
  }
  app.addHook('onClose', async () => {
    await stopRescoring?.();
    await spamRescorer.close();
    await stopSchedule?.();
    await renderer.close();
  });
}

async function toBuffer(b: Buffer | NodeJS.ReadableStream): Promise<Buffer> {
  if (Buffer.isBuffer(b)) return b;
  const parts: Buffer[] = [];
  for await (const c of b) parts.push(Buffer.isBuffer(c) ? c : Buffer.from(c));
  return Buffer.concat(parts);
}

export default fp(publishingPlugin, { name: 'publishing', dependencies: ['db', 'metrics'] });
