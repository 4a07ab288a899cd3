// The relay against a real XML-RPC server (Python's SimpleXMLRPCServer): the right method and parameters
// with pingd's User-Agent and marker, refusals recorded and not retried, the extendedPing → ping fallback
// remembered, and a target that stops listening served again once it is back.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';
import { targetStatus } from '../../../src/push/relay/target-repository.js';
import { derivedAll, extendedPing, httpPing, relayIdle, startTarget, type Target } from './helpers.js';
import { waitFor } from '../../helpers/wait.js';
import { FetchError } from '../../../src/platform/fetch/safe-fetch.js';

let target: Target;
let t: TestApp;
let base: string;

before(async () => {
  target = await startTarget('127.0.0.40');
  t = await startApp({
    RELAY_TARGETS: [target.url],
    FETCH_ALLOW_ADDRESSES: parseCidrList('127.0.0.0/8'),
    RELAY_RATE_PER_MIN: 6000,
    FETCH_TIMEOUT_MS: 2000,
  });
  Object.assign(t.app.relay.timing, { retryBaseMs: 200, retryMaxMs: 400, breakerAfter: 100, pollMs: 200, deriveGapMs: 20, flushMs: 20 });
  base = await t.listen();
});

after(async () => {
  await t?.close();
  await target?.close();
});

const callsFor = (url: string) => target.calls.filter((c) => c.params[1] === url);
const jobStates = async (url: string) =>
  (await t.app.db.query<{ state: string }>('select state from relay_jobs where weblog_url = $1 order by id', [url])).map((j) => j.state);

test('an extendedPing with a feed is relayed as extendedPing(name, url, changesUrl, rssUrl, tags), with pingd-relay in the User-Agent', async () => {
  const url = uniqueUrl('ext');
  const answer = await extendedPing(base, ['Ext Blog', url, `${url}post/1`, `${url}feed.xml`, 'a|b']);
  assert.match(answer, /<boolean>0<\/boolean>/);
  await target.until(() => callsFor(url).length === 1);
  const [c] = callsFor(url);
  assert.equal(c.method, 'weblogUpdates.extendedPing');
  assert.deepEqual(c.params, ['Ext Blog', url, `${url}post/1`, `${url}feed.xml`, 'a|b']);
  assert.match(c.ua ?? '', /^pingd-relay\/1 \(pingd\/\d/);
});

test('a ping without a feed is relayed as weblogUpdates.ping(name, url)', async () => {
  const url = uniqueUrl('plain');
  assert.equal(await httpPing(base, 'Plain Blog', url), 200);
  await target.until(() => callsFor(url).length === 1);
  assert.deepEqual(callsFor(url)[0], { ...callsFor(url)[0], method: 'weblogUpdates.ping', params: ['Plain Blog', url] });
});

test('a ping that carries the relay marker is never relayed again', async () => {
  const url = uniqueUrl('marked');
  assert.equal(await httpPing(base, 'Marked', url, { 'user-agent': 'pingd-relay/1 (pingd/0.1.0; +http://other.example)' }), 200);
  const control = uniqueUrl('control');
  assert.equal(await httpPing(base, 'Control', control), 200);
  await target.until(() => callsFor(control).length === 1);
  // Barrier: the relay has derived every ping stored so far (the marked one before the control) and has
  // nothing pending or in hand. Had the marked ping been queued, its job would be there, and sent.
  await derivedAll(t.app.db);
  await relayIdle(t);
  assert.deepEqual(await jobStates(url), [], 'no job for the marked ping');
  assert.equal(callsFor(url).length, 0);
});

test('flerror 1 is recorded as refused and not retried', async () => {
  await target.set({ flerror: 1 });
  try {
    const before = (await targetStatus(t.app.db, 5))[0].refused;
    const url = uniqueUrl('refused');
    assert.equal(await httpPing(base, 'Refused', url), 200);
    await target.until(() => callsFor(url).length === 1);
    await waitFor(async () => (await targetStatus(t.app.db, 5))[0].refused === before + 1, {
      timeoutMs: 5000,
      what: 'the refusal recorded',
    });
    // Written in the same statement as the count: the job is finished, not pending, so no claim takes it
    // again (a retried refusal would still be pending, due one retry period later).
    assert.deepEqual(await jobStates(url), ['refused']);
    assert.equal(callsFor(url).length, 1);
  } finally {
    await target.set({ flerror: 0 });
  }
});

test('a fault to extendedPing falls back to ping at once, and the target gets ping from then on', async () => {
  await target.set({ fault_extended: true });
  try {
    const url = uniqueUrl('fallback');
    await extendedPing(base, ['Fallback', url, url, `${url}rss`]);
    await target.until(() => callsFor(url).length === 2);
    assert.deepEqual(
      callsFor(url).map((c) => [c.method, c.params]),
      [
        ['weblogUpdates.extendedPing', ['Fallback', url, url, `${url}rss`]],
        ['weblogUpdates.ping', ['Fallback', url]],
      ],
    );
    await waitFor(async () => (await targetStatus(t.app.db, 5))[0].pingOnly, { timeoutMs: 5000, what: 'the fallback remembered' });
    const next = uniqueUrl('remembered');
    await extendedPing(base, ['Remembered', next, next, `${next}rss`]);
    await target.until(() => callsFor(next).length === 1);
    // Barrier: the job is finished, with every request of its send (an extendedPing first would have been
    // followed by its fallback within the same send).
    await relayIdle(t);
    assert.deepEqual(await jobStates(next), ['delivered']);
    assert.deepEqual(
      callsFor(next).map((c) => c.method),
      ['weblogUpdates.ping'],
    );
  } finally {
    await target.set({ fault_extended: false });
  }
});

test('a target that stops listening gets the relay once it is back (retried with backoff)', async () => {
  await target.set({ listen: false });
  const url = uniqueUrl('comeback');
  try {
    assert.equal(await httpPing(base, 'Comeback', url), 200);
    await waitFor(async () => ((await targetStatus(t.app.db, 100))[0].lastError ?? '').includes('ECONNREFUSED'), {
      timeoutMs: 5000,
      what: 'a failed attempt',
    });
  } finally {
    await target.set({ listen: true });
  }
  await target.until(() => callsFor(url).length === 1, 10_000);
  const s = (await targetStatus(t.app.db, 100))[0];
  assert.ok(s.failed >= 1);
  await waitFor(async () => (await targetStatus(t.app.db, 100))[0].pending === 0, { timeoutMs: 5000, what: 'the queue drained' });
});

test('a relay the outbound client has no room for (FETCH_BUSY) is put back without a failure, and delivered after', async () => {
  // The relay shares app.fetcher's in-flight bound with verification and the hubs: a full client is not
  // the target's failure. Its post refuses this weblog's first relay, as a full client does.
  const url = uniqueUrl('busy');
  const fetcher = t.app.fetcher;
  const post = fetcher.post;
  let refused = 0;
  fetcher.post = async function (u, o) {
    if (refused === 0 && o.body.includes(url)) {
      refused++;
      throw new FetchError('FETCH_BUSY', 'too many outbound requests in progress; not fetched', u);
    }
    return post.call(this, u, o);
  };
  try {
    const [before] = await targetStatus(t.app.db, 5);
    assert.equal(await httpPing(base, 'Busy', url), 200);
    await target.until(() => callsFor(url).length === 1);
    await waitFor(async () => (await targetStatus(t.app.db, 5))[0].delivered === before.delivered + 1, {
      timeoutMs: 5000,
      what: 'the delivery recorded',
    });
    assert.equal(refused, 1);
    const [after] = await targetStatus(t.app.db, 5);
    assert.equal(after.failed, before.failed, 'no failure counted for FETCH_BUSY');
    assert.deepEqual(await jobStates(url), ['delivered']);
  } finally {
    fetcher.post = post;
  }
});
