// Owns what this instance remembers of refused pings, per weblog URL, for "did my ping arrive?": a refused
// ping is not stored, but the blogger asking why deserves the answer their engine may not have shown.
import { LRUCache } from 'lru-cache';

export interface RefusalSeen {
  at: number;
  method: string;
  reason: string;
}

/** Weblogs remembered (least recently refused forgotten first) and refusals kept per weblog. */
const MAX_WEBLOGS = 10_000;
const PER_WEBLOG = 5;
/** Older refusals are not shown: the page says "in the last hour". */
export const REFUSALS_TTL_MS = 3_600_000;
/** A URL longer than any valid one cannot be looked up; it is not kept. */
const URL_MAX = 2048;

export class RecentRefusals {
  private readonly byUrl = new LRUCache<string, RefusalSeen[]>({ max: MAX_WEBLOGS, ttl: REFUSALS_TTL_MS });

  add(url: string, r: RefusalSeen): void {
    if (url.length > URL_MAX) return;
    const list = this.byUrl.get(url) ?? [];
    list.unshift(r);
    if (list.length > PER_WEBLOG) list.length = PER_WEBLOG;
    this.byUrl.set(url, list);
  }

  of(url: string, now = Date.now()): RefusalSeen[] {
    return (this.byUrl.get(url) ?? []).filter((r) => now - r.at < REFUSALS_TTL_MS);
  }
}
