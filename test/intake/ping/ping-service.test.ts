// The one intake path: screens around validation, outcomes reported once per ping, the throttle worded
// once, and an extra write committed in the ping's own transaction (RSS Ping's payload) without putting
// any other ping at risk.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { findPingsByUrl, findWeblog } from '../../helpers/rows.js';
import type { PingResult } from '../../../src/intake/ping/ping-service.js';
import { REFUSAL_STATUS, throttleRefusal } from '../../../src/intake/ping/refusals.js';
import type { ValidPing } from '../../../src/intake/ping/validate.js';

let t: TestApp;
const outcomes: [string, PingResult][] = [];
const screened: { url: string; extra: readonly string[] }[] = [];
before(async () => {
  t = await startApp({ PING_MIN_INTERVAL: 300 });
  t.app.pings.onOutcome((method, r) => outcomes.push([method, r]));
  t.app.pings.addScreen({
    client: (raw) => (raw.clientAddr === '192.0.2.66' ? { ok: false, reason: 'blocked', message: 'screened client' } : undefined),
    ping: (ping, extra) => {
      screened.push({ url: ping.url, extra });
      return ping.name === 'Screened Name' ? { ok: false, reason: 'blocked', message: 'screened ping' } : undefined;
    },
  });
});
after(async () => {
  await t.close();
});

const reportsFor = (url: string) => outcomes.filter(([, r]) => (r.ok ? r.ping.url === url : r.message.includes(url)));
const valid = (url: string): ValidPing => ({
  method: 'rssPing',
  name: 'Extra',
  url,
  changesUrl: null,
  rssUrl: null,
  tags: null,
  clientAddr: null,
  userAgent: null,
});

test('a client screen refuses before validation; a ping screen sees the validated ping and the extra URLs', async () => {
  const before = outcomes.length;
  const r = await t.app.pings.accept({ method: 'ping', name: null, url: 'not a url', clientAddr: '192.0.2.66' });
  assert.deepEqual([r.ok, !r.ok && r.reason, !r.ok && r.message], [false, 'blocked', 'screened client']);
  assert.equal(outcomes.length, before + 1, 'reported once');

  const url = uniqueUrl('screen');
  const a = t.app.pings.admit(
    { method: 'rssPing', name: 'Screened Name', url: url.replace(/^http:\/\/([^/]+)/, (_m, h: string) => `HTTP://${h.toUpperCase()}`) },
    ['http://feeds.example/x'],
  );
  assert.equal(a.ok, false);
  const last = screened.at(-1)!;
  assert.equal(last.url, url, 'the screen saw the normalised URL');
  assert.deepEqual(last.extra, ['http://feeds.example/x']);
  assert.equal((await findPingsByUrl(t.app.db, url)).length, 0);
});

test('an invalid ping is refused by validation with its field, reported once, never screened as a ping', async () => {
  const n = screened.length;
  const before = outcomes.length;
  const r = await t.app.pings.accept({ method: 'ping', name: 'x', url: 'ftp://example.com/' });
  assert.equal(r.ok, false);
  assert.equal(!r.ok && r.reason, 'invalid');
  assert.equal(!r.ok && r.field, 'url');
  assert.equal(screened.length, n);
  assert.equal(outcomes.length, before + 1);
});

test("an extra write commits in the ping's transaction: it sees the ping's id, and both are stored", async () => {
  const url = uniqueUrl('extra-ok');
  let seen: { id: number; receivedAt: Date } | undefined;
  const r = await t.app.pings.store(valid(url), async (tx, accepted) => {
    seen = accepted;
    // Inside the transaction the ping row is already visible.
    const [row] = await tx.query<{ n: number }>('select count(*)::int as n from pings where id = $1', [accepted.id]);
    assert.equal(Number(row.n), 1);
  });
  assert.equal(r.ok, true);
  assert.equal(r.ok && r.id, seen?.id);
  assert.equal((await findPingsByUrl(t.app.db, url)).length, 1);
  assert.equal(reportsFor(url).length, 1);
});

test('REGRESSION: a failing extra write refuses its own ping only; pings committed beside it are accepted', async () => {
  const bad = uniqueUrl('extra-bad');
  const others = Array.from({ length: 20 }, () => uniqueUrl('beside'));
  const results = await Promise.all([
    ...others.slice(0, 10).map((u) => t.app.pings.store(valid(u))),
    t.app.pings.store(valid(bad), async () => {
      throw new Error('payload table is gone');
    }),
    ...others.slice(10).map((u) => t.app.pings.store(valid(u))),
  ]);
  const refused = results[10];
  assert.deepEqual([refused.ok, !refused.ok && refused.reason], [false, 'unavailable']);
  assert.equal(!refused.ok && REFUSAL_STATUS[refused.reason], 503);
  assert.equal(await findWeblog(t.app.db, bad), undefined, 'nothing of the refused ping is stored');
  for (const [i, r] of results.entries()) if (i !== 10) assert.equal(r.ok, true, `ping ${i} accepted`);
  for (const u of others) assert.equal((await findPingsByUrl(t.app.db, u)).length, 1, u);
});

test('the throttle is worded once: the read-only check and the commit refuse a repeat ping the same way', async () => {
  const url = uniqueUrl('throttle');
  assert.equal((await t.app.pings.store(valid(url))).ok, true);
  const pre = await t.app.pings.throttled(valid(url));
  const committed = await t.app.pings.store(valid(url));
  assert.ok(pre && !committed.ok);
  assert.equal(pre.reason, 'throttled');
  assert.equal(!committed.ok && committed.reason, 'throttled');
  const shape = (m: string) => m.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(in \d+ seconds\)/, 'T');
  assert.equal(shape(pre.message), shape(!committed.ok ? committed.message : ''));
  assert.equal(await t.app.pings.throttled(valid(uniqueUrl('never'))), undefined, 'an unknown weblog is not throttled');
  // The wording itself.
  const at = new Date('2026-11-22T10:00:00Z');
  assert.deepEqual(throttleRefusal('http://a.example/', at, 300, at.getTime() + 100_000), {
    ok: false,
    reason: 'throttled',
    retryAfterSec: 200,
    message: 'http://a.example/ was pinged less than 300 seconds ago; please ping again after 2026-11-22T10:05:00Z (in 200 seconds).',
  });
});
