// Owns rendering's ticks: on each (under an advisory lock, so one instance renders at a time and every
// instance serves what it stored) the live documents that changed (live.ts), the current hour's archive,
// and every finished hour not yet closed, catching up on hours missed while down (hours.ts), a few finished
// hours the spam rescoring held or released a weblog in (archive_stale_hours), then pruning superseded
// renderings; one render at a time in this process, each document's failure its own. Storing a
// rendering is store-rendering.ts's; reading back is the reader's (../read/reader.ts).
import { inBackground, type Queryable } from '../../platform/db/database.js';
import { readClock } from '../../platform/db/clock.js';
import { analyzePingTables, totalPings } from '../../intake/ping/window-repository.js';
import { ARCHIVE_DOCUMENT, HOUR_MS, archivePath, hourStart } from '../documents/archive.js';
import { HourCache } from '../documents/hour-cache.js';
import { OpenHourStream } from './open-hour-stream.js';
import type { TickShared } from '../documents/document.js';
import type { DocumentRegistry } from '../documents/registry.js';
import {
  clearStaleArchiveHour,
  currentRendering,
  getWatermark,
  pruneRenderings,
  staleArchiveHours,
  WEBLOG_REMOVALS_WATERMARK,
} from '../rendering-repository.js';
import { closeLimitUs, renderTime } from './render-time.js';
import type { RenderOutcome, RenderReport } from './store-rendering.js';
import { renderLive, type LiveOptions, type PacedRenders } from './live.js';
import { closeHours, renderArchive, type HourReads } from './hours.js';

/** Advisory lock held while rendering: one renderer among all instances sharing the database. */
export const RENDER_LOCK = 0x70756221; // 'pub!'
/** The embedded database's statistics are refreshed this often (it has no autovacuum). */
const ANALYZE_EVERY_MS = 10 * 60_000;
/**
 * Finished hours rendered again per tick because the spam rescoring held or released a weblog with pings in
 * them: a flip of a farm marks every hour it pinged in, and each costs a read of the whole hour, so they are
 * spread over ticks rather than taken at once.
 */
const STALE_HOURS_PER_TICK = 4;
/** Superseded renderings keep their bytes this long, for responses still streaming them. */
const GRACE_SEC = 120;
/**
 * An incomplete rendering is left alone this long: a paced render (paced.ts) of a big hour goes on for a
 * slice a tick, ten ticks and more; one given up is discarded at once, a crash's leftovers after this.
 */
const INCOMPLETE_SEC = 30 * 60;

export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface PublishMetricsSink {
  rendered(r: RenderReport): void;
  outcome(document: string, outcome: 'rendered' | 'unchanged' | 'identical' | 'throttled' | 'in_progress' | 'failed'): void;
  lockBusy(): void;
}

export interface RendererOptions extends LiveOptions {
  log: Logger;
  metrics?: PublishMetricsSink;
}

export interface TickOptions {
  /** The render time (tests inject it; the database clock otherwise). */
  now?: Date;
  /** Render even what did not change, and the current hour even when throttled. */
  force?: boolean;
  /** Time spent closing finished hours in one tick, at most (the rest waits for the next tick). */
  closeBudgetMs?: number;
  /** Called inside the lock before anything is rendered (tests use it to hold the lock). */
  onLocked?: () => Promise<void>;
  /** Only the live documents: neither the current hour nor finished hours (benchmarks measure them apart). */
  liveOnly?: boolean;
}

export interface TickReport {
  rendered: RenderReport[];
  unchanged: string[];
  /** Hours closed (rendered for the last time) in this tick. */
  closedHours: number;
  failed: { path: string; error: string }[];
}

export class Renderer {
  private chain: Promise<unknown> = Promise.resolve();
  private busy = false;
  private closed = false;
  private analyzedAt = -Infinity;
  /**
   * The hours' reads: the listing and, when every accepted ping is listed, the open hour's appended stream
   * (open-hour-stream.ts), or its pings kept between renders when whole files are written (hour-cache.ts).
   */
  private readonly hours: HourReads;
  /** Live documents' renders spread over ticks (paced.ts), by path. */
  private readonly paced: PacedRenders = new Map();
  /** The weblog removals watermark as last read (undefined: not yet); when it moves, what is kept is dropped. */
  private removalsSeen: number | null | undefined = undefined;

  constructor(
    readonly documents: DocumentRegistry,
    private readonly opts: RendererOptions,
  ) {
    const reads = documents.listing;
    // The open hour is appended to (its stream) unless PUBLISH_DIR's whole files are written: then its
    // pings are kept and it is rendered whole. Neither when the listing cannot be followed.
    const follow = reads.follow ? { hourPage: reads.hourPage, follow: reads.follow } : null;
    this.hours = {
      listing: reads,
      openHour: follow && opts.publishDir ? new HourCache(follow) : null,
      openStream: follow && !opts.publishDir ? new OpenHourStream(follow) : null,
    };
  }

  /**
   * Renders what is due. Returns null when another instance holds the render lock (it renders; we serve
   * what it stores) or, with `skipIfBusy`, when this process is already rendering.
   */
  async tick(opts: TickOptions & { skipIfBusy?: boolean } = {}): Promise<TickReport | null> {
    if (this.closed) return null;
    if (opts.skipIfBusy && this.busy) return null;
    return this.serialised(async () => {
      const r = await this.opts.db.withTryAdvisoryLock(RENDER_LOCK, async (q) => {
        await opts.onLocked?.();
        return this.renderDue(q, opts);
      });
      if (!r.ran) {
        this.opts.metrics?.lockBusy();
        return null;
      }
      return r.value;
    });
  }

  /** Re-renders one hour's archive now (closed if the hour is over). Null when the lock is busy. */
  async renderHour(hourMs: number, opts: { now?: Date } = {}): Promise<RenderReport | 'identical' | null> {
    return this.serialised(async () => {
      const r = await this.opts.db.withTryAdvisoryLock(RENDER_LOCK, async (q) => {
        await this.noticeRemovals(q);
        const clock = await readClock(q);
        const t = renderTime(clock, opts.now);
        const start = hourStart(hourMs);
        if (start * 1000 > t.nowUs) throw new Error(`the hour ${new Date(start).toISOString().slice(0, 13)} has not begun`);
        const closed = (start + HOUR_MS) * 1000 <= closeLimitUs(t);
        const out = await renderArchive(this.opts, this.hours, q, start, { closed, t, force: true });
        return typeof out === 'string' ? 'identical' : out;
      });
      return r.ran ? r.value : null;
    });
  }

  /** Resolves when no render of this process is running or queued (e.g. the one started at boot). */
  async idle(): Promise<void> {
    let seen: Promise<unknown>;
    do {
      seen = this.chain;
      await seen;
    } while (seen !== this.chain);
  }

  /** Waits for a render in progress; later ticks do nothing. */
  async close(): Promise<void> {
    this.closed = true;
    await this.chain.catch(() => undefined);
    await this.abandonPaced();
  }

  /** Gives up the paced renders under way (their renderings are discarded). */
  private async abandonPaced(): Promise<void> {
    const running = [...this.paced.values()];
    this.paced.clear();
    for (const job of running) await job.abandon();
  }

  /**
   * Drops the kept windows and open hour when a weblog was removed or restored since the last render (by
   * `pingd weblogs`, in this instance or another sharing the database): they follow new pings only, so they
   * would list a removed weblog again. One read of one row per render, under the render lock.
   */
  private async noticeRemovals(q: Queryable): Promise<void> {
    const at = await getWatermark(q, WEBLOG_REMOVALS_WATERMARK);
    if (at === this.removalsSeen) return;
    if (this.removalsSeen !== undefined) {
      // A paced render lists what was kept when it began: a removed weblog would be published again.
      await this.abandonPaced();
      for (const doc of this.documents.list()) doc.forget?.();
      this.hours.openHour?.forget();
      this.hours.openStream?.forget();
    }
    this.removalsSeen = at;
  }

  // Rendering is background work: on the embedded database intake's statements go first (inBackground).
  private serialised<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(async () => {
      this.busy = true;
      try {
        return await inBackground(fn);
      } finally {
        this.busy = false;
      }
    });
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async renderDue(q: Queryable, opts: TickOptions): Promise<TickReport> {
    const report: TickReport = { rendered: [], unchanged: [], closedHours: 0, failed: [] };
    await this.noticeRemovals(q);
    const clock = await readClock(q);
    const t = renderTime(clock, opts.now);
    if (this.opts.db.kind === 'pglite' && performance.now() - this.analyzedAt > ANALYZE_EVERY_MS) {
      try {
        await analyzePingTables(q);
        this.analyzedAt = performance.now();
      } catch (err) {
        this.opts.log.warn({ err: { message: (err as Error).message } }, 'analyzing the tables failed');
      }
    }
    let total: Promise<number> | null = null;
    const shared: TickShared = { total: () => (total ??= totalPings(q)) };
    const note = (path: string, document: string, o: RenderOutcome) => {
      if (typeof o === 'object') {
        report.rendered.push(o);
        this.opts.metrics?.rendered(o);
        this.opts.metrics?.outcome(document, 'rendered');
      } else {
        report.unchanged.push(path);
        this.opts.metrics?.outcome(document, o);
      }
    };
    const attempt = async (path: string, document: string, fn: () => Promise<RenderOutcome>): Promise<boolean> => {
      try {
        note(path, document, await fn());
        return true;
      } catch (err) {
        // One document failing must not stop the others; the next tick tries again.
        this.opts.metrics?.outcome(document, 'failed');
        report.failed.push({ path, error: (err as Error).message });
        this.opts.log.error({ err: { message: (err as Error).message }, path }, 'rendering failed');
        return false;
      }
    };

    for (const doc of this.documents.list()) {
      await attempt(doc.path, doc.name, () => renderLive(this.opts, q, doc, t, shared, Boolean(opts.force), this.paced));
    }
    if (opts.liveOnly) return report;
    const current = hourStart(t.nowUs / 1000);
    await attempt(archivePath(current), ARCHIVE_DOCUMENT, () =>
      renderArchive(this.opts, this.hours, q, current, { closed: false, t, force: Boolean(opts.force) }),
    );
    try {
      report.closedHours = await closeHours(this.opts, this.hours, q, t, opts.closeBudgetMs ?? Infinity, attempt);
    } catch (err) {
      // Finding the hours to close failed (the watermark or first-ping query): the live documents are done.
      report.failed.push({ path: 'finished hours', error: (err as Error).message });
      this.opts.log.error({ err: { message: (err as Error).message } }, 'rendering failed');
    }
    try {
      for (const h of await staleArchiveHours(q, STALE_HOURS_PER_TICK)) {
        const path = archivePath(h);
        // Only finished hours are marked (markArchiveHoursStale); one never published is rendered when it
        // is closed, with what the reads list then.
        const rendered =
          !(await currentRendering(q, path)) ||
          (await attempt(path, ARCHIVE_DOCUMENT, () =>
            renderArchive(this.opts, this.hours, q, h, { closed: (h + HOUR_MS) * 1000 <= closeLimitUs(t), t, force: true }),
          ));
        if (rendered) await clearStaleArchiveHour(q, h);
      }
    } catch (err) {
      report.failed.push({ path: 'stale archive hours', error: (err as Error).message });
      this.opts.log.error({ err: { message: (err as Error).message } }, 'rendering failed');
    }
    try {
      await pruneRenderings(this.opts.db, GRACE_SEC, this.opts.deltaWindowSec + GRACE_SEC, INCOMPLETE_SEC);
    } catch (err) {
      this.opts.log.warn({ err: { message: (err as Error).message } }, 'pruning renderings failed');
    }
    return report;
  }
}
