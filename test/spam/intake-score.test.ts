// Intake's URL-score cache (src/spam/intake-score.ts): a weblog scored lately is answered from the cache, the
// least recently used is forgotten at the bound. Regression: the cache was a Map dropping its first key with
// keys().next(), ~7.8 µs a new weblog at 10,000 kept (deleted entries walked past; a cost the wrk bench
// measures, not this test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { UrlScorer } from '../../src/spam/intake-score.js';

test('UrlScorer keeps the most recently used scores and forgets the least recently used', () => {
  const scorer = new UrlScorer(2);
  const a = scorer.score('http://a.example.com/', null);
  const b = scorer.score('http://b.example.com/', 'B');
  assert.equal(scorer.score('http://a.example.com/', null), a, 'a hit is the kept score');
  assert.notEqual(scorer.score('http://b.example.com/', null), b, 'the name is part of the key');
  scorer.score('http://c.example.com/', null);
  assert.equal(scorer.score('http://c.example.com/', null).site, 'example.com');
  assert.notEqual(scorer.score('http://a.example.com/', null), a, 'forgotten at the bound: scored again');
  assert.deepEqual(scorer.score('http://a.example.com/', null), a, 'to the same score');
});
