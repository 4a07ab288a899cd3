// The token buckets' memory bound (src/intake/abuse/rate-limit.ts): at MAX_TRACKED keys a new key forgets the
// least recently spent one, not one still being spent. Regression: the buckets were a Map that dropped its
// first-inserted key with keys().next(), which cost ~22 µs a new key at 100,000 (deleted entries walked past)
// and forgot a key spent a moment ago if it was first spent long ago.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_TRACKED, RateLimiter } from '../../../src/intake/abuse/rate-limit.js';

test('rate limiter at MAX_TRACKED keys forgets the least recently spent key, keeps the one in use', () => {
  const now = 1_000_000;
  const rl = new RateLimiter(3, () => now);
  try {
    for (let i = 0; i < 3; i++) rl.spend('busy');
    for (let i = 0; i < MAX_TRACKED - 2; i++) rl.spend(`quiet-${i}`);
    rl.spend('busy');
    assert.equal(rl.tracked, MAX_TRACKED - 1);
    rl.spend('one-more');
    rl.spend('and-another');
    assert.equal(rl.tracked, MAX_TRACKED, 'bounded');
    assert.deepEqual(rl.check('busy'), { ok: false, retryAfterSec: 40 }, 'the key spent lately is still counted');
    assert.deepEqual(rl.check('quiet-0'), { ok: true }, 'the least recently spent key was forgotten');
  } finally {
    rl.close();
  }
});
