// Owns the pings of the open hour kept between renders of its archive: read in full once, then brought up to
// date from the pings committed since the last read (ping ids become visible in id order), so a render of the
// growing hour reads what came in since the previous tick instead of the whole hour. The bytes are the same
// as a full read's: the same rows, the same order, the same escaping. Used when the open hour is rendered
// whole (PUBLISH_DIR's files); otherwise it is appended to (render/open-hour-stream.ts).
import type { Queryable } from '../../platform/db/database.js';
import type { PingPageRow } from '../../intake/ping/window-repository.js';
import type { ListingReads } from './listing.js';
import { keptWeblog, type KeptWeblog } from './window-cache.js';
import { KeptEntries } from './kept-entries.js';
import { HOUR_MS, type KeptHour, type OpenHourCache } from './archive.js';

/**
 * A ping as the cache reads it: its element's escaped start, and the keyset the archive is
 * ordered by (its time and its ping id). Kept as the window cache keeps a weblog: the rows have one shape.
 */
export type KeptPing = KeptWeblog;
const keptPing: (r: PingPageRow) => KeptPing = keptWeblog;

/**
 * Pings kept at most (~110 bytes each off the JavaScript heap, as the live documents' window cache). An
 * hour that holds more is read in full on each of its renders until the next hour begins, as before the
 * cache: a sustained 200 pings/s passes it after ~17 minutes.
 */
export const HOUR_CACHE_MAX = 200_000;
/** Rows per statement while catching up on pings. */
const FOLLOW_ROWS = 5000;
const HOUR_US = HOUR_MS * 1000;

/** The archive's order: oldest first by (time, ping id), as the keyset pages read them. */
const olderFirst = (a: KeptPing, b: KeptPing): number => a.atUs - b.atUs || a.id - b.id;

/**
 * Adds `fresh` to `kept` (both oldest first after this), in place. A ping's time is its transaction's start
 * and its id is taken at commit, so a new ping can be older than pings already kept: it is merged in, not
 * appended. Such pings are never far from the end (a batch's transaction is short), so the merge starts
 * where the first new ping belongs, found from the end.
 */
export function mergeFresh(kept: KeptEntries, fresh: KeptPing[]): void {
  if (fresh.length === 0) return;
  fresh.sort(olderFirst);
  const first = fresh[0];
  let i = kept.length;
  while (i > 0 && kept.compareAt(i - 1, first) > 0) i--;
  const tail = kept.slice(i, kept.length);
  kept.truncate(i);
  let a = 0;
  let b = 0;
  while (a < tail.length && b < fresh.length) {
    if (tail.compareAt(a, fresh[b]) <= 0) kept.pushFrom(tail, a++);
    else kept.add(fresh[b++]);
  }
  for (; a < tail.length; a++) kept.pushFrom(tail, a);
  for (; b < fresh.length; b++) kept.add(fresh[b]);
}

/** How many of `kept` (oldest first) were received before `toUs`. */
export function countBefore(kept: KeptEntries, toUs: number): number {
  let lo = 0;
  let hi = kept.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (kept.atUs(mid) < toUs) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export type HourFollow = Pick<ListingReads, 'hourPage'> & { follow: NonNullable<ListingReads['follow']> };

/** The pings of one hour (the open one), kept between its renders. */
export class HourCache implements OpenHourCache {
  private hourMs: number | null = null;
  private kept: KeptEntries | null = null;
  /** The last ping id the kept pings account for. */
  private lastId = 0;
  /** The hour outgrew the cache: it is read in full until the next one. */
  private tooBig = false;

  constructor(
    private readonly reads: HourFollow,
    private readonly max = HOUR_CACHE_MAX,
  ) {}

  /** Drops what is kept: the next render reads the hour in full (see WindowCache.forget). */
  forget(): void {
    this.hourMs = null;
    this.kept = null;
    this.tooBig = false;
  }

  /**
   * The pings of the hour starting at `startMs` received before `toUs`, oldest first, up to date with every
   * ping committed before this call; null when the hour holds more than the cache keeps (the caller reads it
   * in full). `pageRows`: rows per statement of the first, full read.
   */
  async hour(q: Queryable, startMs: number, toUs: number, pageRows: number): Promise<KeptHour | null> {
    if (this.hourMs !== startMs) {
      // A new hour (the one kept is closed by a full read of its own): start again.
      this.hourMs = startMs;
      this.kept = null;
      this.tooBig = false;
    }
    if (this.tooBig) return null;
    const ok = this.kept ? await this.catchUp(q, startMs) : await this.load(q, startMs, pageRows);
    if (!ok) {
      this.kept = null;
      this.tooBig = true;
      return null;
    }
    const pings = this.kept!.view(0, countBefore(this.kept!, toUs));
    let maxId = 0;
    for (let i = 0; i < pings.length; i++) maxId = Math.max(maxId, pings.id(i));
    return { stats: { n: pings.length, maxId }, pings };
  }

  private async load(q: Queryable, startMs: number, pageRows: number): Promise<boolean> {
    // The last id first, and only pings up to it: the pings after it are the next catch-up's, read once.
    const lastId = await this.reads.follow.lastId(q);
    const startUs = startMs * 1000;
    const kept = new KeptEntries();
    let rows: PingPageRow[] = [];
    do {
      const last = rows[rows.length - 1];
      rows = await this.reads.hourPage(q, startUs, startUs + HOUR_US, lastId, last ? { atUs: last.at_us, id: last.id } : null, pageRows);
      for (const r of rows) kept.add(keptPing(r));
      if (kept.length > this.max) return false;
    } while (rows.length === pageRows);
    this.kept = kept;
    this.lastId = lastId;
    return true;
  }

  private async catchUp(q: Queryable, startMs: number): Promise<boolean> {
    const startUs = startMs * 1000;
    const kept = this.kept!;
    for (;;) {
      const rows = await this.reads.follow.hourPingsAfter(q, startUs, startUs + HOUR_US, this.lastId, FOLLOW_ROWS);
      if (rows.length > 0) this.lastId = rows[rows.length - 1].id;
      if (kept.length + rows.length > this.max) return false;
      mergeFresh(kept, rows.map(keptPing));
      if (rows.length < FOLLOW_ROWS) return true;
    }
  }
}
