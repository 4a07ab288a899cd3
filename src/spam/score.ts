// Owns scoring a weblog for spam: every family's reasons over the evidence, added into one score (see
// verdict.ts). Pure. The URL family alone is what intake can afford per ping; the rest need history.
import { scoreOf, type SpamVerdict, type WeblogEvidence } from './verdict.js';
import { urlReasons } from './url.js';
import { rhythmReasons } from './rhythm.js';
import { contentReasons } from './content.js';
import { trustReasons } from './trust.js';

/** The score above which a weblog is held out of what pingd publishes (SPAM_THRESHOLD's default). */
export const DEFAULT_SPAM_THRESHOLD = 0.5;

/** Every family's reasons and the score they add up to. */
export function scoreWeblog(e: WeblogEvidence): SpamVerdict {
  const rhythm = rhythmReasons(e);
  const reasons = [...urlReasons(e), ...rhythm, ...contentReasons(e), ...trustReasons(e, rhythm)];
  return { score: scoreOf(reasons), reasons };
}
