// The shared replay windows: one read for every connection that asks while it runs or after, the memory
// bound (least recently used out first), a failed read kept for no one, and a window whose query kept an
// event the filter drops sent event by event.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ReplayCache, ReplayWindow } from '../../../src/push/stream/replay-cache.js';
import { ALL_EVENTS, toStreamEvent } from '../../../src/push/stream/events.js';
import type { EventRow } from '../../../src/push/stream/event-repository.js';

const row = (pos: number, url = 'http://a.example/'): EventRow => ({
  type: 'ping',
  pos,
  pingId: pos,
  name: 'n',
  url,
  changesUrl: null,
  rssUrl: null,
  tags: null,
  method: 'ping',
  receivedAt: new Date(0),
  outcome: null,
  newItems: null,
  held: false,
  frame: null,
});
const win = (...pos: number[]) =>
  new ReplayWindow(
    pos.map((p) => toStreamEvent(row(p))),
    ALL_EVENTS,
  );

test('a window being read is shared with whoever asks meanwhile; once read, with whoever asks later', async () => {
  const cache = new ReplayCache(1 << 20);
  let reads = 0;
  let release!: (w: ReplayWindow) => void;
  const first = cache.load('k', () => {
    reads++;
    return new Promise<ReplayWindow>((r) => (release = r));
  });
  const meanwhile = cache.find('k');
  assert.ok(meanwhile instanceof Promise);
  release(win(1, 2));
  assert.equal(await first, await meanwhile);
  assert.equal(cache.find('k'), await first);
  assert.equal(reads, 1);
  assert.equal(cache.hits, 2);
});

test('bounded in bytes: the least recently used window goes first; one larger than the bound is not kept', async () => {
  const one = win(1);
  const cache = new ReplayCache(one.bytes * 2);
  await cache.load('a', async () => win(1));
  await cache.load('b', async () => win(2));
  assert.ok(cache.find('a')); // a is now the most recently used
  await cache.load('c', async () => win(3));
  assert.equal(cache.find('b'), undefined);
  assert.ok(cache.find('a'));
  assert.ok(cache.find('c'));
  assert.ok(cache.size <= one.bytes * 2);
  const none = new ReplayCache(0);
  await none.load('a', async () => win(1));
  assert.equal(none.find('a'), undefined);
});

test('a failed read is kept for no one: the next asker reads again', async () => {
  const cache = new ReplayCache(1 << 20);
  await assert.rejects(
    cache.load('k', async () => {
      throw new Error('db away');
    }),
  );
  assert.equal(cache.find('k'), undefined);
});

test('a window is sent whole only when every event passes the filter it was read for', () => {
  assert.equal(win(1, 2).exact, true);
  const f = { ...ALL_EVENTS, hosts: ['a.example'] };
  const loose = new ReplayWindow([toStreamEvent(row(1)), toStreamEvent(row(2, 'http://b.example/a.example'))], f);
  assert.equal(loose.exact, false);
  assert.equal(win(1, 2).chunk.toString(), win(1).events[0].frame + win(2).events[0].frame);
});
