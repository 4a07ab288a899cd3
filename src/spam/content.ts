// Owns the content family of spam signals: what verification found when it fetched the weblog's feed.
// Scraper farms republish the same items on many hosts; link farms point every item at one target; some
// splogs have no feed at all, or one that never changes however often they ping.
import type { Reason, WeblogEvidence } from './verdict.js';

/** How many of a weblog's most recent settled verifications content reads. */
export const CONTENT_VERIFICATIONS = 20;

export function contentReasons(e: WeblogEvidence): Reason[] {
  const reasons: Reason[] = [];
  const v = e.verifications.slice(0, CONTENT_VERIFICATIONS);
  const notFeed = v.filter((x) => x.outcome === 'not_a_feed' || x.outcome === 'gone').length;
  if (notFeed >= 2)
    reasons.push({ family: 'content', code: 'content.no_feed', weight: 0.2, text: `${notFeed} of its last fetches found no feed` });
  const fetched = v.filter((x) => x.outcome === 'verified' || x.outcome === 'unchanged' || x.outcome === 'not_modified');
  if (fetched.length >= 5 && fetched.every((x) => x.outcome !== 'verified' || x.newItems === 0)) {
    reasons.push({
      family: 'content',
      code: 'content.never_new',
      weight: 0.2,
      text: `its last ${fetched.length} pings brought nothing new to its feed`,
    });
  }
  if (e.duplicateItemWeblogs >= 1) {
    reasons.push({
      family: 'content',
      code: 'content.duplicates',
      weight: e.duplicateItemWeblogs >= 3 ? 0.45 : 0.25,
      text: `its items also appear on ${e.duplicateItemWeblogs} other weblog${e.duplicateItemWeblogs === 1 ? '' : 's'} of other domains`,
    });
  }
  if (e.oneTargetLinkShare >= 0.8) {
    reasons.push({
      family: 'content',
      code: 'content.one_target',
      weight: 0.3,
      text: `${Math.round(e.oneTargetLinkShare * 100)}% of its items link to one other site`,
    });
  }
  return reasons;
}
