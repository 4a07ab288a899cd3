// Owns WHAT is published: the live documents (changes.xml: weblogs pinged in the last hour; shortChanges.xml:
// the last 5 minutes) and the hourly archives (every ping of one UTC hour), as renderers that read pages of
// rows and produce a head, entries and a foot (seed 000, "Retrieving Pings"). How they are stored, served
// and delta-encoded is the same for every document (publisher.ts, serve.ts).
import type { Queryable } from '../../platform/db/database.js';
import { hourPage, hourStats, weblogWindowPage, weblogWindowStats, type HourStats } from '../rendering-store.js';
import type { Entry, RenderSource } from '../render/pipeline.js';
import { CONTENT_TYPE, WEBLOG_UPDATES_FOOT, weblogElement, weblogUpdatesHead } from './weblog-updates.js';

/** Rows read per query while rendering: bounds memory whatever the size of the document. */
export const PAGE_ROWS = 2000;
/** Archives are read in smaller pages: a page's rows live across the database round trip. */
export const ARCHIVE_PAGE_ROWS = 2000;

/** The time frame of one rendering. */
export interface RenderWindow {
  /** The document's `updated` time and Last-Modified: whole seconds, in ms. */
  updatedMs: number;
  /** Entries pinged in (fromUs, toUs] belong to the document (toUs = updatedMs in µs). */
  fromUs: number;
  toUs: number;
}

/** Values computed once per render tick and shared by the documents that need them. */
export interface TickShared {
  /** Total pings ever accepted (sum of weblogs.ping_count). */
  total(): Promise<number>;
}

/**
 * A live document: re-rendered on every tick of RENDER_CRON when what it is made from changed, served with
 * conditional GET, pre-compressed codings and — when `deltas` — RFC 3229 feed deltas and `?since=`.
 * Another document (e.g. RSS Ping's /updates.xml) plugs in by implementing this and calling
 * `app.publisher.register(doc)` before the app is ready (see README, "Publishing").
 */
export interface LiveDocument {
  /** Metrics label and log name, e.g. 'changes.xml'. */
  name: string;
  /** Where it is served, e.g. '/changes.xml'. */
  path: string;
  contentType: string;
  /** Entries pinged in the last `windowSec` seconds. */
  windowSec: number;
  /** Serve RFC 3229 feed deltas (entries must then come newest first, each with its time). */
  deltas: boolean;
  /**
   * A cheap signature of the state the document is rendered from: when it equals the current rendering's,
   * nothing is rendered (the bytes, ETag and Last-Modified stay, so pollers get 304).
   */
  fingerprint(q: Queryable, w: RenderWindow, shared: TickShared): Promise<string>;
  /** The document itself; pages are read lazily, so memory stays flat. */
  source(q: Queryable, w: RenderWindow, shared: TickShared): Promise<RenderSource>;
}

async function* weblogPages(q: Queryable, w: RenderWindow): AsyncIterable<Entry[]> {
  let after: { atUs: number; id: number } | null = null;
  for (;;) {
    const rows = await weblogWindowPage(q, w.fromUs, w.toUs, after, PAGE_ROWS);
    if (rows.length === 0) return;
    yield rows.map((r) => ({
      xml: weblogElement({ name: r.name, url: r.url, rssUrl: r.rss_url, atMs: r.at_us / 1000 }, w.updatedMs),
      atUs: r.at_us,
    }));
    if (rows.length < PAGE_ROWS) return;
    const last = rows[rows.length - 1];
    after = { atUs: last.at_us, id: last.id };
  }
}

/**
 * A weblogUpdates document of the weblogs whose latest ping falls in the last `windowSec` seconds, newest
 * first (so `when` ascends), `count` = every ping ever accepted.
 */
export function weblogUpdatesDocument(name: string, path: string, windowSec: number): LiveDocument {
  return {
    name,
    path,
    contentType: CONTENT_TYPE,
    windowSec,
    deltas: true,
    async fingerprint(q, w, shared) {
      // Any accepted ping raises the total; an entry leaving the window lowers n: either changes bytes.
      const s = await weblogWindowStats(q, w.fromUs, w.toUs);
      return `${await shared.total()}:${s.n}:${s.maxUs}`;
    },
    async source(q, w, shared) {
      const { n } = await weblogWindowStats(q, w.fromUs, w.toUs);
      return { head: weblogUpdatesHead(new Date(w.updatedMs), await shared.total()), pages: weblogPages(q, w), foot: WEBLOG_UPDATES_FOOT, entries: n };
    },
  };
}

export const CHANGES = (): LiveDocument => weblogUpdatesDocument('changes.xml', '/changes.xml', 3600);
export const SHORT_CHANGES = (): LiveDocument => weblogUpdatesDocument('shortChanges.xml', '/shortChanges.xml', 300);

/** The live documents every instance publishes (the plugin registers them; so does `pingd render`). */
export function defaultDocuments(): LiveDocument[] {
  return [CHANGES(), SHORT_CHANGES()];
}

// ---------------------------------------------------------------------------------------------------------
// Hourly archives: /YYYY/MM/DD/HH.xml (UTC), every ping of the hour, oldest first, not de-duplicated.

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

export async function archiveStats(q: Queryable, startMs: number, toUs: number): Promise<HourStats> {
  return hourStats(q, startMs * 1000, toUs);
}

/**
 * An hour's archive: `updated` is the end of the hour once it is closed (so re-rendering a closed hour gives
 * the same bytes) or the render time while it grows; `when` counts back from it; `count` is the number of
 * pings in the archive. Pages are bounded by the highest id seen when counting, so count and entries agree.
 */
export function archiveSource(q: Queryable, startMs: number, toUs: number, updatedMs: number, stats: HourStats): RenderSource {
  async function* pages(): AsyncIterable<Entry[]> {
    if (stats.n === 0) return;
    let after: { atUs: number; id: number } | null = null;
    for (;;) {
      const rows = await hourPage(q, startMs * 1000, toUs, stats.maxId, after, ARCHIVE_PAGE_ROWS);
      if (rows.length === 0) return;
      const last = rows[rows.length - 1];
      // No deltas on archives: one string per page (see Entry.count).
      let xml = '';
      for (const r of rows) xml += weblogElement({ name: r.name, url: r.url, rssUrl: r.rss_url, atMs: r.at_us / 1000 }, updatedMs);
      const n = rows.length;
      after = { atUs: last.at_us, id: last.id };
      rows.length = 0;
      yield [{ xml, atUs: last.at_us, count: n }];
      if (n < ARCHIVE_PAGE_ROWS) return;
    }
  }
  return { head: weblogUpdatesHead(new Date(updatedMs), stats.n), pages: pages(), foot: WEBLOG_UPDATES_FOOT, entries: stats.n };
}
