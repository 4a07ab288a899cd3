// Owns what a spam score is: the evidence pingd holds about a weblog, the reasons each family of signals
// finds in it, and the one rule that turns reasons into a score. Pure: evidence in, verdict out. The
// families (url.ts, rhythm.ts, content.ts, trust.ts) each read part of the evidence; the order is the
// online splog filter's (Kolari et al., TREC 2006): the URL first (free, at intake), then behaviour, then
// what was fetched.
import type { Outcome } from '../platform/outcomes.js';

/** Which part of the evidence a reason comes from (reported per family: precision and recall). */
export type SignalFamily = 'url' | 'rhythm' | 'content' | 'trust';

export interface Reason {
  family: SignalFamily;
  /** Stable name, e.g. `url.keywords`, `rhythm.regular`, `trust.verified_items`. */
  code: string;
  /** What it adds to the score (trust: negative). */
  weight: number;
  /** In words, for "why is my blog not listed?" (/weblog?url=, `pingd spam show`). */
  text: string;
}

/** One settled verification of the weblog's feed, newest first in WeblogEvidence. */
export interface VerificationSeen {
  outcome: Outcome;
  newItems: number;
}

/** What pingd knows of a weblog when it scores it. Everything but url and name may be empty at intake. */
export interface WeblogEvidence {
  url: string;
  name: string | null;
  /** Accepted ping times (ms since the epoch), oldest first, the most recent at most RHYTHM_PINGS. */
  pingTimesMs: number[];
  /** Other weblogs under the same registrable domain that pinged within the last hour. */
  siblingsLastHour: number;
  /** Distinct registrable domains pinged from this weblog's last client address within the last hour. */
  domainsFromAddressLastHour: number;
  /** Settled verifications, newest first (at most CONTENT_VERIFICATIONS). */
  verifications: VerificationSeen[];
  /**
   * For the weblog's recent items that link off its own site (a scraper's link to what it copied; a blog's
   * own permalinks, also through a feed proxy (domains.ts itemSite), do not count, so a blog its scrapers
   * copy is not one of them): the most other weblogs, of other registrable domains, carrying the same title
   * or link.
   */
  duplicateItemWeblogs: number;
  /**
   * Of its recent items' links, the share pointing to one registrable domain other than its own (0..1; a
   * link through a feed proxy is its own: itemSite); 0 without items.
   */
  oneTargetLinkShare: number;
  /** Items verification ever found new on this weblog's feed. */
  verifiedNewItems: number;
  /** A publisher registered for RSS Ping (pingd publisher add) owns this weblog. */
  registeredPublisher: boolean;
  /** Its feed names pingd as its WebSub hub or rssCloud cloud: the site chose pingd. */
  namesPingd: boolean;
}

export interface SpamVerdict {
  /** 0 (a blog) to 1 (a splog): the reasons' weights added, held to that range. */
  score: number;
  reasons: Reason[];
}

/** The evidence of a weblog nothing is known of yet but its URL and name. */
export function urlOnlyEvidence(url: string, name: string | null): WeblogEvidence {
  return {
    url,
    name,
    pingTimesMs: [],
    siblingsLastHour: 0,
    domainsFromAddressLastHour: 0,
    verifications: [],
    duplicateItemWeblogs: 0,
    oneTargetLinkShare: 0,
    verifiedNewItems: 0,
    registeredPublisher: false,
    namesPingd: false,
  };
}

/** The score of a set of reasons: their weights added, held to [0, 1], rounded to thousandths. */
export function scoreOf(reasons: Reason[]): number {
  const sum = reasons.reduce((s, r) => s + r.weight, 0);
  return Math.round(Math.min(1, Math.max(0, sum)) * 1000) / 1000;
}
