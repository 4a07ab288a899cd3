// The rhythm family's timer rule (src/spam/rhythm.ts): a timer is read from the median gap and the median
// deviation, so one late ping does not make a timer look like a person.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rhythmReasons } from '../../src/spam/rhythm.js';
import { urlOnlyEvidence } from '../../src/spam/verdict.js';

const at = (gaps: number[]) => gaps.reduce((ts, g) => [...ts, ts[ts.length - 1] + g], [1_000_000]);
const codes = (gaps: number[]) =>
  rhythmReasons({ ...urlOnlyEvidence('http://example.org/', null), pingTimesMs: at(gaps) }).map((r) => r.code);

test('a 15-minute timer with one ping sent late is still a timer (regression: the replay read it as a person)', () => {
  // Gaps of the replay: 830 ± 40 ms, one ping late (a long gap, then a short one).
  const gaps = [832, 877, 824, 824, 811, 887, 834, 793, 810, 1516, 146, 847, 798, 815, 814, 861, 859, 811, 822];
  assert.deepEqual(codes(gaps), ['rhythm.regular']);
  const reason = rhythmReasons({ ...urlOnlyEvidence('http://example.org/', null), pingTimesMs: at(gaps.map((g) => g * 1000)) })[0];
  assert.equal(reason.text, 'its last 20 pings came every 824 s like clockwork');
});

test('a person’s irregular pings are not a timer, nor are five pings', () => {
  assert.deepEqual(codes([324, 3818, 1433, 5521, 663, 1490, 3210, 99, 362, 1953]), []);
  assert.deepEqual(codes([600, 600, 600, 600]), [], 'fewer than six pings say nothing');
  assert.deepEqual(codes([600, 600, 600, 600, 600]), ['rhythm.regular']);
});
