// Owns the live weblogUpdates documents (weblogs.com's "Retrieving Pings"): changes.xml, the weblogs
// pinged in the last hour, and shortChanges.xml, the last five minutes, newest first.
import type { Queryable } from '../../platform/db/database.js';
import type { WeblogWindowRow } from '../../intake/ping/window-repository.js';
import { listingReads, type ListingReads } from './listing.js';
import { prefetch, type Entry, type LiveDocument, type RenderWindow } from './document.js';
import { CONTENT_TYPE, WEBLOG_UPDATES_FOOT, weblogElement, weblogElementFrom, weblogUpdatesHead } from './weblog-updates.js';
import { WindowCache } from './window-cache.js';
import type { KeptEntries } from './kept-entries.js';

/** Rows read per query while rendering: bounds memory whatever the size of the document. */
export const PAGE_ROWS = 2000;

async function* weblogPages(q: Queryable, w: RenderWindow, reads: ListingReads): AsyncIterable<Entry[]> {
  // The next page is asked for as soon as this one arrives, so the database reads it while this one is
  // escaped and compressed (a render is no longer the sum of its reads and its compression).
  let next: Promise<WeblogWindowRow[]> | null = prefetch(reads.weblogPage(q, w.fromUs, w.toUs, null, PAGE_ROWS));
  while (next) {
    const rows: WeblogWindowRow[] = await next;
    const last = rows[rows.length - 1];
    next = rows.length < PAGE_ROWS ? null : prefetch(reads.weblogPage(q, w.fromUs, w.toUs, { atUs: last.at_us, id: last.id }, PAGE_ROWS));
    if (rows.length === 0) return;
    yield rows.map((r) => ({
      xml: weblogElement({ name: r.name, url: r.url, rssUrl: r.rss_url, atMs: r.at_us / 1000 }, w.updatedMs),
      atUs: r.at_us,
    }));
  }
}

/** The kept weblogs of a window as pages of elements, `when` counted from this rendering's `updated`. */
async function* keptPages(kept: KeptEntries, updatedMs: number): AsyncIterable<Entry[]> {
  for (let i = 0; i < kept.length; i += PAGE_ROWS) {
    const page: Entry[] = [];
    for (let j = i; j < Math.min(i + PAGE_ROWS, kept.length); j++)
      page.push({ xml: weblogElementFrom(kept.start(j), kept.atUs(j) / 1000, updatedMs), atUs: kept.atUs(j) });
    yield page;
  }
}

/**
 * A weblogUpdates document of the weblogs whose latest ping falls in the last `windowSec` seconds, newest
 * first (so `when` ascends), `count` = every ping ever accepted. Under the `verified` listing, a weblog's
 * latest verified ping is what counts. When the listing can be followed (every accepted ping is listed),
 * the window's weblogs are kept between renders and only what changed is read (window-cache.ts).
 */
export function weblogUpdatesDocument(
  name: string,
  path: string,
  windowSec: number,
  reads: ListingReads = listingReads(),
  maxAgeSec?: number,
  cache: WindowCache | null = windowCacheFor(reads, [windowSec]),
): LiveDocument {
  return {
    name,
    path,
    contentType: CONTENT_TYPE,
    windowSec,
    deltas: true,
    maxAgeSec,
    async fingerprint(q, w, shared) {
      // Any accepted ping raises the total; an entry leaving the window lowers n: either changes bytes.
      // The same string whether the window is kept or read, so switching between the two renders nothing.
      const kept = cache && (await cache.window(q, w));
      const s = kept ? { n: kept.length, maxUs: kept.length > 0 ? kept.atUs(0) : 0 } : await reads.weblogStats(q, w.fromUs, w.toUs);
      return `${await shared.total()}:${s.n}:${s.maxUs}`;
    },
    async source(q, w, shared) {
      const head = weblogUpdatesHead(new Date(w.updatedMs), await shared.total());
      const kept = cache && (await cache.window(q, w));
      // One entry per weblog, whichever way it is read.
      if (kept)
        return {
          head,
          pages: keptPages(kept, w.updatedMs),
          foot: WEBLOG_UPDATES_FOOT,
          entries: kept.length,
          distinct: true,
          inMemory: true,
        };
      const { n } = await reads.weblogStats(q, w.fromUs, w.toUs);
      return { head, pages: weblogPages(q, w, reads), foot: WEBLOG_UPDATES_FOOT, entries: n, distinct: true };
    },
    forget: () => cache?.forget(),
  };
}

/**
 * weblogs.com: "you shouldn't pull the changes.xml file too frequently, but should rather use the
 * shortChanges.xml when you need updates as frequently as every 5 minutes". So the hour's document, the
 * dearest to render (every weblog of the hour), may be up to a minute old when rendering it takes a second
 * or more; shortChanges.xml is rendered on every tick.
 */
export const CHANGES_MAX_AGE_SEC = 60;

/** The cache of a listing's windows, when the listing can be followed (window-cache.ts). */
export function windowCacheFor(reads: ListingReads, windowsSec: number[]): WindowCache | null {
  return reads.follow ? new WindowCache({ ...reads, follow: reads.follow }, windowsSec) : null;
}

export const CHANGES_WINDOW_SEC = 3600;
export const SHORT_CHANGES_WINDOW_SEC = 300;

/** The hour's document is paced (render/paced.ts); the five minutes render whole at every tick. */
export const changesDocument = (reads: ListingReads = listingReads(), cache?: WindowCache | null): LiveDocument => ({
  ...weblogUpdatesDocument('changes.xml', '/changes.xml', CHANGES_WINDOW_SEC, reads, CHANGES_MAX_AGE_SEC, cache),
  paced: true,
});
export const shortChangesDocument = (reads: ListingReads = listingReads(), cache?: WindowCache | null): LiveDocument =>
  weblogUpdatesDocument('shortChanges.xml', '/shortChanges.xml', SHORT_CHANGES_WINDOW_SEC, reads, undefined, cache);

/** changes.xml and shortChanges.xml sharing one kept window (the five minutes are part of the hour). */
export function changesDocuments(reads: ListingReads = listingReads()): LiveDocument[] {
  const cache = windowCacheFor(reads, [CHANGES_WINDOW_SEC, SHORT_CHANGES_WINDOW_SEC]);
  return [changesDocument(reads, cache), shortChangesDocument(reads, cache)];
}
