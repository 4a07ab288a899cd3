// Owns the hourly archives' renders: the current hour on each tick (from the open hour's cache when the
// listing can be followed, at most ~10% of the time once it is dear), one hour again on demand, and closing
// every finished hour not yet closed (rendered for the last time from the database), oldest first, within a
// budget, moving the closed-hours watermark past each.
import type { Queryable } from '../../platform/db/database.js';
import { firstPingUs, type HourStats } from '../../intake/ping/window-repository.js';
import {
  ARCHIVE_DOCUMENT,
  HOUR_MS,
  archivePageRows,
  archivePath,
  hourStart,
  readArchive,
  type OpenHourCache,
} from '../documents/archive.js';
import type { ListingReads } from '../documents/listing.js';
import { CONTENT_TYPE } from '../documents/weblog-updates.js';
import { ARCHIVES_CLOSED_WATERMARK, currentRendering, getWatermark, setWatermark } from '../rendering-repository.js';
import { closeLimitUs, cursorFor, THROTTLE_FROM_MS, wholeSecond, type RenderTime } from './render-time.js';
import {
  afterPrevious,
  storeRendering,
  withSnapshot,
  type RenderingBytes,
  type RenderOutcome,
  type StoreOptions,
} from './store-rendering.js';
import type { OpenHourStream } from './open-hour-stream.js';

/**
 * Where an hour's pings are read: the listing's pages and, for the open hour, at most one of its appended
 * stream and its kept pings (renderer.ts chooses; neither: the open hour is read from the pages).
 */
export interface HourReads {
  listing: ListingReads;
  openHour: OpenHourCache | null;
  openStream: OpenHourStream | null;
}

/** Runs one document's render and records its outcome; false when it failed (renderer.ts's attempt). */
export type Attempt = (path: string, document: string, fn: () => Promise<RenderOutcome>) => Promise<boolean>;

export async function renderArchive(
  opts: StoreOptions,
  reads: HourReads,
  q: Queryable,
  startMs: number,
  o: { closed: boolean; t: RenderTime; force: boolean },
): Promise<RenderOutcome> {
  const path = archivePath(startMs);
  const prev = await currentRendering(opts.db, path);
  if (prev?.closed && !o.force) return 'unchanged';
  if (!o.closed && !o.force && prev && !prev.closed) {
    // A big hour takes long to render: render it at most ~10% of the time (the closed rendering is exact).
    const sinceMs = (o.t.clock.nowUs - prev.createdUs) / 1000;
    if (prev.renderMs >= THROTTLE_FROM_MS && sinceMs < 10 * prev.renderMs) return 'throttled';
  }
  const endMs = startMs + HOUR_MS;
  // received_at < toUs: the whole hour once closed, up to the render time while it grows. The document is
  // dated by the end of its hour either way (`updated`; `when` counts back from it), so an entry's bytes never
  // change: the open hour is appended to, and its last rendering lists what the closed one lists. The
  // rendering's Last-Modified is its render time while the hour grows.
  const frame = (nowUs: number, updatedMs: number) =>
    o.closed ? { updatedMs: endMs, toUs: endMs * 1000 } : { updatedMs, toUs: Math.min(endMs * 1000, nowUs + 1) };
  // The open hour is appended to its stream, or rendered whole from its kept pings or the pages; a closing
  // render reads the whole hour (the bytes it keeps for good come from the database itself).
  const stream = o.closed ? null : reads.openStream;
  const read = async (toUs: number): Promise<{ stats: HourStats; bytes: RenderingBytes }> => {
    if (stream) {
      const h = await stream.hour(q, opts.db, startMs, path, {
        toUs,
        sealUs: cursorFor(o.t, toUs),
        current: prev,
        pageRows: archivePageRows(opts.db.kind),
      });
      return { stats: h.stats, bytes: h };
    }
    const a = await readArchive(q, startMs, toUs, {
      reads: reads.listing,
      pageRows: archivePageRows(opts.db.kind),
      cache: o.closed ? null : reads.openHour,
    });
    return { stats: a.stats, bytes: async () => a.source(endMs) };
  };
  return withSnapshot(opts.db, q, async () => {
    let f = frame(o.t.nowUs, wholeSecond(o.t.nowUs));
    let hour = await read(f.toUs);
    const print = () => `${hour.stats.n}:${hour.stats.maxId}:${o.closed ? 'closed' : 'open'}`;
    if (!o.force && prev && prev.fingerprint === print()) return 'unchanged';
    const later = o.closed || prev?.closed ? null : await afterPrevious(prev, o.t);
    if (later) {
      f = frame(later.nowUs, later.updatedMs);
      hour = await read(f.toUs);
    }
    const { updatedMs, toUs } = f;
    return storeRendering(
      opts,
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
      hour.bytes,
    );
  });
}

/** Closes (renders for the last time) every finished hour not yet closed, oldest first, within a budget. */
export async function closeHours(
  opts: StoreOptions,
  reads: HourReads,
  q: Queryable,
  t: RenderTime,
  budgetMs: number,
  attempt: Attempt,
): Promise<number> {
  const db = opts.db;
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
      renderArchive(opts, reads, q, startMs, { closed: true, t, force: false }),
    );
    if (!ok) break; // retried next tick; later hours wait so none is skipped
    nextUs += HOUR_MS * 1000;
    await setWatermark(db, ARCHIVES_CLOSED_WATERMARK, nextUs);
    closed++;
  }
  return closed;
}
