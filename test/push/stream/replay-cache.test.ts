// The shared replay windows: one read for every connection that asks while it runs or after, the memory
// bound (least recently used out first), a failed read kept for no one, and a window whose query kept an
// event the filter drops sent event by event; a window of frames the database joined (JoinedWindow), merged
// with `verified` events by position and sliced after a connection's position.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { JoinedWindow, ReplayCache, ReplayWindow } from '../../../src/push/stream/replay-cache.js';
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

const frameOf = (pos: number, type: 'ping' | 'verified' = 'ping') =>
  toStreamEvent({
    ...row(pos, `http://w${pos}.example/é😀`),
    type,
    ...(type === 'verified' ? { outcome: 'new-items', method: null } : {}),
  });
const joined = (pings: number[], verified: number[] = []) =>
  JoinedWindow.of(
    { frames: pings.map((p) => frameOf(p).frame).join(''), count: pings.length, last: pings.length ? pings[pings.length - 1] : NaN },
    verified.map((p) => frameOf(p, 'verified')),
  );

test('a joined window: whole to a connection before it, the frames after its position to one inside it, nothing after it', () => {
  const w = joined([11, 12, 15, 20]);
  const all = [11, 12, 15, 20].map((p) => frameOf(p).frame).join('');
  assert.deepEqual(w.after(10), { chunk: Buffer.from(all), last: 20 });
  assert.equal(w.after(10)!.chunk, w.chunk, 'the one buffer, not a copy');
  assert.equal(w.after(12)!.chunk.toString(), frameOf(15).frame + frameOf(20).frame);
  assert.equal(w.after(13)!.chunk.toString(), frameOf(15).frame + frameOf(20).frame);
  assert.equal(w.after(19)!.chunk.toString(), frameOf(20).frame);
  assert.equal(w.after(20), null);
  assert.equal(w.after(25), null);
  assert.equal(joined([]).after(0), null);
  assert.ok(w.bytes >= w.chunk.length && w.bytes < 2 * w.chunk.length, 'about its bytes, not two copies of each frame');
});

test('a joined window merges its verified events with the ping frames by position', () => {
  const w = joined([2, 5, 6], [1, 3, 4, 7]);
  const expected = [1, 2, 3, 4, 5, 6, 7].map((p) => frameOf(p, [1, 3, 4, 7].includes(p) ? 'verified' : 'ping').frame).join('');
  assert.equal(w.chunk.toString(), expected);
  assert.equal(w.first, 1);
  assert.equal(w.last, 7);
  assert.equal(w.after(4)!.chunk.toString(), frameOf(5).frame + frameOf(6).frame + frameOf(7, 'verified').frame);
  const onlyVerified = joined([], [8, 9]);
  assert.equal(onlyVerified.chunk.toString(), frameOf(8, 'verified').frame + frameOf(9, 'verified').frame);
  assert.equal(onlyVerified.after(8)!.chunk.toString(), frameOf(9, 'verified').frame);
});
