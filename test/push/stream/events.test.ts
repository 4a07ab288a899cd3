// The stream's pure parts: event frames, filters, and the resume point's precedence.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { matches, parseStreamRequest, resetFrame, toStreamEvent, type StreamFilter } from '../../../src/push/stream/events.js';
import type { EventRow } from '../../../src/push/stream/event-repository.js';

const row = (over: Partial<EventRow> = {}): EventRow => ({
  type: 'ping',
  pos: 42,
  pingId: 42,
  name: 'A "quoted"\nname',
  url: 'http://Blog.Example.com/',
  changesUrl: null,
  rssUrl: 'http://blog.example.com/feed',
  tags: ['Tech', 'news'],
  method: 'extendedPing',
  receivedAt: new Date('2026-11-23T01:02:03.456Z'),
  outcome: null,
  newItems: null,
  ...over,
});

test('a ping event is one frame: id, event, and one line of JSON even when the name holds a line break', () => {
  const e = toStreamEvent(row());
  assert.equal(
    e.frame,
    'id: 42\nevent: ping\ndata: {"id":42,"name":"A \\"quoted\\"\\nname","url":"http://Blog.Example.com/","changesUrl":null,"rssUrl":"http://blog.example.com/feed","tags":["Tech","news"],"method":"extendedPing","receivedAt":"2026-11-23T01:02:03.456Z"}\n\n',
  );
  assert.equal(e.host, 'blog.example.com');
  assert.deepEqual(e.tags, ['tech', 'news']);
});

test('a verified event carries the ping id, the outcome and the new items (none for other outcomes)', () => {
  const v = toStreamEvent(
    row({ type: 'verified', pos: 50, outcome: 'verified', newItems: [{ title: 'T', link: 'http://l/', guid: null }] }),
  );
  assert.equal(
    v.frame,
    'id: 50\nevent: verified\ndata: {"id":42,"url":"http://Blog.Example.com/","outcome":"verified","newItems":[{"title":"T","link":"http://l/","guid":null}]}\n\n',
  );
  const u = toStreamEvent(row({ type: 'verified', pos: 51, outcome: 'unchanged', newItems: null }));
  assert.match(u.frame, /"outcome":"unchanged","newItems":\[\]/);
});

test('filters: a host matches itself and its subdomains only; tags ignore case; types select', () => {
  const f = (over: Partial<StreamFilter>): StreamFilter => ({ host: null, tag: null, types: new Set(['ping', 'verified']), ...over });
  const e = toStreamEvent(row());
  assert.equal(matches(f({ host: 'example.com' }), e), true);
  assert.equal(matches(f({ host: 'blog.example.com' }), e), true);
  assert.equal(matches(f({ host: 'log.example.com' }), e), false);
  assert.equal(matches(f({ host: 'ample.com' }), e), false);
  assert.equal(matches(f({ tag: 'tech' }), e), true);
  assert.equal(matches(f({ tag: 'sport' }), e), false);
  assert.equal(matches(f({ types: new Set(['verified']) }), e), false);
});

test('the request: Last-Event-ID wins over ?since=, an empty header is no header, IDN hosts match in ASCII', () => {
  assert.deepEqual(parseStreamRequest({ since: '5' }, '9'), {
    ok: true,
    from: 9,
    filter: { host: null, tag: null, types: new Set(['ping', 'verified']) },
  });
  assert.equal((parseStreamRequest({ since: '5' }, '') as { from: number }).from, 5);
  assert.equal((parseStreamRequest({}, undefined) as { from: number | null }).from, null);
  assert.equal(
    (parseStreamRequest({ host: 'Bücher.Example.' }, undefined) as { filter: StreamFilter }).filter.host,
    'xn--bcher-kva.example',
  );
  assert.deepEqual(parseStreamRequest({ since: '1234567890123456' }, undefined), {
    ok: false,
    message: 'since must be the id of an event this stream sent (a decimal number; 0 = everything still kept).',
  });
  assert.deepEqual(
    [...(parseStreamRequest({ types: ' verified , ping' }, undefined) as { filter: StreamFilter }).filter.types],
    ['verified', 'ping'],
  );
});

test('the reset frame says why and where the stream continues', () => {
  assert.equal(
    resetFrame(100, 7, 'pruned', 50),
    'id: 100\nevent: reset\ndata: {"reason":"pruned","lastEventId":7,"continueAt":100,"message":"Events after 7 are no longer all kept (retention deleted up to 50); continuing with new events."}\n\n',
  );
});
