// Owns the trust family: what lowers a weblog's score. A history of new items verification found on its
// own feed, a publisher who registered for RSS Ping, a feed that names pingd as its hub or cloud: each is
// work a splog farm does not do for every host, or a choice only the site's owner makes.
import type { Reason, WeblogEvidence } from './verdict.js';

/**
 * A timer's pings that bring a new item this often are a generator's (on the corpus, bench/spam, a splog on a
 * timer brings one at 70–80% of its pings); a cron or plugin that pings whatever happened brings one at a
 * few of them (posts now and then among dozens of pings), and its owner's posts are a blog's.
 */
const GENERATOR_ITEMS_PER_PING = 0.4;

/**
 * `rhythm`: the rhythm reasons that fired. A farm or a burst from one address is machine work, and so is a
 * timer whose pings mostly bring new items: then new items earn no trust, since generated and spun items
 * are new too (on the corpus every splog the scorer missed had this trust: tuning split, recall 73.2% with
 * it, 96.0% without it for machine pingers). A timer alone whose pings seldom bring anything is how an
 * honest cron pings: its few posts still count (test/spam/replay.test.ts held such a blog, "Free Typescript
 * Notes", on a 10-minute cron with two posts).
 */
export function trustReasons(e: WeblogEvidence, rhythm: readonly Reason[] = []): Reason[] {
  const reasons: Reason[] = [];
  if (e.registeredPublisher) {
    reasons.push({ family: 'trust', code: 'trust.publisher', weight: -1, text: 'its publisher registered with this server for RSS Ping' });
  }
  if (e.namesPingd) {
    reasons.push({ family: 'trust', code: 'trust.names_pingd', weight: -0.4, text: 'its feed names this server as its hub or cloud' });
  }
  const recentNew = e.verifications.reduce((n, v) => n + (v.outcome === 'verified' ? v.newItems : 0), 0);
  const generator = e.pingTimesMs.length > 0 && recentNew / e.pingTimesMs.length >= GENERATOR_ITEMS_PER_PING;
  const machine = rhythm.some((r) => r.code !== 'rhythm.regular') || (rhythm.length > 0 && generator);
  // Scraped feeds change too: new items count for less when the same items are elsewhere.
  if (e.verifiedNewItems >= 1 && e.duplicateItemWeblogs === 0 && !machine) {
    reasons.push({
      family: 'trust',
      code: 'trust.verified_items',
      weight: e.verifiedNewItems >= 3 ? -0.35 : -0.2,
      text: `its feed showed ${e.verifiedNewItems} new item${e.verifiedNewItems === 1 ? '' : 's'} when fetched`,
    });
  }
  return reasons;
}
