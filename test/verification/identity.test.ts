// What makes an item new: its identity (guid, else link, else a hash of title and content; never its
// date), and which items a fetch publishes given the identities seen before (only the newest on a first
// fetch, the unseen ones in feed order after that), with a bounded, newest-first memory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { itemKey, novelty, PUBLISH_LIMIT, SEEN_LIMIT, type FeedItem } from '../../src/verification/identity.js';

function item(over: Partial<FeedItem>): FeedItem {
  return { title: null, link: null, guid: null, published: null, summary: null, content: null, ...over };
}

const numbered = (n: number, from = 0): FeedItem[] =>
  Array.from({ length: n }, (_, i) => item({ guid: `tag:example.com,2026:post-${from + i}`, title: `Post ${from + i}` }));

test('itemKey prefers the guid: same guid, different everything else → same key; different guids → different keys', () => {
  const a = item({ guid: 'tag:example.com,2026:1', link: 'http://example.com/a', title: 'A', content: 'one' });
  const b = item({ guid: 'tag:example.com,2026:1', link: 'http://example.com/b', title: 'B', content: 'two' });
  const c = item({ guid: 'tag:example.com,2026:2', link: 'http://example.com/a', title: 'A', content: 'one' });
  assert.equal(itemKey(a), itemKey(b));
  assert.notEqual(itemKey(a), itemKey(c));
  // Surrounding whitespace is not part of the guid.
  assert.equal(itemKey(item({ guid: '  tag:example.com,2026:1\n' })), itemKey(item({ guid: 'tag:example.com,2026:1' })));
});

test('itemKey falls back to the link when there is no guid (null, empty or blank)', () => {
  const a = item({ link: 'http://example.com/post', title: 'Old title' });
  const b = item({ guid: '', link: 'http://example.com/post', title: 'New title', content: 'edited' });
  const c = item({ guid: '   ', link: ' http://example.com/post ', title: 'Third title' });
  const d = item({ link: 'http://example.com/other', title: 'Old title' });
  assert.equal(itemKey(a), itemKey(b));
  assert.equal(itemKey(a), itemKey(c));
  assert.notEqual(itemKey(a), itemKey(d));
});

test('itemKey falls back to title + content when there is neither guid nor link', () => {
  const a = item({ title: 'Untitled note', content: '<p>Closed on Monday.</p>' });
  assert.equal(itemKey(a), itemKey(item({ title: 'Untitled note', content: '<p>Closed on Monday.</p>' })));
  assert.notEqual(itemKey(a), itemKey(item({ title: 'Untitled note', content: '<p>Closed on Tuesday.</p>' })));
  assert.notEqual(itemKey(a), itemKey(item({ title: 'Another note', content: '<p>Closed on Monday.</p>' })));
  // The summary stands in for missing content.
  const s = item({ title: 'Note', summary: 'short' });
  assert.equal(itemKey(s), itemKey(item({ title: 'Note', summary: 'short' })));
  assert.notEqual(itemKey(s), itemKey(item({ title: 'Note', summary: 'longer' })));
});

test('itemKey ignores the date: the same guid re-stamped with a fresh date is the same item', () => {
  const a = item({ guid: 'http://example.com/p/1', published: new Date('2026-11-20T10:00:00Z') });
  const b = item({ guid: 'http://example.com/p/1', published: new Date('2026-11-22T10:00:00Z') });
  assert.equal(itemKey(a), itemKey(b));
  const c = item({ title: 'T', content: 'x', published: new Date('2026-11-20T10:00:00Z') });
  const d = item({ title: 'T', content: 'x', published: null });
  assert.equal(itemKey(c), itemKey(d));
});

test('itemKey has a fixed length whatever the guid, link or text looks like', () => {
  const keys = [
    itemKey(item({ guid: 'x' })),
    itemKey(item({ guid: 'g'.repeat(10_000) })),
    itemKey(item({ link: 'http://example.com/' + 'p/'.repeat(2_000) })),
    itemKey(item({ title: 'ünïcödé 日本語 😀', content: 'c'.repeat(50_000) })),
    itemKey(item({})),
  ];
  for (const k of keys) {
    assert.equal(k.length, 22, k);
    assert.match(k, /^[A-Za-z0-9_-]+$/);
  }
  assert.equal(new Set(keys).size, keys.length);
});

test('novelty, first fetch: everything is fresh but only the newest item by date is published', () => {
  const items = [
    item({ guid: 'a', published: new Date('2026-11-18T00:00:00Z') }),
    item({ guid: 'b', published: null }),
    item({ guid: 'c', published: new Date('2026-11-21T00:00:00Z') }),
    item({ guid: 'd', published: new Date('2026-11-20T00:00:00Z') }),
  ];
  const n = novelty(items, [], true);
  assert.equal(n.firstFetch, true);
  assert.deepEqual(n.fresh, items);
  assert.deepEqual(n.publish, [items[2]]);
  assert.deepEqual(n.seen, items.map(itemKey));
});

test('novelty, first fetch: without dates, the first item in document order is published', () => {
  const items = [item({ guid: 'a' }), item({ guid: 'b' }), item({ guid: 'c' })];
  assert.deepEqual(novelty(items, [], true).publish, [items[0]]);
});

test('novelty, first fetch of an empty feed publishes nothing', () => {
  const n = novelty([], [], true);
  assert.deepEqual(n.publish, []);
  assert.deepEqual(n.fresh, []);
  assert.deepEqual(n.seen, []);
});

test('novelty, later fetch: only unseen items are published, in feed order', () => {
  const old = [item({ guid: 'old-1' }), item({ guid: 'old-2' }), item({ guid: 'old-3' })];
  const seen = old.map(itemKey);
  const newA = item({ guid: 'new-a', published: new Date('2026-11-20T00:00:00Z') });
  const newB = item({ guid: 'new-b', published: new Date('2026-11-22T00:00:00Z') });
  // A fresh date on a seen guid does not make it new.
  const restamped = item({ guid: 'old-1', published: new Date('2026-11-23T00:00:00Z') });
  const n = novelty([newA, restamped, newB, old[1]], seen, false);
  assert.equal(n.firstFetch, false);
  assert.deepEqual(n.fresh, [newA, newB]);
  assert.deepEqual(n.publish, [newA, newB]);
  assert.deepEqual(novelty(old, seen, false).publish, []);
});

test(`novelty, later fetch: at most PUBLISH_LIMIT (${PUBLISH_LIMIT}) items are published, the first ones in feed order`, () => {
  const items = numbered(PUBLISH_LIMIT + 15);
  const n = novelty(items, [], false);
  assert.equal(n.fresh.length, PUBLISH_LIMIT + 15);
  assert.equal(n.publish.length, PUBLISH_LIMIT);
  assert.deepEqual(n.publish, items.slice(0, PUBLISH_LIMIT));
});

test('novelty: an item listed twice in one fetch is counted once', () => {
  const a = item({ guid: 'a', title: 'first copy' });
  const aAgain = item({ guid: 'a', title: 'second copy' });
  const b = item({ guid: 'b' });
  const later = novelty([a, b, aAgain], [], false);
  assert.deepEqual(later.fresh, [a, b]);
  assert.deepEqual(later.publish, [a, b]);
  assert.deepEqual(later.seen, [itemKey(a), itemKey(b)]);
  const first = novelty([aAgain, a], [], true);
  assert.deepEqual(first.fresh, [aAgain]);
  assert.deepEqual(first.seen, [itemKey(a)]);
});

test("novelty: seen is newest first: this fetch's identities, then older ones no longer listed, each once", () => {
  const older = [item({ guid: 'o1' }), item({ guid: 'o2' }), item({ guid: 'o3' })];
  const seen = older.map(itemKey);
  const fetched = [item({ guid: 'n1' }), item({ guid: 'o2' }), item({ guid: 'n2' })];
  const n = novelty(fetched, seen, false);
  assert.deepEqual(n.seen, [itemKey(fetched[0]), itemKey(older[1]), itemKey(fetched[2]), itemKey(older[0]), itemKey(older[2])]);
  assert.equal(new Set(n.seen).size, n.seen.length);
});

test(`novelty: seen is bounded by SEEN_LIMIT (${SEEN_LIMIT}): one fetch of SEEN_LIMIT + 10 items keeps the first SEEN_LIMIT`, () => {
  const items = numbered(SEEN_LIMIT + 10);
  const n = novelty(items, [], false);
  assert.equal(n.seen.length, SEEN_LIMIT);
  assert.deepEqual(n.seen, items.slice(0, SEEN_LIMIT).map(itemKey));
});

test('novelty: seen is bounded by SEEN_LIMIT: new identities push out the oldest remembered ones', () => {
  const remembered = numbered(SEEN_LIMIT).map(itemKey);
  const fetched = numbered(10, SEEN_LIMIT);
  const n = novelty(fetched, remembered, false);
  assert.equal(n.seen.length, SEEN_LIMIT);
  assert.deepEqual(n.seen, [...fetched.map(itemKey), ...remembered.slice(0, SEEN_LIMIT - 10)]);
  assert.ok(!n.seen.includes(remembered[SEEN_LIMIT - 1]));
});
