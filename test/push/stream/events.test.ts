// The stream's pure parts: event frames, filters, and the resume point's precedence.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ALL_EVENTS,
  FILTER_CAPS,
  STREAM_OUTCOMES,
  cursorFrame,
  liveFrame,
  matches,
  parseStreamRequest,
  resetFrame,
  toStreamEvent,
  type StreamFilter,
  type StreamRequest,
  type StreamRequestOk,
} from '../../../src/push/stream/events.js';
import { OUTCOMES } from '../../../src/platform/outcomes.js';
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
  held: false,
  frame: null,
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

const f = (over: Partial<StreamFilter>): StreamFilter => ({ ...ALL_EVENTS, ...over });

test('filters: a host matches itself and its subdomains only; tags ignore case; types select', () => {
  const e = toStreamEvent(row());
  assert.equal(matches(f({ hosts: ['example.com'] }), e), true);
  assert.equal(matches(f({ hosts: ['blog.example.com'] }), e), true);
  assert.equal(matches(f({ hosts: ['log.example.com'] }), e), false);
  assert.equal(matches(f({ hosts: ['ample.com'] }), e), false);
  assert.equal(matches(f({ tags: ['tech'] }), e), true);
  assert.equal(matches(f({ tags: ['sport'] }), e), false);
  assert.equal(matches(f({ types: new Set(['verified']) }), e), false);
});

test('filters: values of one filter are alternatives (OR), filters together must all hold (AND)', () => {
  const e = toStreamEvent(row());
  assert.equal(matches(f({ hosts: ['other.org', 'example.com'] }), e), true);
  assert.equal(matches(f({ hosts: ['other.org', 'example.net'] }), e), false);
  assert.equal(matches(f({ tags: ['sport', 'news'] }), e), true);
  assert.equal(matches(f({ hosts: ['example.com'], tags: ['sport'] }), e), false);
  assert.equal(matches(f({ hosts: ['example.com'], tags: ['sport', 'tech'] }), e), true);
});

test('filters: method narrows ping events, outcome narrows verified events; each lets the other type through', () => {
  const ping = toStreamEvent(row());
  const verified = toStreamEvent(row({ type: 'verified', pos: 50, outcome: 'unchanged', method: null }));
  assert.equal(matches(f({ methods: new Set(['extendedPing']) }), ping), true);
  assert.equal(matches(f({ methods: new Set(['ping', 'rssPing']) }), ping), false);
  assert.equal(matches(f({ methods: new Set(['ping']) }), verified), true);
  assert.equal(matches(f({ outcomes: new Set(['verified']) }), verified), false);
  assert.equal(matches(f({ outcomes: new Set(['verified', 'unchanged']) }), verified), true);
  assert.equal(matches(f({ outcomes: new Set(['verified']) }), ping), true);
  assert.equal(matches(f({ outcomes: new Set(['verified']), types: new Set(['verified']) }), ping), false);
});

test('the lists the stream publishes are the ones intake and verification use', () => {
  // Every outcome verification can decide is one ?outcome= takes and /stream/info lists; nothing else is.
  assert.deepEqual([...STREAM_OUTCOMES], [...OUTCOMES]);
  for (const o of OUTCOMES) assert.deepEqual(ok(parseStreamRequest({ outcome: o }, undefined)).filter.outcomes, new Set([o]), o);
  assert.match(refused(parseStreamRequest({ outcome: 'fetched' }, undefined)), /outcome/);
});

const ok = (r: StreamRequest): StreamRequestOk => {
  assert.ok(r.ok, JSON.stringify(r));
  return r;
};
const refused = (r: StreamRequest): string => {
  assert.ok(!r.ok, JSON.stringify(r));
  return r.message;
};

test('the request: Last-Event-ID wins over ?since=, an empty header is no header, IDN hosts match in ASCII', () => {
  assert.deepEqual(parseStreamRequest({ since: '5' }, '9'), {
    ok: true,
    from: { at: 'position', pos: 9, header: true },
    filter: ALL_EVENTS,
    replayOnly: false,
  });
  assert.deepEqual(ok(parseStreamRequest({ since: '5' }, '')).from, { at: 'position', pos: 5, header: false });
  assert.equal(ok(parseStreamRequest({}, undefined)).from, null);
  assert.deepEqual(ok(parseStreamRequest({ host: 'Bücher.Example.' }, undefined)).filter.hosts, ['xn--bcher-kva.example']);
  assert.equal(
    refused(parseStreamRequest({ since: '1234567890123456' }, undefined)),
    'since must be the id of an event this stream sent (a decimal number; 0 = everything still kept) or an RFC 3339 time such as 2026-11-23T02:10:04Z.',
  );
  assert.deepEqual([...ok(parseStreamRequest({ types: ' verified , ping' }, undefined)).filter.types], ['verified', 'ping']);
});

test('since takes an RFC 3339 time with its zone; a header position still wins', () => {
  assert.deepEqual(ok(parseStreamRequest({ since: '2026-11-23T02:10:04Z' }, undefined)).from, {
    at: 'time',
    time: new Date('2026-11-23T02:10:04Z'),
  });
  assert.deepEqual(ok(parseStreamRequest({ since: '2026-11-23T03:10:04.5+01:00' }, undefined)).from, {
    at: 'time',
    time: new Date('2026-11-23T02:10:04.500Z'),
  });
  assert.equal(ok(parseStreamRequest({ since: '2026-11-23T02:10:04Z' }, '7')).from?.at, 'position');
  for (const bad of ['2026-11-23T02:10:04', '2026-11-23', '2026-13-40T99:99:99Z', 'yesterday', '-1'])
    assert.match(refused(parseStreamRequest({ since: bad }, undefined)), /^since must be/, bad);
});

test('repeatable filters: repeated and comma-separated values add up, duplicates fold, the caps are refused by name', () => {
  const r = ok(
    parseStreamRequest(
      { host: ['A.example', 'b.example,a.example'], tag: ['Tech', 'news'], method: 'ping,rssPing', outcome: ['gone'] },
      undefined,
    ),
  );
  assert.deepEqual(r.filter.hosts, ['a.example', 'b.example']);
  assert.deepEqual(r.filter.tags, ['tech', 'news']);
  assert.deepEqual([...(r.filter.methods ?? [])], ['ping', 'rssPing']);
  assert.deepEqual([...(r.filter.outcomes ?? [])], ['gone']);
  const hosts = (n: number) => Array.from({ length: n }, (_, i) => `h${i}.example`);
  assert.equal(ok(parseStreamRequest({ host: hosts(FILTER_CAPS.host) }, undefined)).filter.hosts?.length, 100);
  assert.equal(refused(parseStreamRequest({ host: hosts(101) }, undefined)), 'host may be given at most 100 times.');
  assert.equal(refused(parseStreamRequest({ host: hosts(101).join(',') }, undefined)), 'host may be given at most 100 times.');
  const tags = (n: number) => Array.from({ length: n }, (_, i) => `t${i}`);
  assert.equal(ok(parseStreamRequest({ tag: tags(20) }, undefined)).filter.tags?.length, 20);
  assert.equal(refused(parseStreamRequest({ tag: tags(21) }, undefined)), 'tag may be given at most 20 times.');
  assert.equal(
    refused(parseStreamRequest({ method: 'weblogUpdates.ping' }, undefined)),
    'method must be one or more of ping, extendedPing, pingSiteForm, rssPing.',
  );
  assert.equal(
    refused(parseStreamRequest({ outcome: ['verified', 'ok'] }, undefined)),
    'outcome must be one or more of verified, unchanged, not_modified, unreachable, not_a_feed, gone, refused, too_large, too_complex.',
  );
  assert.equal(
    refused(parseStreamRequest({ host: ['a.example', 'not a host'] }, undefined)),
    'host must be a domain name such as example.com (it matches that host and its subdomains).',
  );
  assert.equal(refused(parseStreamRequest({ tag: ' , ' }, undefined)), 'tag must not be empty.');
});

test('unknown parameters are refused, naming the valid ones', () => {
  assert.equal(
    refused(parseStreamRequest({ hosts: 'a.example', cursor: '5' }, undefined)),
    'Unknown parameter "hosts", "cursor"; /stream takes since, host, tag, types, method, outcome, until, mode, spam.',
  );
});

test('until=live and mode=replay ask for the stored events only, and need a starting point', () => {
  assert.equal(ok(parseStreamRequest({ since: '0', until: 'live' }, undefined)).replayOnly, true);
  assert.equal(ok(parseStreamRequest({ mode: 'replay' }, '12')).replayOnly, true);
  assert.equal(ok(parseStreamRequest({ since: '0', mode: 'live' }, undefined)).replayOnly, false);
  assert.equal(
    refused(parseStreamRequest({ until: 'live' }, undefined)),
    'A replay (until=live or mode=replay) needs since or Last-Event-ID.',
  );
  assert.equal(
    refused(parseStreamRequest({ since: '0', until: 'now' }, undefined)),
    'until must be live (the stored events, then the end).',
  );
  assert.equal(
    refused(parseStreamRequest({ since: '0', mode: 'history' }, undefined)),
    'mode must be replay (the stored events, then the end) or live (the default).',
  );
});

test('the control frames: live and cursor carry the position as their id; a cursor dispatches nothing', () => {
  assert.equal(liveFrame(120), 'id: 120\nevent: live\ndata: {"position":120}\n\n');
  assert.equal(cursorFrame(130), 'id: 130\n\n');
});

test('the reset frame says why and where the stream continues', () => {
  assert.equal(
    resetFrame(50, 7, 'pruned', 50),
    'id: 50\nevent: reset\ndata: {"reason":"pruned","lastEventId":7,"continueAt":50,"message":"Events 8–50 were deleted by retention; continuing from the oldest event still kept."}\n\n',
  );
});

test('a held weblog’s events go only to ?spam=include, marked held; spam takes include or exclude', () => {
  const held = toStreamEvent(row({ held: true }));
  assert.equal(matches(ALL_EVENTS, held), false);
  assert.equal(matches(f({ spam: true }), held), true);
  assert.equal(matches(ALL_EVENTS, toStreamEvent(row())), true);
  assert.equal(JSON.parse(held.frame.split('data: ')[1]).held, true);
  assert.equal(JSON.parse(toStreamEvent(row()).frame.split('data: ')[1]).held, undefined);
  assert.equal((parseStreamRequest({ spam: 'include' }, undefined) as StreamRequestOk).filter.spam, true);
  assert.equal((parseStreamRequest({ spam: 'exclude' }, undefined) as StreamRequestOk).filter.spam, false);
  assert.deepEqual(parseStreamRequest({ spam: 'yes' }, undefined), {
    ok: false,
    message: 'spam must be include (events of weblogs held as spam too) or exclude (the default).',
  });
});
