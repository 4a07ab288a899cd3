// Owns the rhythm family of spam signals: how a weblog pings. Software that pings for a farm does it on a
// timer, for many hosts at once, from one address; people publish irregularly.
import type { Reason, WeblogEvidence } from './verdict.js';
import { hostParts } from './domains.js';

/** How many of a weblog's most recent pings rhythm reads. */
export const RHYTHM_PINGS = 20;

/**
 * Siblings are counted up to this many (evidence-repository.ts): rhythm.farm's weights change at 5 and 20,
 * so a count past 100 says nothing more, and counting every weblog of a big farm's domain cost the most.
 */
export const SIBLINGS_CAP = 100;

/**
 * Intervals whose spread is this small against their median are a timer's, not a person's. The spread is the
 * median absolute deviation, not the standard deviation: one ping a timer sent late (a slow network, a busy
 * server, a retry) makes one long gap and one short one, and with the standard deviation that alone read a
 * timer as a person (test/spam/replay.test.ts: 15-minute timers replayed through a busy server, gaps of
 * 830 ± 40 ms with two late pings, had a coefficient of variation of 0.19). For jitter that is normally
 * distributed 0.07 is the old rule's 0.1 (the deviation is 0.674 σ).
 */
const REGULAR_MAD = 0.07;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

export function rhythmReasons(e: WeblogEvidence): Reason[] {
  const reasons: Reason[] = [];
  const t = e.pingTimesMs.slice(-RHYTHM_PINGS);
  if (t.length >= 6) {
    const gaps = t.slice(1).map((v, i) => v - t[i]);
    const mid = median(gaps);
    const mad = median(gaps.map((g) => Math.abs(g - mid)));
    if (mid > 0 && mad / mid < REGULAR_MAD) {
      reasons.push({
        family: 'rhythm',
        code: 'rhythm.regular',
        weight: 0.2,
        text: `its last ${t.length} pings came every ${Math.round(mid / 1000)} s like clockwork`,
      });
    }
  }
  if (e.siblingsLastHour >= 5) {
    reasons.push({
      family: 'rhythm',
      code: 'rhythm.farm',
      weight: e.siblingsLastHour >= 20 ? 0.35 : 0.2,
      text: `${e.siblingsLastHour >= SIBLINGS_CAP ? `${SIBLINGS_CAP} or more` : e.siblingsLastHour} other weblogs of the same domain pinged within the hour`,
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
