// The one doubling backoff: the waits verification, the WebSub hub, the relay and the embedded database's
// reopening each computed with a formula of their own before it, for the same failure counts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { doublingBackoffMs } from '../../src/platform/retry.js';
import { backoffMs } from '../../src/verification/manners.js';
import { reopenBackoffMs } from '../../src/platform/db/disk-guard.js';
import { retryDelayMs, DEFAULT_TIMING } from '../../src/push/websub/outcomes.js';

test('doublingBackoffMs: the base, doubled per further failure, up to the maximum', () => {
  assert.deepEqual(
    [0, 1, 2, 3, 4, 7, 8, 40, 5000].map((n) => doublingBackoffMs(n, 30_000, 3_600_000)),
    [30_000, 30_000, 60_000, 120_000, 240_000, 1_920_000, 3_600_000, 3_600_000, 3_600_000],
  );
  assert.equal(doublingBackoffMs(5000, 0, 1000), 0, 'a base of 0 stays 0, not NaN');
});

test('the waits of verification, the database reopening and the WebSub hub, as each was written before', () => {
  for (let n = 0; n <= 40; n++) {
    assert.equal(backoffMs(n), n <= 0 ? 0 : Math.min(24 * 3600_000, 60_000 * 2 ** Math.min(n - 1, 30)), `verification, ${n}`);
    assert.equal(reopenBackoffMs(n), Math.min(60_000, 1000 * 2 ** Math.max(0, n - 1)), `reopen, ${n}`);
    const t = DEFAULT_TIMING;
    const hub = n >= t.failAfter ? t.retryMaxMs : Math.min(t.retryMaxMs, t.retryBaseMs * 2 ** Math.max(0, Math.min(n - 1, 30)));
    assert.equal(retryDelayMs(n, t), hub, `websub, ${n}`);
  }
});
