// The time decisions of a render: pure functions of the database clock.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closeLimitUs, cursorFor, liveMayWait, nextSecond, renderTime, wholeSecond } from '../../../src/publishing/render/render-time.js';

const S = 1_000_000;

test('a render renders as of the database clock, or as of the injected time', () => {
  assert.deepEqual(renderTime({ nowUs: 100 * S, oldestOpenUs: null }), {
    nowUs: 100 * S,
    injected: false,
    clock: { nowUs: 100 * S, oldestOpenUs: null },
  });
  const t = renderTime({ nowUs: 100 * S, oldestOpenUs: null }, new Date(5000));
  assert.deepEqual([t.nowUs, t.injected], [5000 * 1000, true]);
});

test('documents are dated in whole seconds', () => {
  assert.equal(wholeSecond(1_234_999_999), 1_234_000);
  assert.equal(wholeSecond(1_000_000), 1000);
});

test('the cursor never passes the oldest open transaction, the clock or the window end', () => {
  const open = renderTime({ nowUs: 100 * S, oldestOpenUs: 90 * S });
  assert.equal(cursorFor(open, 95 * S), 90 * S, 'a ping of the open transaction may still commit with a stamp after 90 s');
  assert.equal(cursorFor(open, 80 * S), 80 * S);
  const idle = renderTime({ nowUs: 100 * S, oldestOpenUs: null });
  assert.equal(cursorFor(idle, 120 * S), 100 * S);
});

test('hours close only up to the oldest open transaction and the render time', () => {
  assert.equal(closeLimitUs(renderTime({ nowUs: 100 * S, oldestOpenUs: 70 * S })), 70 * S);
  assert.equal(closeLimitUs(renderTime({ nowUs: 100 * S, oldestOpenUs: null }, new Date(50_000))), 50 * S);
  assert.equal(closeLimitUs(renderTime({ nowUs: 100 * S, oldestOpenUs: null })), 100 * S);
});

test("a dear live document waits at most ten renders' time, and never until its rendering is older than maxAgeSec", () => {
  const now = 1000 * S;
  // Made 5 s ago, dated 6 s ago, took 2 s: 5 < 10 × 2 and 6 + 2 × 10 + 2 = 28 s < 60.
  const prev = { createdUs: now - 5 * S, updatedMs: (now - 6 * S) / 1000, renderMs: 2000 };
  assert.equal(liveMayWait(prev, now, 60, 10, 1000), true);
  assert.equal(liveMayWait({ ...prev, renderMs: 999 }, now, 60, 10, 1000), false, 'a render under a second is done every tick');
  assert.equal(liveMayWait({ ...prev, createdUs: now - 20 * S }, now, 60, 10, 1000), false, "ten renders' time has passed");
  // Dated 37 s ago: 37 + 20 + 2 = 59 s < 60 still waits; dated 38 s ago, 60 s: rendered now.
  assert.equal(
    liveMayWait({ ...prev, updatedMs: (now - 37 * S) / 1000, createdUs: now - 15 * S, renderMs: 2000 }, now, 60, 10, 1000),
    true,
  );
  assert.equal(
    liveMayWait({ ...prev, updatedMs: (now - 38 * S) / 1000, createdUs: now - 15 * S, renderMs: 2000 }, now, 60, 10, 1000),
    false,
  );
  assert.equal(
    liveMayWait({ ...prev, renderMs: 40_000, createdUs: now - 5 * S }, now, 60, 10, 1000),
    false,
    'a render too long for the bound (6 + 20 + 40 s) is never put off',
  );
});

test('a rendering in the same second as the previous one is dated the next second: the clock waits for it, an injected time moves', () => {
  const clock = { nowUs: 100.4 * S, oldestOpenUs: null };
  assert.equal(nextSecond(undefined, renderTime(clock)), null);
  assert.equal(nextSecond({ updatedMs: 99_000 }, renderTime(clock)), null, 'an earlier second: nothing to wait for');
  assert.deepEqual(nextSecond({ updatedMs: 100_000 }, renderTime(clock)), { nowUs: 101 * S, updatedMs: 101_000, waitMs: 600 });
  assert.deepEqual(nextSecond({ updatedMs: 100_000 }, renderTime(clock, new Date(100_400))), {
    nowUs: 101 * S,
    updatedMs: 101_000,
    waitMs: 0,
  });
  // Further ahead than a second (a clock that went back): dated after it, but not waited for.
  assert.deepEqual(nextSecond({ updatedMs: 105_000 }, renderTime(clock)), { nowUs: 106 * S, updatedMs: 106_000, waitMs: 0 });
});
