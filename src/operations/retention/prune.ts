// Owns one retention pass: the partitioned logs' days ahead are made sure of; raw pings (with their RSS Ping
// payloads and found items) older than RETENTION_DAYS go a whole day partition at a time; verification jobs,
// rows outside the day partitions and rendered archives older than ARCHIVE_RETENTION_DAYS are deleted in
// bounded batches, each its own short transaction, with a pause between batches so intake (and the
// embedded database's single session) is never held up for long.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Queryable } from '../../platform/db/database.js';
import { countVerificationsBefore, deletePartitionRowsBefore, deleteVerificationsBefore } from './retention-repository.js';
import { aheadWindow, ensureLogPartitions, logPartitions, retentionPlan, type PartitionedLog } from './partitions.js';
import { countRows, dropPartition, isLockTimeout } from './partition-repository.js';
// Archives are the publishing module's rows; it owns their SQL and exposes it for this pass.
import {
  ARCHIVES_CLOSED_WATERMARK,
  countArchivesBefore,
  deleteArchivesBefore,
  getWatermark,
} from '../../publishing/rendering-repository.js';
// Finished relay jobs are the relay's rows; it owns their SQL.
import { countFinishedJobs, pruneFinishedJobs } from '../../push/relay/target-repository.js';

/** Session advisory lock key: one instance prunes at a time ('prun'). */
export const RETENTION_LOCK = 0x7072756e;

const DAY_MS = 86_400_000;

/** An archive is one rendering per coding in chunks of up to 1 MiB: a day of hours per statement is plenty. */
export const ARCHIVE_BATCH = 24;

export interface PruneOptions {
  /** Days of raw pings to keep; 0 keeps them forever. */
  pingDays: number;
  /** Days of rendered hourly archives to keep; 0 keeps them forever. */
  archiveDays: number;
  /** Most rows one statement deletes. */
  batchSize: number;
  /** Most batches in one pass (per table): a huge backlog is worked off over several passes. */
  maxBatches?: number;
  /** Pause between batches, so queued pings get the database in between. */
  pauseMs?: number;
  /** Count what would go instead of deleting it. */
  dryRun?: boolean;
  now?: Date;
  /** Checked between batches: a shutdown ends the pass after the batch in progress. */
  shouldStop?: () => boolean;
  /**
   * Seconds finished relay jobs (delivered, refused) are kept (default a day): they tell when a weblog was
   * last relayed to a target, so keep at least PING_MIN_INTERVAL. Dead letters are kept a week.
   */
  relayHistorySec?: number;
}

export interface PruneResult {
  /** Pings received before this were deleted (RETENTION_DAYS, held back to the last closed hour). */
  pingCutoff: Date | null;
  archiveCutoff: Date | null;
  pingsDeleted: number;
  /** RSS Ping payloads (kept exactly as long as the raw pings they came with). */
  payloadsDeleted: number;
  /** Verification jobs and the items verification found (kept as long as the raw pings too). */
  verificationsDeleted: number;
  itemsDeleted: number;
  archivesDeleted: number;
  /** Finished relay jobs (delivered and refused after relayHistorySec, dead letters after a week). */
  relayJobsDeleted: number;
  /** Day partitions (of pings, payloads, found items) dropped whole. */
  partitionsDropped: number;
  /** Partitions whose drop gave up waiting for its lock (tried again next pass). */
  lockTimeouts: number;
  batches: number;
  /** False when the pass stopped early (shutdown or maxBatches) with rows still to delete. */
  complete: boolean;
  dryRun: boolean;
}

export function cutoffFor(days: number, now: Date): Date | null {
  return days > 0 ? new Date(now.getTime() - days * DAY_MS) : null;
}

export async function prune(q: Queryable, opts: PruneOptions): Promise<PruneResult> {
  const now = opts.now ?? new Date();
  const maxBatches = opts.maxBatches ?? Number.POSITIVE_INFINITY;
  const pauseMs = opts.pauseMs ?? 20;
  const result: PruneResult = {
    pingCutoff: cutoffFor(opts.pingDays, now),
    archiveCutoff: cutoffFor(opts.archiveDays, now),
    pingsDeleted: 0,
    payloadsDeleted: 0,
    verificationsDeleted: 0,
    itemsDeleted: 0,
    archivesDeleted: 0,
    relayJobsDeleted: 0,
    partitionsDropped: 0,
    lockTimeouts: 0,
    batches: 0,
    complete: true,
    dryRun: Boolean(opts.dryRun),
  };

  const drain = async (
    cutoff: Date,
    del: (q: Queryable, c: Date, n: number) => Promise<number>,
    batchSize = opts.batchSize,
  ): Promise<number> => {
    let total = 0;
    for (let i = 0; ; i++) {
      if (i >= maxBatches || opts.shouldStop?.()) {
        result.complete = false;
        return total;
      }
      if (i > 0 && pauseMs > 0) await sleep(pauseMs);
      const n = await del(q, cutoff, batchSize);
      result.batches++;
      total += n;
      if (n < batchSize) return total;
    }
  };

  if (!opts.dryRun) {
    const { from, to } = aheadWindow(now);
    await ensureLogPartitions(q, from, to).catch((err) => {
      // A day made ahead can wait for the next pass; rows meanwhile go to the default partition.
      if (!isLockTimeout(err)) throw err;
    });
  }

  // A partitioned log: whole days dropped, then the rows outside day partitions trimmed in batches.
  const trimLog = async (log: PartitionedLog, key: 'pings' | 'payloads' | 'items', cutoff: Date): Promise<number> => {
    const plan = retentionPlan(await logPartitions(q, log), cutoff);
    let n = 0;
    for (const part of plan.drop) {
      if (opts.shouldStop?.()) {
        result.complete = false;
        return n;
      }
      const rows = await countRows(q, part.name);
      if (opts.dryRun) {
        n += rows;
        continue;
      }
      try {
        await dropPartition(q, log, part.name);
      } catch (err) {
        if (!isLockTimeout(err)) throw err;
        result.lockTimeouts++;
        result.complete = false;
        return n;
      }
      result.partitionsDropped++;
      n += rows;
    }
    for (const part of plan.trim) {
      n += opts.dryRun
        ? await countRows(q, part.name, cutoff)
        : await drain(cutoff, (qq, c, lim) => deletePartitionRowsBefore(qq, key, part.name, c, lim));
    }
    return n;
  };

  if (result.pingCutoff) {
    const closedUs = await getWatermark(q, ARCHIVES_CLOSED_WATERMARK);
    if (closedUs !== null && closedUs / 1000 < result.pingCutoff.getTime()) result.pingCutoff = new Date(Math.floor(closedUs / 1000));
    result.pingsDeleted = await trimLog('pings', 'pings', result.pingCutoff);
    result.payloadsDeleted = await trimLog('rssping_payloads', 'payloads', result.pingCutoff);
    result.verificationsDeleted = opts.dryRun
      ? await countVerificationsBefore(q, result.pingCutoff)
      : await drain(result.pingCutoff, deleteVerificationsBefore);
    result.itemsDeleted = await trimLog('feed_items', 'items', result.pingCutoff);
  }
  if (result.archiveCutoff) {
    result.archivesDeleted = opts.dryRun
      ? await countArchivesBefore(q, result.archiveCutoff)
      : await drain(result.archiveCutoff, deleteArchivesBefore, Math.min(ARCHIVE_BATCH, opts.batchSize));
  }
  const relayCutoff = new Date(now.getTime() - Math.max(DAY_MS, (opts.relayHistorySec ?? 0) * 1000));
  const deadCutoff = new Date(now.getTime() - 7 * DAY_MS);
  // Most installations relay nothing: no batch at all then.
  const relayDue = await countFinishedJobs(q, relayCutoff, deadCutoff, 1);
  if (relayDue > 0) {
    result.relayJobsDeleted = opts.dryRun
      ? await countFinishedJobs(q, relayCutoff, deadCutoff)
      : await drain(relayCutoff, (qq, c, n) => pruneFinishedJobs(qq, c, deadCutoff, n));
  }
  return result;
}
