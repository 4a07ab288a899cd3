// Dead letters and the operator's view: a relay that keeps failing runs out of attempts and shows in
// `pingd relay status`; `pingd relay retry` sends it again once the target is fixed; the breaker opens
// after failures in a row; retention deletes finished jobs; the metrics count outcomes by target.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';
import { formatStatus } from '../../../src/push/relay/relay-command.js';
import { targetStatus } from '../../../src/push/relay/target-repository.js';
import { prune } from '../../../src/operations/retention/prune.js';
import { httpPing, relayCli, startTarget, type Target } from './helpers.js';
import { waitFor } from '../../helpers/wait.js';

let target: Target;
let t: TestApp;
let base: string;

before(async () => {
  target = await startTarget('127.0.0.43');
  t = await startApp({
    RELAY_TARGETS: [target.url],
    FETCH_ALLOW_ADDRESSES: parseCidrList('127.0.0.0/8'),
    RELAY_RATE_PER_MIN: 6000,
    RELAY_MAX_ATTEMPTS: 2,
  });
  Object.assign(t.app.relay.timing, { retryBaseMs: 50, retryMaxMs: 100, breakerAfter: 100, pollMs: 100, deriveGapMs: 20, flushMs: 20 });
  base = await t.listen();
});

after(async () => {
  await t?.close();
  await target?.close();
});

/** Runs `pingd relay …` on the app's database; returns the exit code and what it printed. */
const cli = (...positionals: string[]) => relayCli(t, ...positionals);

test('a relay that keeps failing becomes a dead letter, shown by status and sent again by retry', async () => {
  await target.set({ fault_all: true });
  const url = uniqueUrl('dead');
  try {
    assert.equal(await httpPing(base, 'Dead', url), 200);
    await waitFor(async () => (await targetStatus(t.app.db, 100))[0].dead === 1, { timeoutMs: 10_000, what: 'a dead letter' });
    assert.equal(target.calls.filter((c) => c.params[1] === url).length, 2, 'RELAY_MAX_ATTEMPTS tries');
    const s = await cli('status');
    assert.equal(s.code, 0);
    assert.match(s.out, /dead letters 1/);
    assert.match(s.out, /XMLRPC_FAULT/);
  } finally {
    await target.set({ fault_all: false });
  }
  const r = await cli('retry', target.url);
  assert.deepEqual(r, { code: 0, out: `1 dead letters of ${target.url} queued again` });
  await target.until((calls) => calls.filter((c) => c.params[1] === url).length === 3);
  await waitFor(async () => (await targetStatus(t.app.db, 100))[0].delivered >= 1, { timeoutMs: 5000, what: 'delivered' });
  assert.equal((await targetStatus(t.app.db, 100))[0].dead, 0);
  // The fault came before the delivery: shown as the previous error, with its time, not as the last one.
  const later = await cli('status');
  assert.match(later.out, /\n {2}last {6}attempt \S+, success \S+, previous error at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: XMLRPC_FAULT/);
  assert.doesNotMatch(later.out, /, error: /);
  assert.equal((await cli('retry', 'http://unknown.example/')).code, 1);
  assert.equal((await cli('frobnicate')).code, 2);
});

test("status shows the last error as the last attempt's only when no success came after it", () => {
  const row = {
    url: 'http://t.example/RPC2',
    ...{ delivered: 1, refused: 0, failed: 1, dead: 0, pending: 0, oldestPendingAt: null, dropped: 0, suppressed: 0 },
    ...{ breaker: 'closed' as const, failures: 0, openUntil: null, pingOnly: false, unconfiguredAt: null },
    lastError: 'FETCH_TIMEOUT: no complete answer within 5000 ms',
    lastAttemptAt: new Date('2026-11-28T05:00:00Z'),
  };
  const last = (r: Parameters<typeof formatStatus>[0][number]) => formatStatus([r]).split('\n').at(-1);
  const failedLast = { ...row, lastErrorAt: new Date('2026-11-28T05:00:00Z'), lastSuccessAt: new Date('2026-11-28T04:00:00Z') };
  assert.equal(
    last(failedLast),
    '  last      attempt 2026-11-28T05:00:00Z, success 2026-11-28T04:00:00Z, error: FETCH_TIMEOUT: no complete answer within 5000 ms',
  );
  const succeededLast = { ...row, lastErrorAt: new Date('2026-11-28T04:00:00Z'), lastSuccessAt: new Date('2026-11-28T05:00:00Z') };
  assert.equal(
    last(succeededLast),
    '  last      attempt 2026-11-28T05:00:00Z, success 2026-11-28T05:00:00Z, previous error at 2026-11-28T04:00:00Z: FETCH_TIMEOUT: no complete answer within 5000 ms',
  );
  assert.equal(
    last({ ...row, lastErrorAt: null, lastSuccessAt: null }),
    '  last      attempt 2026-11-28T05:00:00Z, success -, previous error: FETCH_TIMEOUT: no complete answer within 5000 ms',
  );
});

test('the breaker opens after failures in a row and shows in status', async () => {
  t.app.relay.timing.breakerAfter = 2;
  t.app.relay.timing.breakerPauseMs = 60_000;
  await target.set({ listen: false });
  try {
    for (let i = 0; i < 2; i++) assert.equal(await httpPing(base, 'Breaker', uniqueUrl('breaker')), 200);
    await waitFor(async () => (await targetStatus(t.app.db, 2))[0].breaker === 'open', { timeoutMs: 10_000, what: 'the breaker open' });
    assert.match((await cli('status')).out, /breaker {3}open until/);
  } finally {
    await target.set({ listen: true });
    t.app.relay.timing.breakerAfter = 100;
  }
  // The operator says it is back: retry closes the breaker.
  await cli('retry', target.url);
  await waitFor(async () => (await targetStatus(t.app.db, 100))[0].pending === 0, { timeoutMs: 10_000, what: 'the queue drained' });
});

test('metrics count relays by target and outcome; retention deletes finished jobs after a day', async () => {
  const res = await t.app.inject({ url: '/metrics' });
  assert.match(res.body, new RegExp(`pingd_relay_total\\{target="${target.url.replace(/[./]/g, '\\$&')}",outcome="delivered"\\} [1-9]`));
  assert.match(res.body, /pingd_relay_queue\{measure="depth"\} 0/);
  const [{ n }] = await t.app.db.query<{ n: number }>(`select count(*)::int as n from relay_jobs where state <> 'pending'`);
  assert.ok(Number(n) > 0);
  const kept = await prune(t.app.db, { pingDays: 0, archiveDays: 0, batchSize: 100 });
  assert.equal(kept.relayJobsDeleted, 0);
  // Counted by the update itself: a job of the earlier tests may still finish meanwhile (it did: 2 counted
  // before, 3 aged and deleted), and one finishing after it is a day too young to go. Delivered and refused
  // ones only: a dead letter (the breaker test can leave one) is kept 7 days, and 2 days is younger.
  const aged = await t.app.db.query(
    `update relay_jobs set finished_at = now() - interval '2 days' where state in ('delivered', 'refused') returning 1`,
  );
  const r = await prune(t.app.db, { pingDays: 0, archiveDays: 0, batchSize: 100 });
  assert.equal(r.relayJobsDeleted, aged.length);
});
