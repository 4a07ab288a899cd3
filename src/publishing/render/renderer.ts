// Owns rendering on a schedule and reading back what was rendered: the render tick (under an advisory lock,
// so one instance renders at a time and every instance serves what it stored), the live documents, the
// current hour's archive, closing finished hours once (catching up on hours missed while down), pruning,
// and the bytes a response sends (cached in memory when small, streamed from the database when not).
import { Readable, pipeline } from 'node:stream';
import zlib from 'node:zlib';
import { promisify } from 'node:util';
import type { Db, Queryable } from '../../platform/db/database.js';
import { brotliTail, gzipTail, tailLength, type Encoding } from '../codec.js';
import {
  ARCHIVE_DOCUMENT,
  HOUR_MS,
  archivePath,
  archiveSource,
  archiveStats,
  hourStart,
  type LiveDocument,
  type RenderWindow,
  type TickShared,
} from '../documents/documents.js';
import {
  CHUNK_BYTES,
  analyzeSources,
  beginSnapshot,
  completeRendering,
  createRendering,
  currentRendering,
  deleteVariant,
  discardRendering,
  endSnapshot,
  findDelta,
  firstPingUs,
  getWatermark,
  prune,
  readChunks,
  readClock,
  recentRenderings,
  setWatermark,
  totalPings,
  type Clock,
  type DeltaCut,
  type RenderingMeta,
  type Variant,
} from '../rendering-store.js';
import { runPipeline, type RenderSource } from './pipeline.js';
import { CONTENT_TYPE } from '../documents/weblog-updates.js';

const gunzip = promisify(zlib.gunzip);

/** Advisory lock held while rendering: one renderer among all instances sharing the database. */
export const RENDER_LOCK = 0x70756221; // 'pub!'
/** Most delta bases kept per rendering (bounds the flush points written). */
export const MAX_DELTA_BASES = 256;
const CLOSED_WATERMARK = 'archives_closed_before';
/** The embedded database's statistics are refreshed this often (it has no autovacuum). */
const ANALYZE_EVERY_MS = 10 * 60_000;
/** The current hour is re-rendered every tick until one rendering takes this long; then ~10% of the time. */
const THROTTLE_FROM_MS = 1000;
/** Superseded renderings keep their bytes this long, for responses still streaming them. */
const GRACE_SEC = 120;
/** Bodies up to this size are kept in memory; larger ones are streamed from the database. */
const CACHE_ENTRY_MAX = 4 << 20;
const CACHE_TOTAL_MAX = 64 << 20;

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

export interface PublisherOptions {
  db: Db;
  log: Logger;
  /** Seconds between renders (derived from RENDER_CRON): the max-age of live documents. */
  cadenceSec: number;
  /** Validators naming a rendering older than this get the full document, not a delta. */
  deltaWindowSec: number;
  /** How long the current rendering of a path is remembered before asking the database again. */
  pointerTtlMs: number;
  publishDir?: string;
  metrics?: PublishMetricsSink;
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

class LruBytes {
  private map = new Map<string, Buffer>();
  private total = 0;
  constructor(private readonly max: number) {}
  get(k: string): Buffer | undefined {
    const v = this.map.get(k);
    if (v) {
      this.map.delete(k);
      this.map.set(k, v);
    }
    return v;
  }
  set(k: string, v: Buffer): void {
    if (v.length > this.max) return;
    const old = this.map.get(k);
    if (old) this.total -= old.length;
    this.map.set(k, v);
    this.total += v.length;
    for (const [key, b] of this.map) {
      if (this.total <= this.max) break;
      this.map.delete(key);
      this.total -= b.length;
    }
  }
}

export class Publisher {
  readonly documents: LiveDocument[] = [];
  private chain: Promise<unknown> = Promise.resolve();
  private busy = false;
  private closed = false;
  private readonly pointers = new Map<string, { meta: RenderingMeta | undefined; at: number }>();
  private readonly pointerLoads = new Map<string, Promise<RenderingMeta | undefined>>();
  private readonly deltaCuts = new Map<string, DeltaCut | null>();
  private readonly bodies = new LruBytes(CACHE_TOTAL_MAX);
  private analyzedAt = -Infinity;

  constructor(readonly opts: PublisherOptions) {}

  /** Adds a live document (before the app is ready: its route is registered by the plugin). */
  register(doc: LiveDocument): void {
    if (this.documents.some((d) => d.path === doc.path || d.name === doc.name)) throw new Error(`document ${doc.path} is already registered`);
    if (!doc.path.startsWith('/')) throw new Error(`document path must start with /: ${doc.path}`);
    this.documents.push(doc);
  }

  document(path: string): LiveDocument | undefined {
    return this.documents.find((d) => d.path === path);
  }

  // -------------------------------------------------------------------------------------------------------
  // Rendering

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
        const t: RenderTime = { nowUs: opts.now ? opts.now.getTime() * 1000 : clock.nowUs, injected: Boolean(opts.now), clock };
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

  private serialised<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(async () => {
      this.busy = true;
      try {
        return await fn();
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
    const t: RenderTime = { nowUs: opts.now ? opts.now.getTime() * 1000 : clock.nowUs, injected: Boolean(opts.now), clock };
    if (this.opts.db.kind === 'pglite' && performance.now() - this.analyzedAt > ANALYZE_EVERY_MS) {
      try {
        await analyzeSources(q);
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

    for (const doc of this.documents) {
      await attempt(doc.path, doc.name, () => this.renderLive(q, doc, t, shared, Boolean(opts.force)));
    }
    if (opts.liveOnly) return report;
    const current = hourStart(t.nowUs / 1000);
    await attempt(archivePath(current), ARCHIVE_DOCUMENT, () => this.renderArchive(q, current, { closed: false, t, force: Boolean(opts.force) }));
    try {
      report.closedHours = await this.closeHours(q, t, opts.closeBudgetMs ?? Infinity, attempt);
    } catch (err) {
      // Finding the hours to close failed (the watermark or first-ping query): the live documents are done.
      report.failed.push({ path: 'finished hours', error: (err as Error).message });
      this.opts.log.error({ err: { message: (err as Error).message } }, 'rendering failed');
    }
    try {
      await prune(this.opts.db, GRACE_SEC, this.opts.deltaWindowSec + GRACE_SEC);
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
    const windowAt = (nowUs: number, updatedMs: number): RenderWindow => ({ updatedMs, toUs: nowUs, fromUs: nowUs - doc.windowSec * 1_000_000 });
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
        { path: doc.path, document: doc.name, contentType: doc.contentType, updatedMs: w.updatedMs, cursorUs: cursorFor(t, w.toUs), fingerprint, closed: false, deltas: doc.deltas },
        prev,
        () => doc.source(q, w, shared),
      );
    });
  }

  /**
   * Last-Modified must move forward with every new rendering and never be ahead of the clock: when the
   * previous rendering is from this same second, wait for the next one (manual renders only; the schedule
   * is at most once a second). Injected times (tests) are moved instead.
   */
  private async afterPrevious(prev: RenderingMeta | undefined, t: RenderTime): Promise<{ nowUs: number; updatedMs: number } | null> {
    if (!prev || prev.updatedMs < wholeSecond(t.nowUs)) return null;
    const next = prev.updatedMs + 1000;
    const waitMs = next - t.nowUs / 1000;
    if (!t.injected && waitMs > 0 && waitMs <= 1100) await new Promise((r) => setTimeout(r, Math.ceil(waitMs)));
    return { nowUs: Math.max(t.nowUs, next * 1000), updatedMs: next };
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
    return this.withSnapshot(q, async () => {
      let f = frame(o.t.nowUs, wholeSecond(o.t.nowUs));
      let stats = await archiveStats(q, startMs, f.toUs);
      const print = () => `${stats.n}:${stats.maxId}:${o.closed ? 'closed' : 'open'}`;
      if (!o.force && prev && prev.fingerprint === print()) return 'unchanged';
      const later = o.closed || prev?.closed ? null : await this.afterPrevious(prev, o.t);
      if (later) {
        f = frame(later.nowUs, later.updatedMs);
        stats = await archiveStats(q, startMs, f.toUs);
      }
      const { updatedMs, toUs } = f;
      return this.store(
        { path, document: ARCHIVE_DOCUMENT, contentType: CONTENT_TYPE, updatedMs, cursorUs: cursorFor(o.t, toUs), fingerprint: print(), closed: o.closed, deltas: false, hourStartMs: startMs },
        prev,
        async () => archiveSource(q, startMs, toUs, updatedMs, stats),
      );
    });
  }

  /** Closes (renders for the last time) every finished hour not yet closed, oldest first, within a budget. */
  private async closeHours(q: Queryable, t: RenderTime, budgetMs: number, attempt: (path: string, document: string, fn: () => Promise<Outcome>) => Promise<boolean>): Promise<number> {
    const db = this.opts.db;
    let nextUs = await getWatermark(db, CLOSED_WATERMARK);
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
      const ok = await attempt(archivePath(startMs), ARCHIVE_DOCUMENT, () => this.renderArchive(q, startMs, { closed: true, t, force: false }));
      if (!ok) break; // retried next tick; later hours wait so none is skipped
      nextUs += HOUR_MS * 1000;
      await setWatermark(db, CLOSED_WATERMARK, nextUs);
      closed++;
    }
    return closed;
  }

  private async store(
    spec: { path: string; document: string; contentType: string; updatedMs: number; cursorUs: number; fingerprint: string; closed: boolean; deltas: boolean; hourStartMs?: number },
    prev: RenderingMeta | undefined,
    makeSource: () => Promise<RenderSource>,
  ): Promise<Outcome> {
    const db = this.opts.db;
    const started = performance.now();
    const bases = spec.deltas ? await recentRenderings(db, spec.path, spec.cursorUs - this.opts.deltaWindowSec * 1_000_000, MAX_DELTA_BASES - 1) : [];
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
      if (!result.identityStored) await deleteVariant(db, id, 'identity');
      if (prev && prev.sha256 === result.sha256 && prev.closed === spec.closed) {
        // Same bytes (a closed hour rendered again): keep the current rendering and its validators.
        result.discardFiles();
        await discardRendering(db, id);
        return 'identical';
      }
      const ms = performance.now() - started;
      await completeRendering(db, { id, path: spec.path, document: spec.document, closed: spec.closed, renderMs: ms, hourStartMs: spec.hourStartMs, ...result });
      result.commitFiles();
      this.pointers.delete(spec.path);
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

  // -------------------------------------------------------------------------------------------------------
  // Reading back

  /** The current rendering of `path` (remembered for pointerTtlMs; concurrent lookups share one query). */
  async current(path: string): Promise<RenderingMeta | undefined> {
    const hit = this.pointers.get(path);
    if (hit && Date.now() - hit.at < this.opts.pointerTtlMs) return hit.meta;
    let load = this.pointerLoads.get(path);
    if (!load) {
      load = currentRendering(this.opts.db, path).finally(() => this.pointerLoads.delete(path));
      this.pointerLoads.set(path, load);
    }
    let meta: RenderingMeta | undefined;
    try {
      meta = await load;
    } catch (err) {
      // The database is unavailable: keep serving the last rendering this instance knew of (its bytes are
      // in memory once served) rather than failing every crawler until the database is back.
      if (hit) return hit.meta;
      throw err;
    }
    if (this.opts.pointerTtlMs > 0) this.pointers.set(path, { meta, at: Date.now() });
    return meta;
  }

  /** The delta cut from `baseId` recorded with rendering `meta`, if that base is known and recent. */
  async deltaCut(meta: RenderingMeta, baseId: number, baseCursorUs: number): Promise<DeltaCut | undefined> {
    const key = `${meta.id}:${baseId}`;
    let cut = this.deltaCuts.get(key);
    if (cut === undefined) {
      try {
        cut = (await findDelta(this.opts.db, meta.id, baseId)) ?? null;
      } catch {
        return undefined; // database unavailable: the full document instead of a delta (not remembered)
      }
      if (this.deltaCuts.size >= 4096) this.deltaCuts.clear();
      this.deltaCuts.set(key, cut);
    }
    // A tag with the right id but another cursor is not ours (another database, or forged).
    return cut && cut.baseCursorUs === baseCursorUs ? cut : undefined;
  }

  /** Length of the full document in a coding. */
  fullLength(meta: RenderingMeta, enc: Encoding): number {
    return enc === 'identity' ? meta.identityLength : enc === 'gzip' ? meta.gzipLength : meta.brLength;
  }

  /** The full document in a coding: a Buffer when small enough to keep, else a stream from the database. */
  async fullBody(meta: RenderingMeta, enc: Encoding): Promise<Buffer | Readable> {
    if (enc === 'identity' && !meta.identityStored) {
      // Identity of a big document is not stored: decompress the stored gzip (never compress per request).
      const out = zlib.createGunzip();
      pipeline(this.variantStream(meta.id, 'gzip', meta.gzipLength), out, () => undefined); // errors destroy `out`
      return out;
    }
    const variant: Variant = enc;
    const length = this.fullLength(meta, enc);
    if (length > CACHE_ENTRY_MAX) return this.variantStream(meta.id, variant, length);
    const key = `${meta.id}:${variant}`;
    let b = this.bodies.get(key);
    if (!b) {
      b = await this.readRange(meta.id, variant, length);
      this.bodies.set(key, b);
    }
    return b;
  }

  /** Length of a delta body in a coding. */
  deltaLength(meta: RenderingMeta, cut: DeltaCut, enc: Encoding): number {
    if (enc === 'identity') return cut.identityEnd + meta.footer.length;
    return (enc === 'gzip' ? cut.gzipEnd : cut.brEnd) + tailLength(enc, meta.footer.length);
  }

  /** A delta body: the stored prefix of the delta stream, plus the footer and end of stream (codec.ts). */
  async deltaBody(meta: RenderingMeta, cut: DeltaCut, enc: Encoding): Promise<Buffer> {
    const key = `${meta.id}:d${cut.baseId}:${enc}`;
    const hit = this.bodies.get(key);
    if (hit) return hit;
    let body: Buffer;
    if (enc === 'gzip') {
      body = Buffer.concat([await this.readRange(meta.id, 'dgzip', cut.gzipEnd), gzipTail(meta.footer, cut.gzipCrc, cut.identityEnd)]);
    } else if (enc === 'br') {
      body = Buffer.concat([await this.readRange(meta.id, 'dbr', cut.brEnd), brotliTail(meta.footer)]);
    } else if (meta.identityStored) {
      body = Buffer.concat([await this.readRange(meta.id, 'identity', cut.identityEnd), meta.footer]);
    } else {
      body = await gunzip(await this.deltaBody(meta, cut, 'gzip'));
    }
    this.bodies.set(key, body);
    return body;
  }

  private async readRange(id: number, variant: Variant, end: number): Promise<Buffer> {
    if (end === 0) return Buffer.alloc(0);
    const chunks = await readChunks(this.opts.db, id, variant, 0, Math.floor((end - 1) / CHUNK_BYTES));
    const all = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    return all.subarray(0, end);
  }

  private variantStream(id: number, variant: Variant, length: number): Readable {
    const db = this.opts.db;
    const last = Math.max(0, Math.ceil(length / CHUNK_BYTES) - 1);
    async function* chunks() {
      for (let seq = 0; seq <= last; seq++) {
        const [c] = await readChunks(db, id, variant, seq, seq);
        yield c;
      }
    }
    return Readable.from(chunks(), { objectMode: false });
  }
}

/** When a render happens: the time it renders as of (the database clock unless a test injected one). */
interface RenderTime {
  nowUs: number;
  injected: boolean;
  clock: Clock;
}

function wholeSecond(us: number): number {
  return Math.floor(us / 1_000_000) * 1000;
}

/**
 * The cursor of a rendering covering pings up to `toUs`: no later than the oldest transaction still open
 * (a ping it writes is stamped with its start but visible only at commit), so a delta from this rendering
 * cannot miss a ping that commits later with an earlier stamp.
 */
function cursorFor(t: RenderTime, toUs: number): number {
  return Math.min(t.clock.nowUs, t.clock.oldestOpenUs ?? Infinity, toUs);
}

/** Hours ending at or before this (µs) can be closed: no transaction that could still add a ping to them is open. */
function closeLimitUs(t: RenderTime): number {
  return Math.min(t.clock.nowUs, t.clock.oldestOpenUs ?? Infinity, t.nowUs);
}
