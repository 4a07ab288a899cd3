// Owns rendering: on each tick (under an advisory lock, so one instance renders at a time and every
// instance serves what it stored) the live documents that changed, the current hour's archive, and every
// finished hour not yet closed (catching up on hours missed while down), then pruning superseded
// renderings. Schedule → render → store; reading back is the reader's job (../read/reader.ts).
import { inBackground, type Db, type Queryable } from '../../platform/db/database.js';
import { beginSnapshot, endSnapshot, readClock } from '../../platform/db/clock.js';
import { analyzePingTables, firstPingUs, totalPings } from '../../intake/ping/window-repository.js';
import { ARCHIVE_DOCUMENT, HOUR_MS, archivePageRows, archivePath, hourStart, readArchive } from '../documents/archive.js';
import { HourCache } from '../documents/hour-cache.js';
import type { LiveDocument, RenderSource, RenderWindow, TickShared } from '../documents/document.js';
import type { DocumentRegistry } from '../documents/registry.js';
import { CONTENT_TYPE } from '../documents/weblog-updates.js';
import {
  ARCHIVES_CLOSED_WATERMARK,
  completeRendering,
  createRendering,
  currentRendering,
  discardRendering,
  getWatermark,
  pruneRenderings,
  recentRenderings,
  setWatermark,
  type RenderingMeta,
} from '../rendering-store.js';
import { runPipeline } from './pipeline.js';
import { closeLimitUs, cursorFor, liveMayWait, nextSecond, renderTime, wholeSecond, type RenderTime } from './render-time.js';

/** Advisory lock held while rendering: one renderer among all instances sharing the database. */
export const RENDER_LOCK = 0x70756221; // 'pub!'
/** Most delta bases kept per rendering (bounds the flush points written). */
export const MAX_DELTA_BASES = 256;
/** The embedded database's statistics are refreshed this often (it has no autovacuum). */
const ANALYZE_EVERY_MS = 10 * 60_000;
/**
 * The current hour, and a live document with a maxAgeSec, are re-rendered every tick until one rendering
 * takes this long; then ~10% of the time (a live document: no later than its maxAgeSec allows).
 */
const THROTTLE_FROM_MS = 1000;
/** Superseded renderings keep their bytes this long, for responses still streaming them. */
const GRACE_SEC = 120;

export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface PublishMetricsSink {
  rendered(r: RenderReport): void;
  outcome(document: string, outcome: 'rendered' | 'unchanged' | 'identical' | 'throttled' | 'failed'): void;
  lockBusy(): void;
}

export interface RendererOptions {
  db: Db;
  log: Logger;
  /** Validators naming a rendering older than this get the full document, not a delta. */
  deltaWindowSec: number;
  publishDir?: string;
  metrics?: PublishMetricsSink;
  /** Told of every path that got a new current rendering (the reader forgets what it remembered of it). */
  onPublished?: (path: string) => void;
  /** Seconds between scheduled ticks (RENDER_CRON's cadence): a throttled live document is rendered a tick early enough. */
  cadenceSec?: number;
}

export interface RenderReport {
  path: string;
  document: string;
  id: number;
  entries: number;
  closed: boolean;
  identityLength: number;
  gzipLength: number;
  brLength: number;
  ms: number;
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

type Outcome = RenderReport | 'unchanged' | 'identical' | 'throttled';

export class Renderer {
  private chain: Promise<unknown> = Promise.resolve();
  private busy = false;
  private closed = false;
  private analyzedAt = -Infinity;
  /** The open hour's pings, when every accepted ping is listed (hour-cache.ts). */
  private readonly openHour: HourCache | null;

  constructor(
    readonly documents: DocumentRegistry,
    private readonly opts: RendererOptions,
  ) {
    const reads = documents.listing;
    this.openHour = reads.follow ? new HourCache({ hourPage: reads.hourPage, follow: reads.follow }) : null;
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
        const clock = await readClock(q);
        const t = renderTime(clock, opts.now);
        const start = hourStart(hourMs);
        if (start * 1000 > t.nowUs) throw new Error(`the hour ${new Date(start).toISOString().slice(0, 13)} has not begun`);
        const closed = (start + HOUR_MS) * 1000 <= closeLimitUs(t);
        const out = await this.renderArchive(q, start, { closed, t, force: true });
        return out === 'unchanged' || out === 'throttled' ? 'identical' : out;
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
    const note = (path: string, document: string, o: Outcome) => {
      if (typeof o === 'object') {
        report.rendered.push(o);
        this.opts.metrics?.rendered(o);
        this.opts.metrics?.outcome(document, 'rendered');
      } else {
        report.unchanged.push(path);
        this.opts.metrics?.outcome(document, o);
      }
    };
    const attempt = async (path: string, document: string, fn: () => Promise<Outcome>): Promise<boolean> => {
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
      await attempt(doc.path, doc.name, () => this.renderLive(q, doc, t, shared, Boolean(opts.force)));
    }
    if (opts.liveOnly) return report;
    const current = hourStart(t.nowUs / 1000);
    await attempt(archivePath(current), ARCHIVE_DOCUMENT, () =>
      this.renderArchive(q, current, { closed: false, t, force: Boolean(opts.force) }),
    );
    try {
      report.closedHours = await this.closeHours(q, t, opts.closeBudgetMs ?? Infinity, attempt);
    } catch (err) {
      // Finding the hours to close failed (the watermark or first-ping query): the live documents are done.
      report.failed.push({ path: 'finished hours', error: (err as Error).message });
      this.opts.log.error({ err: { message: (err as Error).message } }, 'rendering failed');
    }
    try {
      await pruneRenderings(this.opts.db, GRACE_SEC, this.opts.deltaWindowSec + GRACE_SEC);
    } catch (err) {
      this.opts.log.warn({ err: { message: (err as Error).message } }, 'pruning renderings failed');
    }
    return report;
  }

  /** On the server, a document's reads share one snapshot; the embedded database has one session anyway. */
  private async withSnapshot<T>(q: Queryable, fn: () => Promise<T>): Promise<T> {
    if (this.opts.db.kind !== 'postgres') return fn();
    await beginSnapshot(q);
    let ok = false;
    try {
      const v = await fn();
      ok = true;
      return v;
    } finally {
      await endSnapshot(q, ok);
    }
  }

  private async renderLive(q: Queryable, doc: LiveDocument, t: RenderTime, shared: TickShared, force: boolean): Promise<Outcome> {
    const prev = await currentRendering(this.opts.db, doc.path);
    if (
      !force &&
      prev &&
      doc.maxAgeSec !== undefined &&
      liveMayWait(prev, t.clock.nowUs, doc.maxAgeSec, this.opts.cadenceSec ?? 0, THROTTLE_FROM_MS)
    )
      return 'throttled';
    const windowAt = (nowUs: number, updatedMs: number): RenderWindow => ({
      updatedMs,
      toUs: nowUs,
      fromUs: nowUs - doc.windowSec * 1_000_000,
    });
    return this.withSnapshot(q, async () => {
      let w = windowAt(t.nowUs, wholeSecond(t.nowUs));
      let fingerprint = await doc.fingerprint(q, w, shared);
      if (!force && prev && prev.fingerprint === fingerprint) return 'unchanged';
      const later = await this.afterPrevious(prev, t);
      if (later) {
        w = windowAt(later.nowUs, later.updatedMs);
        fingerprint = await doc.fingerprint(q, w, shared);
      }
      return this.store(
        {
          path: doc.path,
          document: doc.name,
          contentType: doc.contentType,
          updatedMs: w.updatedMs,
          cursorUs: cursorFor(t, w.toUs),
          fingerprint,
          closed: false,
          deltas: doc.deltas,
          basesFromUs: w.fromUs,
        },
        prev,
        () => doc.source(q, w, shared),
      );
    });
  }

  /** The next second after the previous rendering's, waited for when it is this one (render-time.ts). */
  private async afterPrevious(prev: RenderingMeta | undefined, t: RenderTime): Promise<{ nowUs: number; updatedMs: number } | null> {
    const later = nextSecond(prev, t);
    if (later?.waitMs) await new Promise((r) => setTimeout(r, later.waitMs));
    return later;
  }

  private async renderArchive(q: Queryable, startMs: number, o: { closed: boolean; t: RenderTime; force: boolean }): Promise<Outcome> {
    const path = archivePath(startMs);
    const prev = await currentRendering(this.opts.db, path);
    if (prev?.closed && !o.force) return 'unchanged';
    if (!o.closed && !o.force && prev && !prev.closed) {
      // A big hour takes long to render: render it at most ~10% of the time (the closed rendering is exact).
      const sinceMs = (o.t.clock.nowUs - prev.createdUs) / 1000;
      if (prev.renderMs >= THROTTLE_FROM_MS && sinceMs < 10 * prev.renderMs) return 'throttled';
    }
    const endMs = startMs + HOUR_MS;
    // received_at < toUs: the whole hour once closed, up to the render time while it grows.
    const frame = (nowUs: number, updatedMs: number) =>
      o.closed ? { updatedMs: endMs, toUs: endMs * 1000 } : { updatedMs, toUs: Math.min(endMs * 1000, nowUs + 1) };
    // The open hour's pings are kept between its renders when the listing can be followed; a closing render
    // reads the whole hour (the bytes it keeps for good come from the database itself).
    const read = (toUs: number) =>
      readArchive(q, startMs, toUs, {
        reads: this.documents.listing,
        pageRows: archivePageRows(this.opts.db.kind),
        cache: o.closed ? null : this.openHour,
      });
    return this.withSnapshot(q, async () => {
      let f = frame(o.t.nowUs, wholeSecond(o.t.nowUs));
      let hour = await read(f.toUs);
      const print = () => `${hour.stats.n}:${hour.stats.maxId}:${o.closed ? 'closed' : 'open'}`;
      if (!o.force && prev && prev.fingerprint === print()) return 'unchanged';
      const later = o.closed || prev?.closed ? null : await this.afterPrevious(prev, o.t);
      if (later) {
        f = frame(later.nowUs, later.updatedMs);
        hour = await read(f.toUs);
      }
      const { updatedMs, toUs } = f;
      return this.store(
        {
          path,
          document: ARCHIVE_DOCUMENT,
          contentType: CONTENT_TYPE,
          updatedMs,
          cursorUs: cursorFor(o.t, toUs),
          fingerprint: print(),
          closed: o.closed,
          deltas: false,
          hourStartMs: startMs,
        },
        prev,
        async () => hour.source(updatedMs),
      );
    });
  }

  /** Closes (renders for the last time) every finished hour not yet closed, oldest first, within a budget. */
  private async closeHours(
    q: Queryable,
    t: RenderTime,
    budgetMs: number,
    attempt: (path: string, document: string, fn: () => Promise<Outcome>) => Promise<boolean>,
  ): Promise<number> {
    const db = this.opts.db;
    let nextUs = await getWatermark(db, ARCHIVES_CLOSED_WATERMARK);
    if (nextUs === null) {
      const first = await firstPingUs(db);
      if (first === null) return 0;
      nextUs = hourStart(first / 1000) * 1000;
    }
    const limitUs = closeLimitUs(t);
    const started = performance.now();
    let closed = 0;
    while (nextUs + HOUR_MS * 1000 <= limitUs && performance.now() - started < budgetMs) {
      const startMs = nextUs / 1000;
      const ok = await attempt(archivePath(startMs), ARCHIVE_DOCUMENT, () =>
        this.renderArchive(q, startMs, { closed: true, t, force: false }),
      );
      if (!ok) break; // retried next tick; later hours wait so none is skipped
      nextUs += HOUR_MS * 1000;
      await setWatermark(db, ARCHIVES_CLOSED_WATERMARK, nextUs);
      closed++;
    }
    return closed;
  }

  private async store(
    spec: Pick<RenderingMeta, 'path' | 'document' | 'contentType' | 'updatedMs' | 'cursorUs' | 'fingerprint' | 'closed'> & {
      deltas: boolean;
      /** Bases older than this get no delta: every entry of the window is newer, so it would be the whole document. */
      basesFromUs?: number;
      hourStartMs?: number;
    },
    prev: RenderingMeta | undefined,
    makeSource: () => Promise<RenderSource>,
  ): Promise<Outcome> {
    const db = this.opts.db;
    const started = performance.now();
    // A delta from a base older than the window is the whole document, a second compression of it for
    // nothing (a 5-minute shortChanges.xml with a 15-minute PUBLISH_DELTA_WINDOW ran its delta streams to the
    // end on every render): such validators get the full 200, as after PUBLISH_DELTA_WINDOW.
    const oldestBaseUs = Math.max(spec.cursorUs - this.opts.deltaWindowSec * 1_000_000, spec.basesFromUs ?? -Infinity);
    const bases = spec.deltas ? await recentRenderings(db, spec.path, oldestBaseUs, MAX_DELTA_BASES - 1) : [];
    const id = await createRendering(db, spec);
    if (spec.deltas) {
      // The rendering is a base for itself: `?since=` its own cursor gives what came in while rendering.
      bases.push({ id, cursorUs: spec.cursorUs });
      bases.sort((a, b) => b.cursorUs - a.cursorUs || b.id - a.id);
    }
    try {
      const result = await runPipeline(await makeSource(), {
        q: db,
        renderingId: id,
        expectedBytes: prev?.identityLength ?? 0,
        bases,
        publishDir: this.opts.publishDir,
        relPath: spec.path.slice(1),
      });
      if (prev && prev.sha256 === result.sha256 && prev.closed === spec.closed) {
        // Same bytes (a closed hour rendered again): keep the current rendering and its validators.
        result.discardFiles();
        await discardRendering(db, id);
        return 'identical';
      }
      const ms = performance.now() - started;
      await completeRendering(db, {
        id,
        path: spec.path,
        document: spec.document,
        closed: spec.closed,
        renderMs: ms,
        hourStartMs: spec.hourStartMs,
        ...result,
      });
      result.commitFiles();
      this.opts.onPublished?.(spec.path);
      return {
        path: spec.path,
        document: spec.document,
        id,
        entries: result.entries,
        closed: spec.closed,
        identityLength: result.identityLength,
        gzipLength: result.gzipLength,
        brLength: result.brLength,
        ms,
      };
    } catch (err) {
      await discardRendering(db, id).catch(() => undefined);
      throw err;
    }
  }
}
