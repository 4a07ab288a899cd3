// The polite client's decisions as pure functions: what a failed fetch or an HTTP status means for the
// ping, Retry-After read as an absolute time (capped at a week), exponential backoff (1 min doubling up
// to 24 h), where a run of permanent redirects leads, and when a seen move updates the stored URL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { FetchErrorCode } from '../../src/platform/fetch/safe-fetch.js';
import {
  backoffMs,
  decideMove,
  isFailure,
  outcomeOfFetchError,
  outcomeOfStatus,
  permanentTarget,
  statusClass,
} from '../../src/verification/manners.js';
import { OUTCOMES, type Outcome } from '../../src/platform/outcomes.js';
import { retryAfter } from '../../src/platform/retry.js';

const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const WEEK = 7 * DAY;

test('outcomeOfFetchError: every FetchErrorCode has its outcome', () => {
  // A Record over the union: a FetchErrorCode added to safe-fetch.ts without a line here fails typecheck.
  const expected: Record<FetchErrorCode, Outcome> = {
    FETCH_URL_INVALID: 'refused',
    FETCH_ADDRESS_BLOCKED: 'refused',
    FETCH_TOO_LARGE: 'too_large',
    FETCH_DNS_FAILED: 'unreachable',
    FETCH_TIMEOUT: 'unreachable',
    FETCH_TOO_MANY_REDIRECTS: 'unreachable',
    FETCH_NETWORK: 'unreachable',
    FETCH_BAD_RESPONSE: 'unreachable',
    FETCH_BUSY: 'unreachable',
  };
  for (const [code, outcome] of Object.entries(expected) as [FetchErrorCode, Outcome][]) {
    assert.equal(outcomeOfFetchError(code), outcome, code);
    assert.ok(OUTCOMES.includes(outcomeOfFetchError(code)), `${code} gives a listed outcome`);
  }
});

test('isFailure: only unreachable counts towards backoff (our refusals and size bound do not)', () => {
  for (const o of OUTCOMES) assert.equal(isFailure(o), o === 'unreachable', o);
});

test('outcomeOfStatus: 200/203/226 read the body; 304, 410, retryable and not-a-feed statuses are final', () => {
  const expected: [number, Outcome | 'body'][] = [
    [200, 'body'],
    [203, 'body'],
    [226, 'body'],
    [304, 'not_modified'],
    [401, 'not_a_feed'],
    [403, 'not_a_feed'],
    [404, 'not_a_feed'],
    [408, 'unreachable'],
    [410, 'gone'],
    [429, 'unreachable'],
    [500, 'unreachable'],
    [502, 'unreachable'],
    [503, 'unreachable'],
  ];
  for (const [status, outcome] of expected) assert.equal(outcomeOfStatus(status), outcome, String(status));
});

test('statusClass: the hundreds, with the edges of each class, and other for anything outside 200–599', () => {
  const expected: [number, string][] = [
    [0, 'other'],
    [100, 'other'],
    [199, 'other'],
    [200, '2xx'],
    [226, '2xx'],
    [299, '2xx'],
    [300, '3xx'],
    [304, '3xx'],
    [399, '3xx'],
    [400, '4xx'],
    [404, '4xx'],
    [499, '4xx'],
    [500, '5xx'],
    [503, '5xx'],
    [599, '5xx'],
    [600, 'other'],
    [999, 'other'],
  ];
  for (const [status, cls] of expected) assert.equal(statusClass(status), cls, String(status));
});

test('retryAfter: delay-seconds is counted from now', () => {
  const now = new Date('2026-11-22T12:00:00.000Z');
  assert.equal(retryAfter('120', now)?.toISOString(), '2026-11-22T12:02:00.000Z');
  assert.equal(retryAfter('  120 ', now)?.toISOString(), '2026-11-22T12:02:00.000Z');
  assert.equal(retryAfter('0', now)?.toISOString(), now.toISOString());
});

test('retryAfter: an HTTP-date (IMF-fixdate) is taken as the absolute time it names', () => {
  const now = new Date('2026-10-20T12:00:00.000Z');
  assert.equal(retryAfter('Wed, 21 Oct 2026 07:28:00 GMT', now)?.toISOString(), '2026-10-21T07:28:00.000Z');
});

test('retryAfter: a date in the past means now', () => {
  const now = new Date('2026-10-20T12:00:00.000Z');
  assert.equal(retryAfter('Wed, 21 Oct 2015 07:28:00 GMT', now)?.toISOString(), now.toISOString());
});

test('retryAfter: garbage, empty and absent values are undefined', () => {
  const now = new Date('2026-11-22T12:00:00.000Z');
  assert.equal(retryAfter('garbage', now), undefined);
  assert.equal(retryAfter('soon', now), undefined);
  assert.equal(retryAfter('120 seconds', now), undefined);
  assert.equal(retryAfter('', now), undefined);
  assert.equal(retryAfter('   ', now), undefined);
  assert.equal(retryAfter(undefined, now), undefined);
  assert.equal(retryAfter([], now), undefined);
});

// Bug demonstration (see the report): anything that is not all digits goes to Date.parse, and V8's
// Date.parse reads many non-dates as a year ('+3600' → the year 3600, 'max-age=3600' likewise, 'retry in
// 2030' → 2030-01-01). Neither delay-seconds (1*DIGIT) nor an HTTP-date, so "unreadable" → undefined is
// promised; instead the host is blocked for the whole one-week cap.
test('retryAfter: a value that is neither delay-seconds nor an HTTP-date is undefined, not a week', () => {
  const now = new Date('2026-11-22T12:00:00.000Z');
  for (const v of ['+3600', 'max-age=3600', 'retry in 2030']) assert.equal(retryAfter(v, now), undefined, JSON.stringify(v));
});

test('retryAfter: of an array header, the first value is read', () => {
  const now = new Date('2026-11-22T12:00:00.000Z');
  assert.equal(retryAfter(['60', '3600'], now)?.toISOString(), '2026-11-22T12:01:00.000Z');
});

test('retryAfter: a huge value is capped at a week from now (seconds or date), or at the given cap', () => {
  const now = new Date('2026-11-22T12:00:00.000Z');
  const week = new Date(now.getTime() + WEEK).toISOString();
  assert.equal(week, '2026-11-29T12:00:00.000Z');
  assert.equal(retryAfter('99999999999', now)?.toISOString(), week);
  assert.equal(retryAfter(String(7 * 86400 + 1), now)?.toISOString(), week);
  assert.equal(retryAfter(String(7 * 86400 - 1), now)?.toISOString(), '2026-11-29T11:59:59.000Z');
  assert.equal(retryAfter('Fri, 01 Jan 2100 00:00:00 GMT', now)?.toISOString(), week);
  assert.equal(retryAfter('7200', now, HOUR)?.toISOString(), '2026-11-22T13:00:00.000Z');
});

test('backoffMs: 0 for no failures, then 1 min doubling per failure, capped at 24 h', () => {
  const expected: [number, number][] = [
    [-1, 0],
    [0, 0],
    [1, MIN],
    [2, 2 * MIN],
    [3, 4 * MIN],
    [4, 8 * MIN],
    [5, 16 * MIN],
    [6, 32 * MIN],
    [7, 64 * MIN],
    [8, 128 * MIN],
    [9, 256 * MIN],
    [10, 512 * MIN],
    [11, 1024 * MIN], // 17 h 4 min
    [12, DAY], // 2048 min would be 34 h
    [40, DAY],
    [1000, DAY],
  ];
  for (const [failures, ms] of expected) assert.equal(backoffMs(failures), ms, `${failures} failures`);
});

test('permanentTarget: the last hop of the unbroken run of 301/308 hops from the start', () => {
  assert.equal(permanentTarget([]), undefined);
  assert.equal(permanentTarget([{ status: 301, to: 'http://a.example/feed' }]), 'http://a.example/feed');
  assert.equal(permanentTarget([{ status: 308, to: 'http://a.example/feed' }]), 'http://a.example/feed');
  assert.equal(
    permanentTarget([
      { status: 301, to: 'http://a.example/feed' },
      { status: 308, to: 'https://b.example/feed' },
    ]),
    'https://b.example/feed',
  );
  // Stops at the 302: what follows a temporary hop is borrowed.
  assert.equal(
    permanentTarget([
      { status: 301, to: 'http://a.example/feed' },
      { status: 302, to: 'http://b.example/feed' },
      { status: 301, to: 'http://c.example/feed' },
    ]),
    'http://a.example/feed',
  );
  assert.equal(
    permanentTarget([
      { status: 302, to: 'http://a.example/feed' },
      { status: 301, to: 'http://b.example/feed' },
    ]),
    undefined,
  );
  for (const temporary of [303, 307])
    assert.equal(permanentTarget([{ status: temporary, to: 'http://a.example/feed' }]), undefined, String(temporary));
});

const CLEAR = { movedTo: null, movedSeen: 0 };

test('decideMove: no move, or a move to the same URL, adopts nothing and clears the state', () => {
  const url = 'http://blog.example.com/feed';
  assert.deepEqual(decideMove(url, url, { movedTo: 'http://other.example/feed', movedSeen: 1 }), { adopt: undefined, state: CLEAR });
  assert.deepEqual(decideMove(url, undefined, { movedTo: 'http://other.example/feed', movedSeen: 1 }), { adopt: undefined, state: CLEAR });
});

test('decideMove: http → https of the same host, path and query is adopted at once', () => {
  const r = decideMove('http://blog.example.com/feed?x=1', 'https://blog.example.com/feed?x=1', CLEAR);
  assert.deepEqual(r, { adopt: 'https://blog.example.com/feed?x=1', state: CLEAR });
});

test('decideMove: http → https of a different host (or path) is not adopted at once', () => {
  const host = decideMove('http://blog.example.com/feed', 'https://www.blog.example.com/feed', CLEAR);
  assert.deepEqual(host, { adopt: undefined, state: { movedTo: 'https://www.blog.example.com/feed', movedSeen: 1 } });
  const path = decideMove('http://blog.example.com/feed', 'https://blog.example.com/rss', CLEAR);
  assert.deepEqual(path, { adopt: undefined, state: { movedTo: 'https://blog.example.com/rss', movedSeen: 1 } });
  const down = decideMove('https://blog.example.com/feed', 'http://blog.example.com/feed', CLEAR);
  assert.deepEqual(down, { adopt: undefined, state: { movedTo: 'http://blog.example.com/feed', movedSeen: 1 } });
});

test('decideMove: a first sighting is counted, the second sighting of the same target is adopted', () => {
  const current = 'http://blog.example.com/feed';
  const target = 'http://feeds.example.net/blog';
  const first = decideMove(current, target, CLEAR);
  assert.deepEqual(first, { adopt: undefined, state: { movedTo: target, movedSeen: 1 } });
  const second = decideMove(current, target, first.state);
  assert.deepEqual(second, { adopt: target, state: CLEAR });
});

test('decideMove: a different target resets the count', () => {
  const current = 'http://blog.example.com/feed';
  const a = 'http://feeds.example.net/a';
  const b = 'http://feeds.example.net/b';
  const first = decideMove(current, a, CLEAR);
  const other = decideMove(current, b, first.state);
  assert.deepEqual(other, { adopt: undefined, state: { movedTo: b, movedSeen: 1 } });
  // Back to a: counted afresh from one, not adopted.
  const back = decideMove(current, a, other.state);
  assert.deepEqual(back, { adopt: undefined, state: { movedTo: a, movedSeen: 1 } });
  assert.equal(decideMove(current, a, back.state).adopt, a);
});
