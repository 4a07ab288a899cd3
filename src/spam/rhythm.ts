// Owns the rhythm family of spam signals: how a weblog pings. Software that pings for a farm does it on a
// timer, for many hosts at once, from one address; people publish irregularly.
import type { Reason, WeblogEvidence } from './verdict.js';
import { hostParts } from './domains.js';

/** How many of a weblog's most recent pings rhythm reads. */
export const RHYTHM_PINGS = 20;

/** Intervals whose spread is this small against their mean are a timer's, not a person's. */
const REGULAR_CV = 0.1;

export function rhythmReasons(e: WeblogEvidence): Reason[] {
  const reasons: Reason[] = [];
  const t = e.pingTimesMs.slice(-RHYTHM_PINGS);
  if (t.length >= 6) {
    const gaps = t.slice(1).map((v, i) => v - t[i]);
    const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
    const sd = Math.sqrt(gaps.reduce((a, g) => a + (g - mean) ** 2, 0) / gaps.length);
    if (mean > 0 && sd / mean < REGULAR_CV) {
      reasons.push({
        family: 'rhythm',
        code: 'rhythm.regular',
        weight: 0.2,
        text: `its last ${t.length} pings came every ${Math.round(mean / 1000)} s like clockwork`,
      });
    }
  }
  if (e.siblingsLastHour >= 5) {
    reasons.push({
      family: 'rhythm',
      code: 'rhythm.farm',
      weight: e.siblingsLastHour >= 20 ? 0.35 : 0.2,
      text: `${e.siblingsLastHour} other weblogs of the same domain pinged within the hour`,
    });
  }
  // Not on a blog platform: WordPress.com and Blogger ping for thousands of blogs from a few addresses (on
  // the corpus this held 13 platform blogs and 11 new ones; tuning split precision 93.3% -> 93.7%).
  if (e.domainsFromAddressLastHour >= 20 && !hostParts(e.url)?.platform) {
    reasons.push({
      family: 'rhythm',
      code: 'rhythm.address_burst',
      weight: e.domainsFromAddressLastHour >= 100 ? 0.25 : 0.15,
      text: `its pings came from an address that pinged for ${e.domainsFromAddressLastHour} domains within the hour`,
    });
  }
  return reasons;
}
