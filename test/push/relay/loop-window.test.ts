// Relay loops the User-Agent marker misses: A relays to a Ping-o-Matic-like forwarder that passes every ping
// on to A without pingd's marker, with PING_MIN_INTERVAL=0 (no throttle to end the loop). A weblog relayed
// to a target is not relayed to it again within RELAY_LOOP_WINDOW, whether the echo comes after the relay's
// answer or while the relay is still being sent, and is relayed again once the window has passed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';
import { targetStatus } from '../../../src/push/relay/target-repository.js';
import { derivedAll, httpPing } from './helpers.js';
import { startForwarder, type Forwarder } from './forwarder.js';
import { waitFor } from '../../helpers/wait.js';

let forwarder: Forwarder;
let t: TestApp;
let base = '';

before(async () => {
  // Passes every weblog on to A after answering A's relay, except the quiet- ones of the last test.
  forwarder = await startForwarder('127.0.0.53', () => base, { order: 'answer-first', forwards: (url) => !url.includes('://quiet-') });
  t = await startApp({
    RELAY_TARGETS: [forwarder.url],
    PING_MIN_INTERVAL: 0,
    PING_HOST_BUDGET: 0,
    RELAY_RATE_PER_MIN: 60_000,
    FETCH_ALLOW_ADDRESSES: parseCidrList('127.0.0.0/8'),
  });
  Object.assign(t.app.relay.timing, { pollMs: 100, deriveGapMs: 20, flushMs: 20 });
  base = await t.listen();
});

after(async () => {
  await t?.close();
  await forwarder?.close();
});

const calls = (f: Forwarder, url: string) => f.calls.filter((c) => c.params[1] === url).length;
const suppressed = async (target: string) => (await targetStatus(t.app.db, 100)).find((s) => s.url === target)?.suppressed;
const jobs = async (url: string) =>
  t.app.db.query<{ state: string }>('select state from relay_jobs where weblog_url = $1 order by id', [url]);
const pingsOf = async (url: string) =>
  Number((await t.app.db.query<{ n: number }>('select count(*)::int as n from pings where url = $1', [url]))[0].n);

test('A → a forwarder that drops the marker → A, with PING_MIN_INTERVAL=0: the ping is relayed once and stops (REGRESSION: it circulated for as long as it was watched)', async () => {
  const before = (await suppressed(forwarder.url)) ?? 0;
  const url = uniqueUrl('loop');
  assert.equal(await httpPing(base, 'Loop', url), 200);
  // The forwarder got the relay and A accepted its echo (no marker: A cannot tell it from a new ping).
  await forwarder.until(() => forwarder.forwarded.some((f) => f.url === url && f.status === 200), 15_000, 'the echo accepted by A');
  assert.equal(await pingsOf(url), 2);
  // A has derived the echo (had it been queued, its job would be there now), and the relay's outcome is
  // written (the echo may have come while the relay's job was still in flight).
  await derivedAll(t.app.db);
  await waitFor(async () => !(await jobs(url)).some((j) => j.state === 'pending'), {
    timeoutMs: 10_000,
    what: 'no relay of the weblog waiting',
  });
  assert.deepEqual(
    (await jobs(url)).map((j) => j.state),
    ['delivered'],
  );
  assert.equal(await suppressed(forwarder.url), before + 1);
  // A sentinel through the same loop: the relay is live, and the first weblog is still at one relay.
  const sentinel = uniqueUrl('loop');
  assert.equal(await httpPing(base, 'Sentinel', sentinel), 200);
  await forwarder.until(() => forwarder.forwarded.some((f) => f.url === sentinel), 15_000, 'the sentinel echoed');
  await derivedAll(t.app.db);
  await waitFor(async () => !(await jobs(sentinel)).some((j) => j.state === 'pending'), {
    timeoutMs: 10_000,
    what: 'no relay of the sentinel waiting',
  });
  assert.deepEqual({ loop: calls(forwarder, url), sentinel: calls(forwarder, sentinel) }, { loop: 1, sentinel: 1 });
  assert.deepEqual(
    (await jobs(sentinel)).map((j) => j.state),
    ['delivered'],
  );
});

test('an echo that arrives while the relay is still being sent rides on that send, not on another (REGRESSION: it was folded in and sent again)', async () => {
  // A second A and a forwarder that passes the ping back to it before it answers, and answers only once
  // the test has seen A derive the echo: the relay's job is then still in flight (leased).
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  let baseA = '';
  const gated = await startForwarder('127.0.0.54', () => baseA, { order: 'forward-first', release: () => opened });
  const a = await startApp({
    RELAY_TARGETS: [gated.url],
    PING_MIN_INTERVAL: 0,
    PING_HOST_BUDGET: 0,
    RELAY_RATE_PER_MIN: 60_000,
    FETCH_ALLOW_ADDRESSES: parseCidrList('127.0.0.0/8'),
  });
  try {
    Object.assign(a.app.relay.timing, { pollMs: 100, deriveGapMs: 20, flushMs: 20 });
    baseA = await a.listen();
    const url = uniqueUrl('inflight');
    assert.equal(await httpPing(baseA, 'In flight', url), 200);
    await gated.until(() => gated.forwarded.some((f) => f.url === url && f.status === 200), 15_000, 'the echo accepted by A');
    await derivedAll(a.app.db);
    open();
    // The send's outcome settles the job: nothing of this weblog waits for the forwarder after it.
    await waitFor(
      async () =>
        (
          await a.app.db.query<{ n: number }>(`select count(*)::int as n from relay_jobs where weblog_url = $1 and state = 'pending'`, [
            url,
          ])
        )[0].n === 0,
      { timeoutMs: 15_000, what: 'the job settled' },
    );
    await derivedAll(a.app.db);
    assert.equal(calls(gated, url), 1);
    assert.deepEqual(
      (await a.app.db.query<{ state: string }>('select state from relay_jobs where weblog_url = $1', [url])).map((j) => j.state),
      ['delivered'],
    );
    assert.equal((await targetStatus(a.app.db, 100))[0].suppressed, 1);
  } finally {
    open();
    await a.close();
    await gated.close();
  }
});

test('a weblog relayed within RELAY_LOOP_WINDOW is not relayed again; once the window has passed, it is', async () => {
  const url = uniqueUrl('quiet');
  assert.equal(await httpPing(base, 'Quiet', url), 200);
  await forwarder.until(() => calls(forwarder, url) === 1, 15_000, 'the first relay');
  await waitFor(async () => (await jobs(url)).map((j) => j.state).join() === 'delivered', {
    timeoutMs: 10_000,
    what: 'the relay recorded',
  });
  const before = (await suppressed(forwarder.url)) ?? 0;
  assert.equal(await httpPing(base, 'Quiet again', url), 200);
  await derivedAll(t.app.db);
  assert.equal(await suppressed(forwarder.url), before + 1);
  assert.deepEqual(
    (await jobs(url)).map((j) => j.state),
    ['delivered'],
  );
  // The window (3600 s by default) has passed for this weblog.
  await t.app.db.query(`update relay_jobs set finished_at = finished_at - interval '2 hours' where weblog_url = $1`, [url]);
  assert.equal(await httpPing(base, 'Quiet later', url), 200);
  await forwarder.until(() => calls(forwarder, url) === 2, 15_000, 'the relay after the window');
  assert.deepEqual(
    forwarder.calls.filter((c) => c.params[1] === url).map((c) => c.params[0]),
    ['Quiet', 'Quiet later'],
  );
});
