// The in-memory per-minute tally behind /api/stats: counts by minute and series, drain and restore (a
// failed flush loses nothing), the busiest hosts per flush and the bound on tracked hosts, and the
// latency histograms' percentiles. Pure: no app, no database.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  HOSTS_PER_FLUSH,
  LATENCY_BOUNDS_MS,
  MAX_TRACKED_HOSTS,
  MINUTE_MS,
  MinuteTally,
  minuteOf,
  percentile,
  type SeriesCount,
} from '../../../src/operations/stats/minute-tally.js';

/** A fixed minute start (2026-11-23 07:00 UTC) and helpers around it. */
const T0 = Date.UTC(2026, 10, 23, 7, 0, 0);
const DAY_MS = 24 * 60 * MINUTE_MS;
const sorted = (cs: SeriesCount[]) => [...cs].sort((a, b) => a.minute - b.minute || (a.series < b.series ? -1 : 1));

test('minuteOf: the start of the UTC minute', () => {
  assert.equal(minuteOf(T0), T0);
  assert.equal(minuteOf(T0 + 59_999), T0);
  assert.equal(minuteOf(T0 + 60_000), T0 + MINUTE_MS);
});

test('counts land in their minute and series; n adds up', () => {
  const t = new MinuteTally();
  t.count('accepted', T0 + 1);
  t.count('accepted', T0 + 59_999);
  t.count('refused:throttled', T0 + 30_000);
  t.count('accepted', T0 + 60_000);
  t.count('verification:verified', T0 + 61_000, 7);
  assert.deepEqual(sorted(t.pending().counts), [
    { minute: T0, series: 'accepted', n: 2 },
    { minute: T0, series: 'refused:throttled', n: 1 },
    { minute: T0 + MINUTE_MS, series: 'accepted', n: 1 },
    { minute: T0 + MINUTE_MS, series: 'verification:verified', n: 7 },
  ]);
});

test('pending() does not take; drain() takes and empties; restore() puts back so the next drain carries it', () => {
  const t = new MinuteTally();
  t.count('accepted', T0, 3);
  t.host('a.example', true, T0);
  t.host('a.example', false, T0);
  assert.equal(t.pending().counts.length, 1);
  assert.equal(t.pending().counts.length, 1, 'pending twice: still there');

  const d = t.drain();
  assert.deepEqual(d.counts, [{ minute: T0, series: 'accepted', n: 3 }]);
  assert.deepEqual(d.hosts, [{ minute: T0, host: 'a.example', accepted: 1, refused: 1 }]);
  assert.deepEqual(t.drain(), { counts: [], hosts: [] }, 'drained: nothing left');

  // The flush failed; meanwhile more was counted. Restoring adds to it, nothing is lost or doubled.
  t.count('accepted', T0, 2);
  t.host('a.example', true, T0);
  t.host('b.example', true, T0 + MINUTE_MS);
  t.restore(d);
  const again = t.drain();
  assert.deepEqual(again.counts, [{ minute: T0, series: 'accepted', n: 5 }]);
  assert.deepEqual(
    [...again.hosts].sort((a, b) => a.minute - b.minute),
    [
      { minute: T0, host: 'a.example', accepted: 2, refused: 1 },
      { minute: T0 + MINUTE_MS, host: 'b.example', accepted: 1, refused: 0 },
    ],
  );
});

test('hosts: a flush names only the HOSTS_PER_FLUSH busiest of each minute, busiest first', () => {
  const t = new MinuteTally();
  // host-k gets k+1 pings in minute T0; 5 more hosts than a flush names.
  const n = HOSTS_PER_FLUSH + 5;
  for (let k = 0; k < n; k++) for (let i = 0; i <= k; i++) t.host(`host-${k}.example`, i % 2 === 0, T0 + k);
  // Another minute with one quiet host: each minute has its own busiest.
  t.host('quiet.example', false, T0 + MINUTE_MS);
  const { hosts } = t.drain();
  const first = hosts.filter((h) => h.minute === T0);
  assert.equal(first.length, HOSTS_PER_FLUSH);
  assert.deepEqual(
    first.map((h) => h.host),
    Array.from({ length: HOSTS_PER_FLUSH }, (_, i) => `host-${n - 1 - i}.example`),
  );
  // host-24 had 25 pings: 13 accepted (even i), 12 refused.
  assert.deepEqual(first[0], { minute: T0, host: `host-${n - 1}.example`, accepted: 13, refused: 12 });
  assert.deepEqual(
    hosts.filter((h) => h.minute === T0 + MINUTE_MS),
    [{ minute: T0 + MINUTE_MS, host: 'quiet.example', accepted: 0, refused: 1 }],
  );
});

test('hosts: past MAX_TRACKED_HOSTS a new host is ignored, the tracked ones still count; a drain frees the room', () => {
  const t = new MinuteTally();
  for (let k = 0; k < MAX_TRACKED_HOSTS; k++) t.host(`h${k}.example`, true, T0);
  t.host('late.example', true, T0);
  t.host('late.example', true, T0);
  // An existing host keeps counting: h7 becomes the busiest.
  t.host('h7.example', true, T0);
  t.host('h7.example', false, T0);
  const { hosts } = t.drain();
  assert.equal(hosts.length, HOSTS_PER_FLUSH);
  assert.deepEqual(hosts[0], { minute: T0, host: 'h7.example', accepted: 2, refused: 1 });
  assert.ok(!hosts.some((h) => h.host === 'late.example'), 'the host past the bound was not tracked');
  // After the drain the bound starts over.
  t.host('late.example', true, T0);
  assert.deepEqual(t.drain().hosts, [{ minute: T0, host: 'late.example', accepted: 1, refused: 0 }]);
});

test('percentile(): the upper bound of the bucket holding the quantile; empty → null; the open bucket → its lower bound', () => {
  const empty = new Array(LATENCY_BOUNDS_MS.length + 1).fill(0);
  assert.equal(percentile(empty, 0.5), null);
  const b = (at: Record<number, number>) => empty.map((_, i) => at[i] ?? 0);
  // 10 samples: 5 in ≤1 ms, 4 in ≤5 ms, 1 in ≤500 ms.
  const mixed = b({ 0: 5, 2: 4, 8: 1 });
  assert.equal(percentile(mixed, 0.5), 1, 'rank 5 is the last of the first bucket');
  assert.equal(percentile(mixed, 0.6), 5);
  assert.equal(percentile(mixed, 0.9), 5);
  assert.equal(percentile(mixed, 0.99), 500);
  // Everything slower than the last bound: reported as that bound (5000 ms).
  const slow = b({ [LATENCY_BOUNDS_MS.length]: 3 });
  assert.equal(percentile(slow, 0.5), 5000);
  assert.equal(percentile(slow, 0.99), LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]);
  assert.equal(percentile(b({ 11: 1 }), 0.5), 5000, 'the last closed bucket (≤5000 ms) too');
});

test('latencyMs(): a sample goes to the first bucket whose bound it does not exceed', () => {
  const t = new MinuteTally();
  // Exactly on a bound: that bucket (≤ 2.5); just above: the next one.
  t.latencyMs(2.5, T0);
  assert.deepEqual(t.latencyPercentiles(T0, T0), { p50: [2.5], p99: [2.5] });
  const u = new MinuteTally();
  u.latencyMs(2.6, T0);
  u.latencyMs(0.2, T0 + MINUTE_MS);
  u.latencyMs(99_000, T0 + 2 * MINUTE_MS);
  assert.deepEqual(u.latencyPercentiles(T0, T0 + 2 * MINUTE_MS), { p50: [5, 1, 5000], p99: [5, 1, 5000] });
});

test('latencyPercentiles(): one entry per minute, null without samples; the same ring slot a day earlier is not today', () => {
  const t = new MinuteTally();
  // Minute 0: 99 fast and 1 slow sample; minute 1: none; minute 2: one at 40 ms.
  for (let i = 0; i < 99; i++) t.latencyMs(0.5, T0 + i);
  t.latencyMs(700, T0 + 100);
  t.latencyMs(40, T0 + 2 * MINUTE_MS + 5);
  // A day before minute 3: the same slot of the ring, but not minute 3's sample.
  t.latencyMs(3, T0 + 3 * MINUTE_MS - DAY_MS);
  const r = t.latencyPercentiles(T0, T0 + 3 * MINUTE_MS);
  assert.deepEqual(r.p50, [1, null, 50, null]);
  assert.deepEqual(r.p99, [1, null, 50, null]);
  // Asked for a day earlier, that sample is there.
  assert.deepEqual(t.latencyPercentiles(T0 + 3 * MINUTE_MS - DAY_MS, T0 + 3 * MINUTE_MS - DAY_MS), { p50: [5], p99: [5] });
  // p99 sees the slow sample once it is more than 1 % of the minute.
  t.latencyMs(700, T0 + 200);
  assert.deepEqual(t.latencyPercentiles(T0, T0), { p50: [1], p99: [1000] });
  // A new day's sample replaces the slot: yesterday's histogram is not mixed in.
  t.latencyMs(3000, T0 + DAY_MS);
  assert.deepEqual(t.latencyPercentiles(T0 + DAY_MS, T0 + DAY_MS), { p50: [5000], p99: [5000] });
  assert.deepEqual(t.latencyPercentiles(T0, T0), { p50: [null], p99: [null] }, 'the old minute is gone from the ring');
});

test('latency is not drained: a flush leaves the last day of histograms', () => {
  const t = new MinuteTally();
  t.latencyMs(7, T0);
  t.drain();
  assert.deepEqual(t.latencyPercentiles(T0, T0), { p50: [10], p99: [10] });
});
