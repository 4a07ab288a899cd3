// Owns which pings the weblogUpdates documents list (VERIFY_PINGS): every accepted ping, or under
// `require` only those whose feed verification found something new. Both read the same row shapes.
import type { Queryable } from '../../platform/db/database.js';
import {
  hourPage,
  hourPingsAfter,
  hourStats,
  lastPingId,
  weblogsPingedAfter,
  weblogWindowPage,
  weblogWindowStats,
  type After,
  type HourStats,
  type PingPageRow,
  type WeblogChanges,
  type WeblogWindowRow,
  type WindowStats,
} from '../../intake/ping/window-repository.js';
import {
  verifiedHourPage,
  verifiedHourStats,
  verifiedWeblogWindowPage,
  verifiedWeblogWindowStats,
} from '../../verification/listing-repository.js';

export type Listing = 'all' | 'verified';

export interface ListingReads {
  readonly listing: Listing;
  weblogStats(q: Queryable, fromUs: number, toUs: number): Promise<WindowStats>;
  weblogPage(q: Queryable, fromUs: number, toUs: number, after: After | null, limit: number): Promise<WeblogWindowRow[]>;
  hourStats(q: Queryable, startUs: number, endUs: number): Promise<HourStats>;
  hourPage(q: Queryable, startUs: number, endUs: number, maxId: number, after: After | null, limit: number): Promise<PingPageRow[]>;
  /**
   * How to follow the listed weblogs from one render to the next (window-cache.ts), when the listing can:
   * every accepted ping is listed, so the pings after the last id read are what changed. Verified pings are
   * listed by the verifier's own time and are re-read in full. The open hour's archive is followed the same
   * way (hour-cache.ts).
   */
  follow?: {
    lastId(q: Queryable): Promise<number>;
    changedAfter(q: Queryable, afterId: number, limit: number): Promise<WeblogChanges>;
    hourPingsAfter(q: Queryable, startUs: number, endUs: number, afterId: number, limit: number): Promise<PingPageRow[]>;
  };
}

const ALL: ListingReads = {
  listing: 'all',
  weblogStats: weblogWindowStats,
  weblogPage: weblogWindowPage,
  hourStats,
  hourPage,
  follow: { lastId: lastPingId, changedAfter: weblogsPingedAfter, hourPingsAfter },
};
const VERIFIED: ListingReads = {
  listing: 'verified',
  weblogStats: verifiedWeblogWindowStats,
  weblogPage: verifiedWeblogWindowPage,
  hourStats: verifiedHourStats,
  hourPage: verifiedHourPage,
};

export function listingReads(listing: Listing = 'all'): ListingReads {
  return listing === 'verified' ? VERIFIED : ALL;
}

/** VERIFY_PINGS → what is listed: only `require` holds pings back. */
export function listingFor(verifyPings: 'off' | 'mark' | 'require'): Listing {
  return verifyPings === 'require' ? 'verified' : 'all';
}
