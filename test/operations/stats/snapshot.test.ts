// The pure shape of GET /api/stats: buildSnapshot from stored and pending counts, windowMinutes, isWindow.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FormatRegistry } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { MINUTE_MS, type SeriesCount } from '../../../src/operations/stats/minute-tally.js';
import {
  buildSnapshot,
  isWindow,
  REFUSALS,
  StatsReply,
  windowMinutes,
  type SnapshotInputs,
  type StatsWindow,
} from '../../../src/operations/stats/snapshot.js';

// TypeBox checks no string format unless told how (Fastify's serializer does not check them at all).
if (!FormatRegistry.Has('date-time'))
  FormatRegistry.Set('date-time', (v) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(v) && !Number.isNaN(Date.parse(v)));
const valid = (s: unknown) => Value.Check(StatsReply, s) || assert.fail(JSON.stringify([...Value.Errors(StatsReply, s)].slice(0, 3)));

// 2026-11-23 07:42:31.250 UTC: mid-minute, so "the current minute" is 07:42:00.
const NOW = Date.UTC(2026, 10, 23, 7, 42, 31, 250);
const CURRENT = Date.UTC(2026, 10, 23, 7, 42, 0);

function inputs(window: StatsWindow, counts: SeriesCount[], over: Partial<SnapshotInputs> = {}): SnapshotInputs {
  const size = window === '1h' ? 60 : 1440;
  return {
    window,
    now: NOW,
    counts,
    latency: { p50: new Array(size).fill(null), p99: new Array(size).fill(null) },
    topHosts: [],
    documents: [],
    health: { database: 'pglite', ready: true, pingQueue: 0, queues: [] },
    spam: { filter: 'mark', held: 0 },
    recent: [],
    uptimeSeconds: 12,
    ...over,
  };
}

test('isWindow: 1h and 24h only (not inherited properties)', () => {
  assert.equal(isWindow('1h'), true);
  assert.equal(isWindow('24h'), true);
  for (const w of ['2h', '', '1H', 'toString', '__proto__', 'constructor']) assert.equal(isWindow(w), false, w);
});

test('windowMinutes: the last minute is the current one; 60 or 1440 minutes', () => {
  assert.deepEqual(windowMinutes('1h', NOW), { from: CURRENT - 59 * MINUTE_MS, to: CURRENT });
  assert.deepEqual(windowMinutes('24h', NOW), { from: CURRENT - 1439 * MINUTE_MS, to: CURRENT });
  assert.deepEqual(windowMinutes('1h', CURRENT), { from: CURRENT - 59 * MINUTE_MS, to: CURRENT }, 'on the minute: that minute is the last');
});

test('1h: 60 minutes in Unix seconds, oldest first, ending with the current minute; every array as long', () => {
  const s = buildSnapshot(inputs('1h', []));
  assert.equal(s.window, '1h');
  assert.equal(s.bucketSeconds, 60);
  assert.equal(s.generatedAt, '2026-11-23T07:42:31.250Z');
  assert.equal(s.minutes.length, 60);
  assert.equal(s.minutes[59], CURRENT / 1000);
  assert.equal(s.minutes[0], CURRENT / 1000 - 59 * 60);
  for (let i = 1; i < 60; i++) assert.equal(s.minutes[i] - s.minutes[i - 1], 60);
  assert.equal(s.accepted.length, 60);
  for (const r of REFUSALS) assert.equal(s.refused[r].length, 60, r);
  valid(s);
});

test('24h: 1440 minutes ending with the current one', () => {
  const s = buildSnapshot(inputs('24h', [{ minute: CURRENT - 1439 * MINUTE_MS, series: 'accepted', n: 4 }]));
  assert.equal(s.minutes.length, 1440);
  assert.equal(s.accepted.length, 1440);
  assert.equal(s.minutes[1439], CURRENT / 1000);
  assert.equal(s.minutes[0], (CURRENT - 1439 * MINUTE_MS) / 1000);
  assert.equal(s.accepted[0], 4, 'the oldest minute of the window counts');
  assert.equal(s.totals.accepted, 4);
  valid(s);
});

test('counts land in their minute; counts of one minute from two sources add; outside the window they are ignored', () => {
  const s = buildSnapshot(
    inputs('1h', [
      { minute: CURRENT, series: 'accepted', n: 3 },
      // The same minute again (stored + this instance's pending): added.
      { minute: CURRENT, series: 'accepted', n: 2 },
      { minute: CURRENT - MINUTE_MS, series: 'accepted', n: 7 },
      { minute: CURRENT - 59 * MINUTE_MS, series: 'refused:invalid', n: 1 },
      // Just outside, on both sides.
      { minute: CURRENT - 60 * MINUTE_MS, series: 'accepted', n: 100 },
      { minute: CURRENT + MINUTE_MS, series: 'accepted', n: 1000 },
      { minute: CURRENT - 60 * MINUTE_MS, series: 'refused:brand_new', n: 5 },
    ]),
  );
  assert.equal(s.accepted[59], 5);
  assert.equal(s.accepted[58], 7);
  assert.equal(s.refused.invalid[0], 1);
  assert.equal(s.totals.accepted, 12);
  assert.equal(s.totals.refused.invalid, 1);
  assert.ok(!('brand_new' in s.refused), 'a reason seen only outside the window does not appear');
});

test('every known refusal reason is present even when zero; verification starts empty', () => {
  const s = buildSnapshot(inputs('1h', []));
  assert.deepEqual(Object.keys(s.refused).sort(), [...REFUSALS].sort());
  assert.deepEqual(REFUSALS, ['invalid', 'throttled', 'rate_limited', 'blocked', 'unavailable']);
  for (const r of REFUSALS) {
    assert.ok(
      s.refused[r].every((n) => n === 0),
      r,
    );
    assert.equal(s.totals.refused[r], 0, r);
  }
  assert.deepEqual(s.verification, {});
  assert.deepEqual(s.totals.verification, {});
  assert.equal(s.totals.accepted, 0);
});

test('a new refusal reason and verification outcomes appear as series of their own; totals are the sums', () => {
  const s = buildSnapshot(
    inputs('1h', [
      { minute: CURRENT, series: 'refused:too_large', n: 2 },
      { minute: CURRENT - 3 * MINUTE_MS, series: 'refused:too_large', n: 1 },
      { minute: CURRENT, series: 'refused:throttled', n: 4 },
      { minute: CURRENT, series: 'verification:verified', n: 3 },
      { minute: CURRENT - 10 * MINUTE_MS, series: 'verification:verified', n: 6 },
      { minute: CURRENT, series: 'verification:fetch_failed', n: 1 },
      { minute: CURRENT - 2 * MINUTE_MS, series: 'accepted', n: 9 },
      // Neither accepted, refused: nor verification: — not charted.
      { minute: CURRENT, series: 'something:else', n: 50 },
    ]),
  );
  assert.equal(s.refused.too_large.length, 60);
  assert.equal(s.refused.too_large[59], 2);
  assert.equal(s.refused.too_large[56], 1);
  assert.deepEqual(Object.keys(s.verification).sort(), ['fetch_failed', 'verified']);
  assert.equal(s.verification.verified[59], 3);
  assert.equal(s.verification.verified[49], 6);
  assert.equal(s.verification.fetch_failed[59], 1);
  const totals: StatsReply['totals'] = s.totals;
  assert.deepEqual(s.totals, {
    accepted: 9,
    refused: { invalid: 0, throttled: 4, rate_limited: 0, blocked: 0, unavailable: 0, too_large: 3 },
    verification: { verified: 9, fetch_failed: 1 },
  });
  // The totals are the sums of the per-minute series.
  const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);
  assert.equal(s.totals.accepted, sum(s.accepted));
  for (const [k, v] of Object.entries(s.refused)) assert.equal(totals.refused[k], sum(v), k);
  for (const [k, v] of Object.entries(s.verification)) assert.equal(totals.verification[k], sum(v), k);
  valid(s);
});

test('the other readings pass through unchanged', () => {
  const over: Partial<SnapshotInputs> = {
    latency: { p50: [...new Array(59).fill(null), 2.5], p99: [...new Array(59).fill(null), 50] },
    topHosts: [{ host: 'a.example', accepted: 3, refused: 1 }],
    documents: [{ path: '/changes.xml', name: 'changes.xml', renderedAt: null, ageSeconds: null, entries: null, renderMs: null }],
    health: {
      database: 'postgres',
      ready: false,
      reason: 'migrating',
      pingQueue: 4,
      queues: [{ name: 'verification', depth: 2, oldestAgeSeconds: 7 }],
    },
    recent: [{ id: 1, receivedAt: '2026-11-23T07:42:00.000Z', method: 'weblogUpdates.ping', name: 'N', url: 'http://a.example/' }],
    uptimeSeconds: 99,
  };
  const s = buildSnapshot(inputs('1h', [], over));
  assert.deepEqual(
    {
      latency: s.latencyMs,
      topHosts: s.topHosts,
      documents: s.documents,
      health: s.health,
      recent: s.recent,
      uptimeSeconds: s.uptimeSeconds,
    },
    {
      latency: over.latency,
      topHosts: over.topHosts,
      documents: over.documents,
      health: over.health,
      recent: over.recent,
      uptimeSeconds: 99,
    },
  );
  valid(s);
});

test('series names become keys only as own, plain names: "__proto__" is dropped, "constructor" is a series of its own', () => {
  const s = buildSnapshot(
    inputs('1h', [
      { minute: CURRENT, series: 'refused:__proto__', n: 7 },
      { minute: CURRENT, series: 'refused:constructor', n: 2 },
      { minute: CURRENT, series: 'verification:Not-A-Name', n: 3 },
      { minute: CURRENT, series: 'accepted', n: 1 },
    ]),
  );
  assert.equal(Object.getPrototypeOf({}).polluted, undefined);
  assert.equal(Object.hasOwn(s.refused, '__proto__'), false);
  assert.equal((Object.getOwnPropertyDescriptor(s.refused, 'constructor')?.value as number[]).at(-1), 2, 'its own array, not Object');
  assert.deepEqual(s.verification, {});
  assert.equal(s.totals.accepted, 1);
  valid(s);
});
