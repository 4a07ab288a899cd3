// The trust family (src/spam/trust.ts): new items lower a weblog's score unless machine work brought them: a
// farm, a burst, or a timer whose pings mostly bring new items (a generator). A cron that pings whatever
// happened and brings a post now and then keeps its trust.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { trustReasons } from '../../src/spam/trust.js';
import { urlOnlyEvidence, type Reason, type VerificationSeen, type WeblogEvidence } from '../../src/spam/verdict.js';

const regular: Reason = { family: 'rhythm', code: 'rhythm.regular', weight: 0.2, text: '' };
const farm: Reason = { family: 'rhythm', code: 'rhythm.farm', weight: 0.35, text: '' };
const seen = (outcome: VerificationSeen['outcome'], newItems = 0): VerificationSeen => ({ outcome, newItems });

function evidence(pings: number, verifications: VerificationSeen[]): WeblogEvidence {
  return {
    ...urlOnlyEvidence('http://freetypescriptnotes.net/', 'Free Typescript Notes'),
    pingTimesMs: Array.from({ length: pings }, (_, i) => i * 600_000),
    verifications,
    verifiedNewItems: verifications.reduce((n, v) => n + v.newItems, 0),
  };
}
const codes = (e: WeblogEvidence, rhythm: Reason[]) => trustReasons(e, rhythm).map((r) => r.code);

test('an honest cron with two posts among twenty pings keeps its trust (regression: the replay held such a blog)', () => {
  const e = evidence(20, [seen('verified', 1), ...Array.from({ length: 8 }, () => seen('unchanged')), seen('verified', 1)]);
  assert.deepEqual(codes(e, [regular]), ['trust.verified_items']);
});

test('a timer whose pings mostly bring new items, a farm, or copied items earn no trust', () => {
  const generator = evidence(
    20,
    Array.from({ length: 14 }, () => seen('verified', 1)),
  );
  assert.deepEqual(codes(generator, [regular]), []);
  assert.deepEqual(codes(generator, []), ['trust.verified_items'], 'without a timer, new items are a blog’s');
  const cron = evidence(20, [seen('verified', 1), seen('verified', 1)]);
  assert.deepEqual(codes(cron, [regular, farm]), [], 'a farm is machine work whatever it brings');
  assert.deepEqual(codes({ ...cron, duplicateItemWeblogs: 2 }, []), [], 'items found elsewhere');
});
