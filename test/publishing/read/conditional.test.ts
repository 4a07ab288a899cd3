// The pure HTTP decisions: coding negotiation by q-values, entity-tag parsing (lists, weak tags, `*`,
// suffixes added by compressing proxies), A-IM, HTTP-dates, and the precedence of the conditionals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  acceptsFeedIm,
  decide,
  etagFor,
  negotiateEncoding,
  parseHttpDate,
  parseIfNoneMatch,
  parseToken,
  renderingToken,
} from '../../../src/publishing/read/conditional.js';

test('Accept-Encoding: q-values, aliases, wildcards, exclusions', () => {
  const cases: [string | undefined, string][] = [
    [undefined, 'identity'],
    ['', 'identity'],
    ['gzip', 'gzip'],
    ['x-gzip', 'gzip'],
    ['GZIP, deflate', 'gzip'],
    ['gzip, br', 'br'],
    ['br;q=0.5, gzip', 'gzip'],
    ['gzip;q=0.8, br;q=0.9', 'br'],
    ['gzip;q=1.0, br;q=1.0, identity;q=1', 'br'],
    ['br;q=0, gzip;q=0', 'identity'],
    ['*', 'br'],
    ['*;q=0.5, gzip;q=1', 'gzip'],
    ['*;q=0', 'identity'], // nothing acceptable: identity rather than 406
    ['identity;q=0, gzip;q=0.1', 'gzip'],
    ['deflate, compress', 'identity'],
    ['gzip;q=2', 'identity'], // invalid weight ignored
    ['gzip ; q = 0.5 , br ; q = 0.4', 'gzip'],
    ['zstd, br;q=0.1', 'br'],
  ];
  for (const [h, want] of cases) assert.equal(negotiateEncoding(h), want, `Accept-Encoding: ${h}`);
});

test('a rendering without br (the open hour) gets the next choice by the same q-values', () => {
  const cases: [string | undefined, string][] = [
    ['gzip, br', 'gzip'],
    ['br', 'identity'],
    ['br;q=1, gzip;q=0.5', 'gzip'],
    ['br, gzip;q=0', 'identity'],
    ['br, identity;q=0', 'identity'], // nothing acceptable: identity rather than 406
    ['*', 'gzip'],
  ];
  for (const [h, want] of cases) assert.equal(negotiateEncoding(h, false), want, `Accept-Encoding: ${h}`);
  // Each answer is remembered apart: the same header still gets br where br is stored.
  assert.equal(negotiateEncoding('gzip, br'), 'br');
});

test('tokens and ETags: base36 id.cursor, one strong tag per coding', () => {
  const r = { id: 1234, cursorUs: 1795337377123456 };
  assert.equal(renderingToken(r), `${(1234).toString(36)}.${(1795337377123456).toString(36)}`);
  assert.equal(etagFor(r, 'identity'), `"${renderingToken(r)}"`);
  assert.equal(etagFor(r, 'gzip'), `"${renderingToken(r)}-gz"`);
  assert.equal(etagFor(r, 'br'), `"${renderingToken(r)}-br"`);
  assert.deepEqual(parseToken(renderingToken(r)), r);
  for (const bad of ['', 'abc', '1.', '.1', '0.1', 'A.1', '1.1.1', '1-1', 'zzzzzzzzzzzz.1', '1.zzzzzzzzzzzz'])
    assert.equal(parseToken(bad), null, bad);
});

test('If-None-Match: lists, weak tags, *, proxy suffixes, foreign tags, commas inside tags', () => {
  const a = { id: 10, cursorUs: 5000 };
  const b = { id: 11, cursorUs: 6000 };
  const ta = renderingToken(a);
  const tb = renderingToken(b);
  assert.equal(parseIfNoneMatch(undefined), null);
  assert.deepEqual(parseIfNoneMatch('*'), { any: true, refs: [] });
  assert.deepEqual(parseIfNoneMatch(`"${ta}"`), { any: false, refs: [a] });
  assert.deepEqual(parseIfNoneMatch(`W/"${ta}-gz"`), { any: false, refs: [a] });
  assert.deepEqual(parseIfNoneMatch(`"${ta}-gzip"`), { any: false, refs: [a] }); // Apache mod_deflate
  assert.deepEqual(parseIfNoneMatch(`"${ta}-br-gzip"`), { any: false, refs: [a] });
  assert.deepEqual(parseIfNoneMatch(`"${ta};gzip"`), { any: false, refs: [a] });
  assert.deepEqual(parseIfNoneMatch(`"foo", W/"${ta}-br" ,"bar,baz", "${tb}"`), { any: false, refs: [a, b] });
  assert.deepEqual(parseIfNoneMatch(`${ta}`), { any: false, refs: [a] }); // unquoted, as some clients echo it
  assert.deepEqual(parseIfNoneMatch('"xyz", "1.2.3", ""'), { any: false, refs: [] });
  // Not a list of entity-tags: nothing in it is trusted (the full 200 is always a correct answer).
  assert.deepEqual(parseIfNoneMatch(`"${ta}" garbage "${tb}"`), { any: false, refs: [] });
});

test('A-IM: feed with or without q, among others; q=0 and other manipulations are not feed', () => {
  assert.equal(acceptsFeedIm(undefined), false);
  assert.equal(acceptsFeedIm('feed'), true);
  assert.equal(acceptsFeedIm('FEED, gzip'), true);
  assert.equal(acceptsFeedIm('diffe, feed;q=0.5'), true);
  assert.equal(acceptsFeedIm('feed;q=0'), false);
  assert.equal(acceptsFeedIm('diffe, vcdiff'), false);
  assert.equal(acceptsFeedIm('feeds'), false);
});

test('HTTP-dates: the three formats; anything else is ignored', () => {
  const ms = Date.UTC(2026, 10, 22, 8, 49, 37);
  assert.equal(parseHttpDate('Sun, 22 Nov 2026 08:49:37 GMT'), ms);
  assert.equal(parseHttpDate('Sunday, 22-Nov-26 08:49:37 GMT'), ms);
  assert.equal(parseHttpDate('Sun Nov 22 08:49:37 2026'), ms);
  assert.equal(parseHttpDate('Sun Nov  1 08:49:37 2026'), Date.UTC(2026, 10, 1, 8, 49, 37));
  for (const bad of [undefined, '', 'yesterday', '2026-11-22T08:49:37Z', 'Sun, 22 Nov 2026 08:49:37 +0000', '1795337377'])
    assert.equal(parseHttpDate(bad), null, String(bad));
});

test('decide: If-None-Match wins over If-Modified-Since; deltas only with A-IM: feed and another rendering', () => {
  const cur = { id: 20, cursorUs: 9_000_000 };
  const old = { id: 19, cursorUs: 8_000_000 };
  const lm = Date.UTC(2026, 10, 22, 8, 0, 0);
  const t = (r: { id: number; cursorUs: number }) => `"${renderingToken(r)}"`;
  const imsLater = 'Sun, 22 Nov 2026 09:00:00 GMT';
  const imsEarlier = 'Sun, 22 Nov 2026 07:00:00 GMT';
  assert.deepEqual(decide({}, cur, lm, true), { kind: 'full' });
  assert.deepEqual(decide({ ifNoneMatch: t(cur) }, cur, lm, true), { kind: 'not-modified' });
  assert.deepEqual(decide({ ifNoneMatch: '*' }, cur, lm, true), { kind: 'not-modified' });
  assert.deepEqual(decide({ ifNoneMatch: t(old) }, cur, lm, true), { kind: 'full' });
  // A tag naming the current rendering id but another cursor is not a match.
  assert.deepEqual(decide({ ifNoneMatch: `"${renderingToken({ id: 20, cursorUs: 1 })}"` }, cur, lm, true), { kind: 'full' });
  // If-None-Match present: If-Modified-Since is ignored, even when it alone would give 304.
  assert.deepEqual(decide({ ifNoneMatch: t(old), ifModifiedSince: imsLater }, cur, lm, true), { kind: 'full' });
  assert.deepEqual(decide({ ifModifiedSince: imsLater }, cur, lm, true), { kind: 'not-modified' });
  assert.deepEqual(decide({ ifModifiedSince: 'Sun, 22 Nov 2026 08:00:00 GMT' }, cur, lm, true), { kind: 'not-modified' });
  assert.deepEqual(decide({ ifModifiedSince: imsEarlier }, cur, lm, true), { kind: 'full' });
  assert.deepEqual(decide({ ifModifiedSince: 'not a date' }, cur, lm, true), { kind: 'full' });
  assert.deepEqual(decide({ ifNoneMatch: t(old), aIm: 'feed' }, cur, lm, true), { kind: 'delta', bases: [old] });
  assert.deepEqual(decide({ ifNoneMatch: `${t(old)}, ${t(cur)}`, aIm: 'feed' }, cur, lm, true), { kind: 'not-modified' });
  assert.deepEqual(decide({ ifNoneMatch: t(old), aIm: 'diffe' }, cur, lm, true), { kind: 'full' });
  assert.deepEqual(decide({ ifNoneMatch: t(old), aIm: 'feed' }, cur, lm, false), { kind: 'full' }); // document without deltas
  assert.deepEqual(decide({ aIm: 'feed' }, cur, lm, true), { kind: 'full' });
  assert.deepEqual(decide({ aIm: 'feed', ifModifiedSince: imsEarlier }, cur, lm, true), { kind: 'full' });
});
