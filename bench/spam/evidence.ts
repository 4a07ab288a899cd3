// Owns what pingd would know of each weblog of the synthetic corpus (bench/spam/corpus.ts) at a moment: the
// WeblogEvidence of src/spam/verdict.ts, derived the way the server can derive it from its own tables, so
// that the integration computes the same thing. A verifier is assumed to fetch the feed after every ping
// and settle at the ping's time (pingd's verification settles within seconds; its per-host politeness and
// VERIFY_FEED_INTERVAL would skip some fetches, which makes content evidence sparser, not different).
import { itemSite, siteOf } from '../../src/spam/domains.js';
import { RHYTHM_PINGS } from '../../src/spam/rhythm.js';
import { CONTENT_VERIFICATIONS } from '../../src/spam/content.js';
import type { VerificationSeen, WeblogEvidence } from '../../src/spam/verdict.js';
import type { Corpus, CorpusWeblog } from './corpus.js';

const HOUR = 3_600_000;
/** Items of a feed a verifier sees at once (a feed carries its newest ten or so). */
export const FEED_ITEMS = 10;

/** One verification as settled after a ping: the outcome and which items the feed showed. */
export interface SimulatedVerification extends VerificationSeen {
  atMs: number;
  /** Indexes into the weblog's items shown by the feed (empty unless fetched). */
  shown: number[];
}

export interface EvidenceIndex {
  corpus: Corpus;
  /** Per weblog, one verification per ping, oldest first. */
  verifications: SimulatedVerification[][];
  site: (url: string) => string;
  /** Per registrable domain: its weblogs' ping times (sorted) with the weblog. */
  bySite: Map<string, { t: number; w: number }[]>;
  /** Per client address: the registrable domains pinged from it (sorted by time). */
  byAddress: Map<string, { t: number; site: string }[]>;
  /** Per item title and per item link: when each weblog's verification first showed it. */
  carriers: Map<string, { t: number; w: number; site: string }[]>;
}

/**
 * The evidence as pingd would hold it. Its duplicate count reads only items whose link leaves the weblog's
 * own site: a blog's permalinks copied by scrapers are not its duplicates, nor is a title it happens to
 * share ("Hello world!"); a scraper that keeps the original's links is still caught. (Which one showed an
 * item first does not tell the original: pingd sees a scraper that pings hourly before a blog that pings
 * daily.)
 */
export type CorpusEvidence = WeblogEvidence;

/** The index of the first element with t >= from (the array sorted by t). */
function lowerBound(xs: { t: number }[], from: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid].t < from) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Verifies every ping as pingd does: the feed's newest FEED_ITEMS published by then; the first successful
 * fetch is `verified` with one new item (src/verification/identity.ts publishes only the newest on a first
 * fetch), later ones `verified` with the items not seen before, else `unchanged`; an outage or a no-feed
 * splog gives its outcome instead.
 */
function verify(w: CorpusWeblog): SimulatedVerification[] {
  const seen = new Set<number>();
  let first = true;
  return w.pings.map(({ atMs }) => {
    if (w.noFeed) return { atMs, outcome: 'not_a_feed', newItems: 0, shown: [] };
    const out = w.outages.find((o) => atMs >= o.fromMs && atMs < o.toMs);
    if (out) return { atMs, outcome: out.outcome, newItems: 0, shown: [] };
    const shown: number[] = [];
    for (let i = w.items.length - 1; i >= 0 && shown.length < FEED_ITEMS; i--) if (w.items[i].atMs <= atMs) shown.push(i);
    const fresh = shown.filter((i) => !seen.has(i)).length;
    for (const i of shown) seen.add(i);
    const newItems = first ? Math.min(1, shown.length) : fresh;
    first = false;
    return { atMs, outcome: newItems > 0 ? 'verified' : 'unchanged', newItems, shown };
  });
}

/** Builds the per-domain, per-address and per-item tables once for the whole corpus. */
export function indexCorpus(corpus: Corpus): EvidenceIndex {
  const cache = new Map<string, string>();
  const site = (url: string) => {
    let s = cache.get(url);
    if (s === undefined) cache.set(url, (s = siteOf(url) ?? url));
    return s;
  };
  const bySite = new Map<string, { t: number; w: number }[]>();
  const byAddress = new Map<string, { t: number; site: string }[]>();
  const carriers = new Map<string, { t: number; w: number; site: string }[]>();
  const verifications = corpus.weblogs.map(verify);
  const push = <T>(m: Map<string, T[]>, k: string, v: T) => {
    const xs = m.get(k);
    if (xs) xs.push(v);
    else m.set(k, [v]);
  };
  corpus.weblogs.forEach((w, wi) => {
    const s = site(w.url);
    for (const p of w.pings) {
      push(bySite, s, { t: p.atMs, w: wi });
      push(byAddress, p.address, { t: p.atMs, site: s });
    }
    const firstSeen = new Map<number, number>();
    for (const v of verifications[wi]) for (const i of v.shown) if (!firstSeen.has(i)) firstSeen.set(i, v.atMs);
    for (const [i, t] of firstSeen) {
      push(carriers, `t:${w.items[i].title}`, { t, w: wi, site: s });
      push(carriers, `l:${w.items[i].link}`, { t, w: wi, site: s });
    }
  });
  for (const m of [bySite, byAddress, carriers]) for (const xs of m.values()) xs.sort((a, b) => a.t - b.t);
  return { corpus, verifications, site, bySite, byAddress, carriers };
}

/**
 * What pingd knows of weblog `wi` right after the verification of its ping number `pingIndex` settled
 * (default: its last ping, i.e. at the end of the window). Each field, and how the server gets it:
 */
export function evidenceAt(ix: EvidenceIndex, wi: number, pingIndex?: number): CorpusEvidence {
  const w = ix.corpus.weblogs[wi];
  const j = pingIndex ?? w.pings.length - 1;
  const t = w.pings[j].atMs;
  const own = ix.site(w.url);
  // pingTimesMs: the weblog's accepted pings up to now, oldest first, the last RHYTHM_PINGS (pings by weblog id).
  const pingTimesMs = w.pings.slice(Math.max(0, j + 1 - RHYTHM_PINGS), j + 1).map((p) => p.atMs);
  // siblingsLastHour: distinct other weblogs whose siteOf() is this one's, with a ping in (t - 1 h, t]
  // (pings joined to weblogs, grouped by a stored site column).
  const siblings = new Set<number>();
  const bs = ix.bySite.get(own) ?? [];
  for (let k = lowerBound(bs, t - HOUR + 1); k < bs.length && bs[k].t <= t; k++) if (bs[k].w !== wi) siblings.add(bs[k].w);
  // domainsFromAddressLastHour: distinct siteOf() of the weblogs pinged from this ping's client address in
  // (t - 1 h, t], this weblog's own included; plus, in the corpus only, the address's traffic for blogs
  // outside the sample (Corpus.backgroundDomainsPerHour).
  const addr = w.pings[j].address;
  const domains = new Set<string>();
  const ba = ix.byAddress.get(addr) ?? [];
  for (let k = lowerBound(ba, t - HOUR + 1); k < ba.length && ba[k].t <= t; k++) domains.add(ba[k].site);
  // verifications: the settled verifications of its pings, newest first, the last CONTENT_VERIFICATIONS.
  const vs = ix.verifications[wi].slice(0, j + 1);
  const verifications = vs
    .slice(-CONTENT_VERIFICATIONS)
    .reverse()
    .map((v) => ({ outcome: v.outcome, newItems: v.newItems }));
  // Recent items: what the latest successful fetch showed.
  const lastFetched = [...vs].reverse().find((v) => v.shown.length > 0);
  const recent = lastFetched?.shown ?? [];
  // duplicateItemWeblogs: for each recent item that links off the weblog's own site, the distinct weblogs of
  // other registrable domains whose verification had shown an item of the same title or the same link by
  // now (stored items by title and by link); the most over those items. A blog's own permalinks do not
  // count: a blog its scrapers copy is not one of them.
  let duplicateItemWeblogs = 0;
  for (const i of recent) {
    if (itemSite(w.items[i].link, own) === own) continue;
    const others = new Set<number>();
    for (const key of [`t:${w.items[i].title}`, `l:${w.items[i].link}`])
      for (const c of ix.carriers.get(key) ?? []) {
        if (c.t > t) break;
        if (c.w !== wi && c.site !== own) others.add(c.w);
      }
    duplicateItemWeblogs = Math.max(duplicateItemWeblogs, others.size);
  }
  // oneTargetLinkShare: of the recent items' links, the largest share with one site other than its own
  // (itemSite: a link through a feed proxy is its own).
  const targets = new Map<string, number>();
  for (const i of recent) {
    const s = itemSite(w.items[i].link, own);
    if (s !== null && s !== own) targets.set(s, (targets.get(s) ?? 0) + 1);
  }
  const oneTargetLinkShare = recent.length ? Math.max(0, ...targets.values()) / recent.length : 0;
  // verifiedNewItems: the new items of every verification so far (items stored by weblog).
  const verifiedNewItems = vs.reduce((n, v) => n + (v.outcome === 'verified' ? v.newItems : 0), 0);
  return {
    url: w.url,
    name: w.name,
    pingTimesMs,
    siblingsLastHour: siblings.size,
    domainsFromAddressLastHour: domains.size + (ix.corpus.backgroundDomainsPerHour[addr] ?? 0),
    verifications,
    duplicateItemWeblogs,
    oneTargetLinkShare,
    verifiedNewItems,
    // registeredPublisher: a publisher row owns the weblog's URL (pingd publisher add).
    registeredPublisher: w.registeredPublisher,
    // namesPingd: a fetched feed named pingd as hub or cloud: known only once a fetch succeeded.
    namesPingd: w.namesPingd && recent.length > 0,
  };
}
