// Owns the trust family: what lowers a weblog's score. A history of new items verification found on its
// own feed, a publisher who registered for RSS Ping, a feed that names pingd as its hub or cloud: each is
// work a splog farm does not do for every host, or a choice only the site's owner makes.
import type { Reason, WeblogEvidence } from './verdict.js';

/**
 * `machine`: a rhythm reason fired (a timer, a farm, a burst). Then new items earn no trust: generated and
 * spun items are new too, and on the corpus (bench/spam) every splog the scorer missed had this trust
 * (tuning split: recall 73.2% with it, 96.0% without it for machine pingers).
 */
export function trustReasons(e: WeblogEvidence, machine = false): Reason[] {
  const reasons: Reason[] = [];
  if (e.registeredPublisher) {
    reasons.push({ family: 'trust', code: 'trust.publisher', weight: -1, text: 'its publisher registered with this server for RSS Ping' });
  }
  if (e.namesPingd) {
    reasons.push({ family: 'trust', code: 'trust.names_pingd', weight: -0.4, text: 'its feed names this server as its hub or cloud' });
  }
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
