// Owns the hourly archives, /YYYY/MM/DD/HH.xml (UTC): every ping of one hour, oldest first, not
// de-duplicated, in the weblogUpdates format; their paths and the renderer's source for one hour, read from
// the database or, for the open hour, from the pings kept between its renders (hour-cache.ts).
import type { Queryable } from '../../platform/db/database.js';
import type { After, HourStats, PingPageRow } from '../../intake/ping/window-repository.js';
import { listingReads, type ListingReads } from './listing.js';
import { prefetch, type Entry, type RenderSource } from './document.js';
import { WEBLOG_UPDATES_FOOT, weblogElement, weblogElementFrom, weblogUpdatesHead } from './weblog-updates.js';
import type { KeptEntries } from './kept-entries.js';

/** Archives are read in pages: a page's rows live across the database round trip. */
export const ARCHIVE_PAGE_ROWS = 2000;
/**
 * On the embedded database a page is a statement intake's pings wait behind (one session): the open hour's
 * archive is read whole on each of its renders, and at 120k pings in the hour pages of 2000 held the engine
 * up to 76 ms each (500: 20 ms) for the same read time alone (1.9 s), while intake's p99 rose to 0.5 s in the
 * soak's windows that held such a render. But each statement of a render also waits its turn behind intake
 * (BACKGROUND_MAX_WAIT_MS): under 200 pings/s pages of 500 made that render 11–17 s, longer than a tick.
 */
export const EMBEDDED_ARCHIVE_PAGE_ROWS = 1000;

export const archivePageRows = (kind: 'postgres' | 'pglite'): number =>
  kind === 'pglite' ? EMBEDDED_ARCHIVE_PAGE_ROWS : ARCHIVE_PAGE_ROWS;
export const HOUR_MS = 3_600_000;
export const ARCHIVE_DOCUMENT = 'archive';

export function hourStart(ms: number): number {
  return Math.floor(ms / HOUR_MS) * HOUR_MS;
}

const pad = (n: number) => String(n).padStart(2, '0');

export function archivePath(hourStartMs: number): string {
  const d = new Date(hourStartMs);
  return `/${d.getUTCFullYear()}/${pad(d.getUTCMonth() + 1)}/${pad(d.getUTCDate())}/${pad(d.getUTCHours())}.xml`;
}

/** The hour an archive path names, or null when it is not a real UTC hour. */
export function parseArchivePath(year: string, month: string, day: string, hour: string): number | null {
  const y = Number(year);
  const mo = Number(month);
  const d = Number(day);
  const h = Number(hour);
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23) return null;
  const ms = Date.UTC(y, mo - 1, d, h);
  const back = new Date(ms);
  if (back.getUTCMonth() !== mo - 1 || back.getUTCDate() !== d) return null; // 2026-02-30
  return ms;
}

/** `2026-11-22T08` (the CLI's --hour) → hour start in ms, or null. */
export function parseHourArg(s: string): number | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2})$/.exec(s.trim());
  return m ? parseArchivePath(m[1], m[2], m[3], m[4]) : null;
}

export async function archiveStats(q: Queryable, startMs: number, toUs: number, reads: ListingReads = listingReads()): Promise<HourStats> {
  return reads.hourStats(q, startMs * 1000, toUs);
}

/**
 * An hour's archive: `updated` is what the caller dates it by (hours.ts: the end of the hour, also while it
 * grows, so re-rendering a closed hour gives the same bytes and an entry's bytes never change); `when` counts
 * back from it; `count` is the number of pings in the archive. Pages are bounded by the highest id seen when
 * counting, so count and entries agree.
 */
export function archiveSource(
  q: Queryable,
  startMs: number,
  toUs: number,
  updatedMs: number,
  stats: HourStats,
  reads: ListingReads = listingReads(),
  pageRows = ARCHIVE_PAGE_ROWS,
): RenderSource {
  async function* pages(): AsyncIterable<Entry[]> {
    if (stats.n === 0) return;
    const read = (after: After | null) => prefetch(reads.hourPage(q, startMs * 1000, toUs, stats.maxId, after, pageRows));
    // As for the live documents: the next page is read while this one is written (changes.ts).
    let next: Promise<PingPageRow[]> | null = read(null);
    while (next) {
      const rows: PingPageRow[] = await next;
      if (rows.length === 0) return;
      const last = rows[rows.length - 1];
      const n = rows.length;
      next = n < pageRows ? null : read({ atUs: last.at_us, id: last.id });
      // No deltas on archives: one string per page (see Entry.count).
      let xml = '';
      for (const r of rows) xml += weblogElement({ name: r.name, url: r.url, rssUrl: r.rss_url, atMs: r.at_us / 1000 }, updatedMs);
      rows.length = 0;
      yield [{ xml, atUs: last.at_us, count: n }];
    }
  }
  return { head: weblogUpdatesHead(new Date(updatedMs), stats.n), pages: pages(), foot: WEBLOG_UPDATES_FOOT, entries: stats.n };
}

/** The pings kept by the hour cache as the same document archiveSource reads from the database. */
export function keptArchiveSource(pings: KeptEntries, updatedMs: number, pageRows = ARCHIVE_PAGE_ROWS): RenderSource {
  async function* pages(): AsyncIterable<Entry[]> {
    for (let i = 0; i < pings.length; i += pageRows) {
      const end = Math.min(i + pageRows, pings.length);
      let xml = '';
      for (let j = i; j < end; j++) xml += weblogElementFrom(pings.start(j), pings.atUs(j) / 1000, updatedMs);
      yield [{ xml, atUs: pings.atUs(end - 1), count: end - i }];
    }
  }
  return { head: weblogUpdatesHead(new Date(updatedMs), pings.length), pages: pages(), foot: WEBLOG_UPDATES_FOOT, entries: pings.length };
}

/** The pings of an hour up to a render time, from the cache: what archiveStats and the pages would read. */
export interface KeptHour {
  stats: HourStats;
  /** A view of the kept pings: valid until the next call. */
  pings: KeptEntries;
}

/** The pings of the open hour kept between its renders (hour-cache.ts's HourCache). */
export interface OpenHourCache {
  /** The hour's pings received before `toUs`; null when it holds more than the cache keeps. */
  hour(q: Queryable, startMs: number, toUs: number, pageRows: number): Promise<KeptHour | null>;
  /** Drops what is kept (the listed pings changed without a new ping: a weblog removed or restored). */
  forget(): void;
}

/** An hour's pings up to a render time: how many (the rendering's fingerprint), and the document for `updated`. */
export interface ArchiveRead {
  stats: HourStats;
  source(updatedMs: number): RenderSource;
}

/**
 * The pings received in the hour from `startMs` before `toUs`: from `cache` when one is given (the open hour)
 * and it can hold the hour, else read from the database page by page.
 */
export async function readArchive(
  q: Queryable,
  startMs: number,
  toUs: number,
  o: { reads: ListingReads; pageRows: number; cache: OpenHourCache | null },
): Promise<ArchiveRead> {
  const kept = o.cache && (await o.cache.hour(q, startMs, toUs, o.pageRows));
  if (kept) return { stats: kept.stats, source: (updatedMs) => keptArchiveSource(kept.pings, updatedMs) };
  const stats = await archiveStats(q, startMs, toUs, o.reads);
  return { stats, source: (updatedMs) => archiveSource(q, startMs, toUs, updatedMs, stats, o.reads, o.pageRows) };
}
