// Owns the spam score intake writes with a weblog's first ping: the URL family only (the rest needs
// history), computed once per URL and name and kept in a small LRU map, so a ping of a weblog seen lately
// costs one map lookup. Intake stores it in the statement that stores the ping (ping-repository.ts), so a
// render never lists a weblog before it is scored.
import { LRUCache } from 'lru-cache';
import { scoreWeblog } from './score.js';
import { urlOnlyEvidence, type SpamVerdict } from './verdict.js';
import { labelWords } from './url.js';
import { siteOf } from './domains.js';

/**
 * What intake writes for one ping: the score, the reasons as the JSON text of weblog_spam.reasons, and the
 * registrable domain the weblog counts under (siteOf: rescoring's siblings and address bursts read it).
 */
export interface UrlScore {
  score: number;
  reasons: string;
  site: string | null;
}

/**
 * URLs whose score is kept (a few hundred bytes each: ~3 MB at most). Measured (Node 24, 20,000 distinct
 * URLs, docs/design/spam.md): ~23 µs to score a URL not kept, ~0.33 µs for one kept.
 */
const CACHE_SIZE = 10_000;

export class UrlScorer {
  /**
   * lru-cache rather than a Map evicting its first key: a Map's deleted entries stay in its table until it
   * is rehashed and keys().next() walks past them, so at 10,000 keys a new key cost ~7.8 µs (lru-cache:
   * 0.75 µs; Node 24, this machine, 300,000 new keys): every ping of a new weblog paid it.
   */
  private readonly cache: LRUCache<string, UrlScore>;

  constructor(size = CACHE_SIZE) {
    this.cache = new LRUCache({ max: size });
  }

  /**
   * Loads wordsninja's dictionary now, at start, so that no ping waits for it (58 ms measured here on
   * Node 20; the issue saw ~0.5 s on a slower machine).
   */
  preload(): void {
    labelWords('preloadingthedictionary');
  }

  /** The URL family's verdict of a weblog, from the cache when this URL and name were scored lately. */
  score(url: string, name: string | null): UrlScore {
    const key = name === null ? url : `${url}\n${name}`;
    const hit = this.cache.get(key);
    if (hit !== undefined) return hit;
    const v: SpamVerdict = scoreWeblog(urlOnlyEvidence(url, name));
    const made = { score: v.score, reasons: JSON.stringify(v.reasons), site: siteOf(url) };
    this.cache.set(key, made);
    return made;
  }
}
