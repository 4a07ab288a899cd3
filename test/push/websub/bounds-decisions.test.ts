// The hub's bounds as pure decisions: the host a callback is counted under, a list page's parameters, the
// refusals' statuses, and the cached count against WEBSUB_MAX_SUBSCRIPTIONS (read once per TTL, however
// many ask, plus what this instance admitted since).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { callbackHost } from '../../../src/push/websub/request.js';
import { pageRequest } from '../../../src/push/websub/routes.js';
import { WEBSUB_RETRY_AFTER_SEC, WEBSUB_REFUSAL_STATUS, refusalReason } from '../../../src/push/websub/refusals.js';
import { RefusalMemory } from '../../../src/push/websub/refusal-memory.js';
import { SubscriptionTally } from '../../../src/push/websub/subscription-tally.js';

test('a callback is counted under its host name or address, lower case, without the port', () => {
  assert.equal(callbackHost('http://Example.COM:8080/cb?x=1'), 'example.com');
  assert.equal(callbackHost('https://example.com/cb'), 'example.com');
  assert.equal(callbackHost('http://127.0.0.39:9/cb'), '127.0.0.39');
  assert.equal(callbackHost('http://[2001:DB8::1]:81/cb'), '[2001:db8::1]');
});

test('a list page: 100 by default, 1 to 500 asked, after a positive id; the first of a repeated parameter', () => {
  assert.deepEqual(pageRequest({}), { ok: true, limit: 100, afterId: null });
  assert.deepEqual(pageRequest({ limit: '500', after: '42' }), { ok: true, limit: 500, afterId: 42 });
  assert.deepEqual(pageRequest({ limit: ['3', '900'], after: '' }), { ok: true, limit: 3, afterId: null });
  assert.deepEqual(pageRequest({ limit: '501' }), { ok: false, message: 'limit must be an integer from 1 to 500.' });
  assert.deepEqual(pageRequest({ after: '007' }), { ok: false, message: 'after must be the `next` of a previous page.' });
});

test('refusals: 422 with no Retry-After for nothing to unsubscribe, 429 for waiting requests, 503 for no room', () => {
  const limits = { maxSubscriptions: 10, maxPerHost: 3, maxPending: 5, maxTopicsPerHost: 4, maxPerTopicHost: 6, maxTopics: 7 };
  assert.deepEqual(
    (
      [
        'not_subscribed',
        'host_pending',
        'client_pending',
        'host_full',
        'full',
        'host_topics',
        'topic_host_full',
        'topics_full',
        'unknown_unsubscribes',
      ] as const
    ).map((r) => [r, WEBSUB_REFUSAL_STATUS[r], WEBSUB_RETRY_AFTER_SEC[r]]),
    [
      ['not_subscribed', 422, null],
      ['host_pending', 429, 60],
      ['client_pending', 429, 60],
      ['host_full', 503, 3600],
      ['full', 503, 3600],
      ['host_topics', 503, 3600],
      ['topic_host_full', 503, 3600],
      ['topics_full', 503, 3600],
      ['unknown_unsubscribes', 429, 1],
    ],
  );
  assert.equal(
    refusalReason('unknown_unsubscribes', limits, 'x'),
    'this client asked to end too many subscriptions this hub does not have within a second; try again in a second',
  );
  assert.equal(refusalReason('full', limits, 'x'), 'this hub keeps at most 10 subscriptions and has no room for another; try again later');
  assert.equal(
    refusalReason('host_topics', limits, 'reader.example'),
    'this hub keeps at most 4 feed topics subscribed from callbacks on one host and has no room for another on reader.example; try again later',
  );
  assert.equal(
    refusalReason('topic_host_full', limits, 'reader.example', 'blog.example'),
    'this hub keeps at most 6 subscriptions to feeds on one host and has no room for another on blog.example; try again later',
  );
  assert.equal(
    refusalReason('topics_full', limits, 'x'),
    'this hub keeps at most 7 feed topics and has no room for another; try again later',
  );
});

test('the cap is checked against a count read at most once per TTL, plus the subscriptions admitted since', async () => {
  let reads = 0;
  let stored = 2;
  const tally = new SubscriptionTally(async () => (reads++, stored), 3, 60_000);
  // A burst asks at once: one read.
  assert.deepEqual(await Promise.all([tally.full(), tally.full(), tally.full()]), [false, false, false]);
  assert.equal(reads, 1);
  tally.added();
  assert.equal(await tally.full(), true);
  stored = 0;
  assert.equal(await tally.full(), true, 'the stored count is not read again within the TTL');
  assert.equal(reads, 1);

  const fresh = new SubscriptionTally(async () => (reads++, stored), 3, 0);
  assert.equal(await fresh.full(), false);
  fresh.added();
  fresh.added();
  fresh.added();
  assert.equal(await fresh.full(), false, 'past the TTL the database count replaces the local one');
  assert.equal(reads, 3);
});

test("refusals from memory: only past FLOOD_REFUSALS a window, only for the requests the database's refusal applies to, only that key's", () => {
  const m = new RefusalMemory(3, 60_000);
  const sub = { mode: 'subscribe', verify: true, callbackHost: 'reader.example', client: '192.0.2.1', topicHost: 'blog.example' } as const;
  for (let i = 0; i < 2; i++) m.refused('host_full', sub);
  assert.equal(m.recall(sub), null, 'two refusals are not a flood');
  m.refused('host_full', sub);
  assert.equal(m.recall(sub), 'host_full');
  // host_full bounds what adds a subscription: an unsubscribe or a denial from that host still goes to the database.
  assert.equal(m.recall({ ...sub, mode: 'unsubscribe' }), null);
  assert.equal(m.recall({ ...sub, verify: false }), null);
  assert.equal(m.recall({ ...sub, callbackHost: 'other.example' }), null);
  // A topic host's bound, keyed by the topic's host.
  for (let i = 0; i < 3; i++) m.refused('topic_host_full', { ...sub, callbackHost: 'x.example' });
  assert.equal(m.recall({ ...sub, callbackHost: 'y.example' }), 'topic_host_full');
  assert.equal(m.recall({ ...sub, callbackHost: 'y.example', topicHost: null }), null);
  // 422s count per client towards the 429, for unsubscribes only.
  const unsub = { ...sub, mode: 'unsubscribe', callbackHost: 'z.example', client: '192.0.2.9' } as const;
  for (let i = 0; i < 3; i++) m.refused('not_subscribed', unsub);
  assert.equal(m.recall(unsub), 'unknown_unsubscribes');
  assert.equal(m.recall({ ...unsub, mode: 'subscribe', topicHost: null }), null);
  assert.equal(m.recall({ ...unsub, client: '192.0.2.10' }), null);
});
