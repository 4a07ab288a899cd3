// Owns the retention job as a Fastify resource: a node-cron task (RETENTION_CRON, UTC, never overlapping)
// that makes the logs' day partitions ahead and prunes under a PostgreSQL advisory lock so one instance of
// many does the work, and stops on close after the batch in progress.
import fp from 'fastify-plugin';
import cron, { type ScheduledTask } from 'node-cron';
import { Counter, Gauge } from 'prom-client';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../platform/config.js';
import { inBackground } from '../../platform/db/database.js';
import { prune, RETENTION_LOCK, type PruneResult } from './prune.js';
import { aheadWindow, ensureLogPartitions } from './partitions.js';

/** The first upkeep of the day partitions waits this long after start, so a start is not slowed by it. */
const FIRST_UPKEEP_DELAY_MS = 5_000;

/** A huge backlog (retention switched on for an old database) is worked off over several hourly passes. */
export const MAX_BATCHES_PER_RUN = 1000;

export type RetentionRun = { ran: true; result: PruneResult } | { ran: false; reason: 'disabled' | 'locked' | 'busy' | 'closing' };

export interface Retention {
  /** Runs one pass now (what the schedule runs); resolves when it is over. */
  runOnce(): Promise<RetentionRun>;
  /** The next scheduled pass, or null when retention is off. */
  nextRun(): Date | null;
}

declare module 'fastify' {
  interface FastifyInstance {
    retention: Retention;
  }
}

async function retentionPlugin(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;
  const enabled = config.RETENTION_DAYS > 0 || config.ARCHIVE_RETENTION_DAYS > 0;
  let closing = false;
  let running: Promise<RetentionRun> | undefined;

  const deleted = new Counter({
    name: 'pingd_retention_deleted_rows_total',
    help: 'Rows deleted by retention, by table.',
    labelNames: ['table'] as const,
    registers: [app.metrics],
  });
  const runs = new Counter({
    name: 'pingd_retention_runs_total',
    help: 'Retention passes by outcome (pruned, skipped: another instance holds the lock, failed).',
    labelNames: ['outcome'] as const,
    registers: [app.metrics],
  });
  const lastSuccess = new Gauge({
    name: 'pingd_retention_last_success_timestamp_seconds',
    help: 'When this instance last finished a retention pass (alert if it falls far behind).',
    registers: [app.metrics],
  });
  deleted.inc({ table: 'pings' }, 0);
  deleted.inc({ table: 'rssping_payloads' }, 0);
  deleted.inc({ table: 'ping_verifications' }, 0);
  deleted.inc({ table: 'feed_items' }, 0);
  deleted.inc({ table: 'archives' }, 0);

  const pass = async (): Promise<RetentionRun> => {
    try {
      // Background work: on the embedded database intake's statements go first.
      const r = await inBackground(() =>
        app.db.withTryAdvisoryLock(RETENTION_LOCK, (q) =>
          prune(q, {
            pingDays: config.RETENTION_DAYS,
            archiveDays: config.ARCHIVE_RETENTION_DAYS,
            batchSize: config.RETENTION_BATCH,
            maxBatches: MAX_BATCHES_PER_RUN,
            shouldStop: () => closing,
            relayHistorySec: config.PING_MIN_INTERVAL,
          }),
        ),
      );
      if (!r.ran) {
        runs.inc({ outcome: 'skipped' });
        app.log.debug('retention: another instance holds the lock; skipped');
        return { ran: false, reason: 'locked' };
      }
      const res = r.value;
      deleted.inc({ table: 'pings' }, res.pingsDeleted);
      deleted.inc({ table: 'rssping_payloads' }, res.payloadsDeleted);
      deleted.inc({ table: 'ping_verifications' }, res.verificationsDeleted);
      deleted.inc({ table: 'feed_items' }, res.itemsDeleted);
      deleted.inc({ table: 'archives' }, res.archivesDeleted);
      deleted.inc({ table: 'relay_jobs' }, res.relayJobsDeleted);
      runs.inc({ outcome: 'pruned' });
      lastSuccess.set(Date.now() / 1000);
      const fields = {
        pingsDeleted: res.pingsDeleted,
        payloadsDeleted: res.payloadsDeleted,
        verificationsDeleted: res.verificationsDeleted,
        itemsDeleted: res.itemsDeleted,
        archivesDeleted: res.archivesDeleted,
        relayJobsDeleted: res.relayJobsDeleted,
        batches: res.batches,
        complete: res.complete,
      };
      if (res.pingsDeleted > 0 || res.archivesDeleted > 0 || !res.complete) app.log.info(fields, 'retention pass done');
      else app.log.debug(fields, 'retention pass done');
      return { ran: true, result: res };
    } catch (err) {
      runs.inc({ outcome: 'failed' });
      app.log.error({ err: { message: (err as Error).message } }, 'retention pass failed');
      throw err;
    }
  };

  const runOnce = (): Promise<RetentionRun> => {
    if (!enabled) return Promise.resolve({ ran: false, reason: 'disabled' });
    if (closing) return Promise.resolve({ ran: false, reason: 'closing' });
    if (running) return Promise.resolve({ ran: false, reason: 'busy' });
    running = pass().finally(() => {
      running = undefined;
    });
    return running;
  };

  // The day partitions ahead (src/operations/retention/partitions.ts) are kept on the same schedule, with or
  // without retention: a pass does it first; with retention off, the schedule does only this.
  const upkeep = async (): Promise<void> => {
    if (closing) return;
    const { from, to } = aheadWindow(new Date());
    try {
      const made = await ensureLogPartitions(app.db, from, to);
      if (made.length) app.log.info({ partitions: made }, 'partitions made ahead');
    } catch (err) {
      app.log.warn({ err: { message: (err as Error).message } }, 'making partitions ahead failed; tried again on the next run');
    }
  };
  const task: ScheduledTask = cron.schedule(
    config.RETENTION_CRON,
    async () => {
      // A failed pass is logged and counted in pass(); the next hour tries again.
      if (enabled) await runOnce().catch(() => undefined);
      else await upkeep();
    },
    { name: 'pingd-retention', timezone: 'UTC', noOverlap: true },
  );
  let firstUpkeep: Promise<void> | undefined;
  const firstTimer = setTimeout(() => {
    firstUpkeep = upkeep();
  }, FIRST_UPKEEP_DELAY_MS);
  firstTimer.unref();

  app.decorate('retention', {
    runOnce,
    nextRun: () => (enabled ? task.getNextRun() : null),
  } satisfies Retention);

  // Registered after the db plugin, so this runs before the database closes: the pass in progress ends
  // after its current batch, then the task is gone.
  app.addHook('onClose', async () => {
    closing = true;
    clearTimeout(firstTimer);
    await task.destroy();
    await running?.catch(() => undefined);
    await firstUpkeep;
  });
}

export default fp(retentionPlugin, { name: 'retention', dependencies: ['db', 'metrics'] });
