// Owns the weblogs of a live document's window kept between renders: read in full once, then brought up to
// date from the pings committed since the last read (ping ids become visible in id order), so a render of
// shortChanges.xml or changes.xml reads what changed since the previous tick instead of its whole window.
// The bytes are the same as a full read's: the same rows, the same order, the same escaping.
import type { Queryable } from '../../platform/db/database.js';
import type { WeblogWindowRow } from '../../intake/ping/window-repository.js';
import type { ListingReads } from './listing.js';
import type { RenderWindow } from './document.js';
import { weblogStart } from './weblog-updates.js';
import { KeptEntries, type KeptEntry } from './kept-entries.js';

/** A listed weblog as the cache keeps it: its element's escaped start, and the keyset it is ordered by. */
export type KeptWeblog = KeptEntry;

/**
 * Weblogs kept at most (~110 bytes each off the JavaScript heap, kept-entries.ts; ~110 MB at the bound):
 * when changes.xml's hour holds more, only shortChanges.xml's five minutes are kept and the hour is read in
 * full on each of its renders, whole in one tick, as before the cache. A sustained 200 new weblogs/s (the
 * seeds' era's peak) is 720,000 in the hour: kept, changes.xml is rendered from memory a slice per tick
 * (render/paced.ts). At 200,000, the bound until issue 42, that hour was read again at every render (1.5 s
 * of PostgreSQL's CPU of a 2.2 s render, bench/render-tick.ts).
 */
export const WINDOW_CACHE_MAX = 1_000_000;
/** Rows per statement while loading a window and while catching up on pings. */
const LOAD_ROWS = 2000;
const FOLLOW_ROWS = 5000;
/** After a window outgrew the cache, how long to read it in full before trying to keep it again. */
const RETRY_MS = 5 * 60_000;
/** The upper bound of a load: every weblog pinged after `fromUs` (times after the render's are kept for later). */
const FAR_FUTURE_US = Number.MAX_SAFE_INTEGER;
/** Bytes of text no kept entry refers to that are tolerated before the live ones are copied to new blocks. */
const COMPACT_SLACK_BYTES = 4 << 20;

/** The documents' order: newest first by (time, weblog id), as the keyset pages read them. */
const newerFirst = (a: KeptWeblog, b: KeptWeblog): number => b.atUs - a.atUs || b.id - a.id;

/** A row as it is kept: the part of its element that does not depend on the render time, escaped once. */
export const keptWeblog = (r: WeblogWindowRow): KeptWeblog => ({
  id: r.id,
  atUs: r.at_us,
  start: weblogStart({ name: r.name, url: r.url, rssUrl: r.rss_url }),
});

/**
 * `kept` (newest first) with each `changed` weblog in place of its former entry, and nothing at or before
 * `fromUs` (what left the window); a new list on the same text. A weblog's new time can be older than
 * entries kept (a ping's time is its transaction's start, its id is taken at commit), so changes are merged
 * in, not prepended.
 */
export function mergeChanged(kept: KeptEntries, changed: Iterable<KeptWeblog>, fromUs: number): KeptEntries {
  const ids = new Set<number>();
  const fresh: KeptWeblog[] = [];
  for (const e of changed) {
    ids.add(e.id);
    if (e.atUs > fromUs) fresh.push(e);
  }
  fresh.sort(newerFirst);
  const out = new KeptEntries(kept.text, kept.length + fresh.length);
  let j = 0;
  for (let i = 0; i < kept.length; i++) {
    const atUs = kept.atUs(i);
    if (atUs <= fromUs) break; // newest first: the rest left the window too
    const id = kept.id(i);
    if (ids.has(id)) continue;
    for (; j < fresh.length && kept.compareAt(i, fresh[j]) < 0; j++) out.add(fresh[j]); // fresh[j] is newer
    out.pushFrom(kept, i);
  }
  for (; j < fresh.length; j++) out.add(fresh[j]);
  return out;
}

/** The entries of `kept` (newest first) whose time falls in (fromUs, toUs], as a view of it. */
export function inWindow(kept: KeptEntries, fromUs: number, toUs: number): KeptEntries {
  let i = 0;
  while (i < kept.length && kept.atUs(i) > toUs) i++;
  let j = kept.length;
  while (j > i && kept.atUs(j - 1) <= fromUs) j--;
  return kept.view(i, j);
}

/**
 * The weblogs pinged in the last `keepSec` seconds, for every live document of one listing: the documents'
 * windows are all "the latest ping of each weblog, newest first", so the narrower ones (shortChanges.xml's
 * five minutes) are a part of the widest (changes.xml's hour), and one copy serves them all.
 */
export class WindowCache {
  private kept: KeptEntries | null = null;
  /** The last ping id the kept entries account for. */
  private lastId = 0;
  /** Weblogs pinged at or before this are not kept: a window reaching further back needs a new load. */
  private keptFromUs = Infinity;
  private readonly widestSec: number;
  private readonly narrowestSec: number;
  /** What is kept now: the widest window, or the narrowest while the widest holds more than `max`. */
  private keepSec: number;
  private retryAt = 0;
  /** The render time the kept entries were last brought up to date for. */
  private syncedToUs = -Infinity;

  /** `windowsSec`: the windows of the documents it serves. */
  constructor(
    private readonly reads: ListingReads & { follow: NonNullable<ListingReads['follow']> },
    windowsSec: number[],
    private readonly max = WINDOW_CACHE_MAX,
  ) {
    this.widestSec = Math.max(...windowsSec);
    this.narrowestSec = Math.min(...windowsSec);
    this.keepSec = this.widestSec;
  }

  /**
   * Drops what is kept: the next render reads its window in full. Following pings only adds; a weblog the
   * operator removed (or restored) changes what the reads list without a ping, so it must be read again.
   */
  forget(): void {
    this.kept = null;
  }

  /**
   * The weblogs of window `w`, newest first, up to date with every ping committed before this call; null
   * when the window holds more weblogs than the cache keeps (the caller reads it in full).
   */
  async window(q: Queryable, w: RenderWindow): Promise<KeptEntries | null> {
    if (this.keepSec < this.widestSec && performance.now() >= this.retryAt) {
      this.keepSec = this.widestSec; // try to keep the widest window again
      this.kept = null;
    }
    const keepFromUs = w.toUs - this.keepSec * 1_000_000;
    if (w.fromUs < keepFromUs) return null; // wider than what is kept now
    if (this.kept && w.fromUs < this.keptFromUs) this.kept = null; // further back than what is kept (time went back)
    // A render asks twice (its fingerprint, then its entries) and both documents ask in one tick: one
    // catch-up per render time, so a document's fingerprint and its bytes come from the same state.
    if (this.kept && this.syncedToUs !== w.toUs && !(await this.catchUp(q, keepFromUs))) this.kept = null;
    if (!this.kept && !(await this.load(q, keepFromUs))) {
      this.retryAt = performance.now() + RETRY_MS;
      if (this.keepSec === this.narrowestSec) return null;
      // Too many weblogs in the widest window: keep the narrowest for a while (shortChanges.xml stays cheap).
      this.keepSec = this.narrowestSec;
      return this.window(q, w);
    }
    this.syncedToUs = w.toUs;
    return inWindow(this.kept!, w.fromUs, w.toUs);
  }

  private async load(q: Queryable, fromUs: number): Promise<boolean> {
    // The last id first: a weblog that changes while the pages are read (and so may be read before its
    // change, or skipped as it moves up past the pages already read) has a ping after it, which the next
    // catch-up reads. On PostgreSQL the render's snapshot makes the two agree exactly.
    const lastId = await this.reads.follow.lastId(q);
    const kept = new KeptEntries();
    let rows: WeblogWindowRow[] = [];
    do {
      const last = rows[rows.length - 1];
      rows = await this.reads.weblogPage(q, fromUs, FAR_FUTURE_US, last ? { atUs: last.at_us, id: last.id } : null, LOAD_ROWS);
      for (const r of rows) kept.add(keptWeblog(r));
      if (kept.length > this.max) return false;
    } while (rows.length === LOAD_ROWS);
    this.kept = kept;
    this.lastId = lastId;
    this.keptFromUs = fromUs;
    return true;
  }

  /** Brings the kept entries up to date; false when a fresh load is the cheaper way (or they outgrew the cache). */
  private async catchUp(q: Queryable, fromUs: number): Promise<boolean> {
    const changed = new Map<number, KeptWeblog>();
    let lastId = this.lastId;
    let pings = 0;
    for (;;) {
      const c = await this.reads.follow.changedAfter(q, lastId, FOLLOW_ROWS);
      // Later statements see later rows: the last read of a weblog wins.
      for (const r of c.weblogs) changed.set(r.id, keptWeblog(r));
      lastId = c.lastId;
      pings += c.pings;
      if (pings > this.max) return false;
      if (c.pings < FOLLOW_ROWS) break;
    }
    const keptFromUs = Math.max(this.keptFromUs, fromUs);
    const old = this.kept!;
    const kept =
      changed.size === 0 && old.length > 0 && old.atUs(old.length - 1) > keptFromUs ? old : mergeChanged(old, changed.values(), keptFromUs);
    if (kept.length > this.max) return false;
    // The text of weblogs that changed or left the window stays in the blocks until they are copied.
    this.kept = kept.text.bytes > 2 * kept.textBytes() + COMPACT_SLACK_BYTES ? kept.compacted() : kept;
    this.lastId = lastId;
    this.keptFromUs = keptFromUs;
    return true;
  }
}
