import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  cleanName,
  decodeHtmlReferences,
  normalizeUrl,
  parseTags,
  validatePing,
  PingValidationError,
} from '../../../src/intake/ping/validate.js';

const refusal = (fn: () => unknown, message: string) =>
  assert.throws(fn, (e: unknown) => e instanceof PingValidationError && e.message === message);

test('normalizeUrl lower-cases scheme and host, drops default ports and fragments, keeps the rest', () => {
  assert.equal(normalizeUrl('HTTP://Example.COM:80/Blog/?a=B#top'), 'http://example.com/Blog/?a=B');
  assert.equal(normalizeUrl('https://example.com:443'), 'https://example.com/');
  assert.equal(normalizeUrl('https://example.com:8443/x'), 'https://example.com:8443/x');
  assert.equal(normalizeUrl('  http://example.com/  '), 'http://example.com/');
  assert.equal(normalizeUrl('http://bücher.example/'), 'http://xn--bcher-kva.example/');
});

test('normalizeUrl refuses what is not an absolute http(s) URL, with the reason', () => {
  refusal(() => normalizeUrl(null), 'The weblog URL is missing.');
  refusal(() => normalizeUrl('   '), 'The weblog URL is missing.');
  refusal(() => normalizeUrl('example.com'), 'The weblog URL is not an absolute URL: it must start with http:// or https://.');
  refusal(() => normalizeUrl('/relative/path'), 'The weblog URL is not an absolute URL: it must start with http:// or https://.');
  refusal(() => normalizeUrl('ftp://example.com/'), 'The weblog URL must use http or https, not ftp.');
  refusal(() => normalizeUrl('javascript:alert(1)'), 'The weblog URL must use http or https, not javascript.');
  refusal(() => normalizeUrl('http://user:pw@example.com/'), 'The weblog URL must not contain a user name or password.');
  refusal(() => normalizeUrl('http://example.com/a b'), 'The weblog URL contains whitespace or control characters.');
  refusal(() => normalizeUrl('http://example.com/\u0000'), 'The weblog URL contains whitespace or control characters.');
  refusal(() => normalizeUrl('http://example.com/' + 'a'.repeat(2048)), 'The weblog URL is longer than 2048 characters.');
  refusal(() => normalizeUrl('mailto:x', 'rssUrl'), 'The rssUrl must use http or https, not mailto.');
});

test('normalizeUrl accepts exactly 2048 characters', () => {
  const u = 'http://example.com/' + 'a'.repeat(2048 - 'http://example.com/'.length);
  assert.equal(normalizeUrl(u).length, 2048);
});

test('cleanName decodes one level of HTML references, folds whitespace, strips controls', () => {
  assert.equal(cleanName('Joe&#039;s &amp; Co'), "Joe's & Co");
  assert.equal(cleanName('A &amp;amp; B'), 'A &amp; B', 'only one level');
  assert.equal(cleanName('Caf&#233; &#x2665; &hearts;'), 'Café ♥ &hearts;');
  assert.equal(cleanName('  two\n\tlines \u0007bell '), 'two lines bell');
  assert.equal(cleanName('bad &#0; &#xD800; ref'), 'bad ref');
  refusal(() => cleanName(null), 'The weblog name is missing.');
  refusal(() => cleanName(' \u0001 '), 'The weblog name is empty.');
  refusal(() => cleanName('x'.repeat(1025)), 'The weblog name is longer than 1024 characters.');
  assert.equal(cleanName('é'.repeat(1024)).length, 1024);
});

test('decodeHtmlReferences leaves unknown references and lone ampersands alone', () => {
  assert.equal(decodeHtmlReferences('R&D &bogus; &'), 'R&D &bogus; &');
});

test('parseTags splits on |, trims, drops empties, limits count and length', () => {
  assert.deepEqual(parseTags('rss| opml ||  '), ['rss', 'opml']);
  assert.equal(parseTags(''), null);
  assert.equal(parseTags(null), null);
  refusal(() => parseTags(Array.from({ length: 51 }, (_, i) => `t${i}`).join('|')), 'More than 50 tags.');
  refusal(() => parseTags('x'.repeat(101)), 'A tag is longer than 100 characters.');
});

test('validatePing treats empty optional URLs as absent and validates present ones', () => {
  const p = validatePing({ method: 'extendedPing', name: 'N', url: 'http://a.example/', changesUrl: '', rssUrl: 'http://a.example/feed' });
  assert.equal(p.changesUrl, null);
  assert.equal(p.rssUrl, 'http://a.example/feed');
  refusal(
    () => validatePing({ method: 'extendedPing', name: 'N', url: 'http://a.example/', rssUrl: 'feed.xml' }),
    'The rssUrl is not an absolute URL: it must start with http:// or https://.',
  );
});

test('one site, one identity: a root dot is dropped, empty host labels are refused, tracking parameters dropped (REGRESSION: each spelling was a new weblog)', () => {
  assert.equal(normalizeUrl('http://example.com./blog/'), 'http://example.com/blog/');
  for (const bad of ['http://example.com../', 'http://a..example.com/', 'http://.example.com/']) {
    assert.throws(() => normalizeUrl(bad), { message: 'The weblog URL has a malformed host name.' }, bad);
  }
  assert.equal(normalizeUrl('http://example.com/post?utm_source=x&id=7&UTM_Medium=y&fbclid=z'), 'http://example.com/post?id=7');
  assert.equal(normalizeUrl('http://example.com/?utm_campaign=1'), 'http://example.com/');
  assert.equal(normalizeUrl('http://example.com/?utmost=1'), 'http://example.com/?utmost=1', 'only the tracking names');
});
