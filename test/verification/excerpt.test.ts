// The feed cut down to its new entries (what a WebSub subscriber of a feed topic receives): built from the
// fetched bytes for each format, well-formed whatever odd or hostile markup the feed held (namespaces, CDATA,
// entities declared or not, control characters, Latin-1 and UTF-16 bytes), in the topic's own encoding;
// and when a feed cannot be cut safely, no excerpt (the caller builds a document from the parsed entries).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { XMLValidator } from 'fast-xml-parser';
import { entriesDocument, feedExcerpt } from '../../src/verification/excerpt.js';
import { parseFeed } from '../../src/verification/feed-parser.js';
import { feedFixture } from '../helpers/feed-server.js';

const UTF8 = 'application/rss+xml; charset=utf-8';

/** The excerpt keeping `keep` of the feed's entries, as verification would ask for it (the parser's count). */
function cut(body: Buffer | string, contentType: string, keep: number[]): string | null {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
  const parsed = parseFeed(bytes, contentType);
  assert.equal(parsed.kind, 'feed');
  if (parsed.kind !== 'feed') return null;
  const out = feedExcerpt(bytes, contentType, parsed.format, keep, parsed.items.length);
  return out === null ? null : out.toString('utf8');
}

test('RSS with namespaces and CDATA: only the kept items, everything else as written', () => {
  const rss =
    '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:content="http://purl.org/rss/1.0/modules/content/">' +
    '<channel><title>T</title><item><title>new</title><dc:creator>Ann</dc:creator><content:encoded><![CDATA[<b>x</b> & y]]></content:encoded></item>' +
    '<item><title>old</title></item></channel></rss>';
  const out = cut(rss, UTF8, [0]);
  assert.equal(
    out,
    '<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:content="http://purl.org/rss/1.0/modules/content/">' +
      '<channel><title>T</title><item><title>new</title><dc:creator>Ann</dc:creator><content:encoded><![CDATA[<b>x</b> & y]]></content:encoded></item></channel></rss>',
  );
});

test('entities: predefined and numeric ones stay escaped, text that looks like a reference is escaped again, DTD entities are never expanded (no entity expansion attack)', () => {
  const rss =
    '<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY co "Co &amp; Sons">]><rss version="2.0"><channel><title>&co;</title>' +
    '<item><title>AT&amp;T; &amp;eacute; &#233; &lt;i&gt;</title><link>http://a.example/?a=1&amp;b=2</link></item></channel></rss>';
  const out = cut(rss, 'application/rss+xml', [0]) as string;
  assert.equal(XMLValidator.validate(out), true);
  assert.ok(!out.includes('<!DOCTYPE'), 'no DOCTYPE');
  assert.ok(out.includes('<title>&amp;co;</title>'), 'a declared entity stays the text it was');
  assert.ok(out.includes('<title>AT&amp;T; &amp;eacute; é &lt;i&gt;</title>'), out);
  assert.ok(out.includes('<link>http://a.example/?a=1&amp;b=2</link>'));
});

test('control characters in text and attributes are dropped, never written', () => {
  const rss = '<rss version="2.0"><channel><title>a&#x1;b</title><item><title x="1&#x2;2">c\u0007d</title></item></channel></rss>';
  const out = cut(rss, UTF8, [0]);
  // XML 1.0 forbids &#x1; itself: such a feed is not well-formed and no excerpt is made of it, or, when
  // the parser took it, the result holds none of them.
  if (out !== null) {
    assert.equal(XMLValidator.validate(out), true);
    assert.doesNotMatch(out, /[\u0001\u0002\u0007]/);
  }
});

test('Latin-1 bytes stay Latin-1-compatible: non-ASCII as character references under the declared encoding', () => {
  const out = cut(feedFixture('latin1.xml'), 'application/rss+xml', [0]) as string;
  assert.ok(out, 'an excerpt');
  assert.match(out, /^<\?xml version="1.0" encoding="iso-8859-1"\?>/i);
  assert.doesNotMatch(out, /[^\x00-\x7f]/, 'ASCII only');
  assert.equal(XMLValidator.validate(out), true);
});

test('UTF-16 stays UTF-16, with its byte-order mark', () => {
  const xml =
    '<?xml version="1.0" encoding="UTF-16"?><rss version="2.0"><channel><title>Ünï</title><item><title>ä</title></item><item><title>ö</title></item></channel></rss>';
  const bytes = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(xml, 'utf16le')]);
  const parsed = parseFeed(bytes, 'application/rss+xml');
  assert.equal(parsed.kind, 'feed');
  const out = feedExcerpt(bytes, 'application/rss+xml', 'rss', [1], 2) as Buffer;
  assert.deepEqual([...out.subarray(0, 2)], [0xff, 0xfe]);
  const text = out.subarray(2).toString('utf16le');
  assert.ok(text.includes('<item><title>ö</title></item>') && !text.includes('ä'));
});

test('Atom: entries kept by index, the feed element and its namespace as written; xhtml content survives', () => {
  const atom =
    '<feed xmlns="http://www.w3.org/2005/Atom" xml:lang="en"><title type="text">A</title><id>urn:a</id>' +
    '<entry><id>1</id><title>one</title><content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">a <b>b</b></div></content></entry>' +
    '<entry><id>2</id><title>two</title></entry></feed>';
  const out = cut(atom, 'application/atom+xml', [0]) as string;
  assert.equal(XMLValidator.validate(out), true);
  assert.ok(out.includes('<div xmlns="http://www.w3.org/1999/xhtml">a <b>b</b></div>'));
  assert.ok(!out.includes('<id>2</id>'));
});

test('RSS 1.0: the items beside the channel are the ones cut', () => {
  const out = cut(feedFixture('rss10.rdf'), 'application/rdf+xml', [1]) as string;
  assert.equal(XMLValidator.validate(out), true);
  assert.equal((out.match(/<item[\s>]/g) ?? []).length, 1);
});

test('JSON Feed: the items kept, every other member as it was', () => {
  const doc = {
    version: 'https://jsonfeed.org/version/1.1',
    title: 'J',
    _ext: { a: 1 },
    items: [
      { id: 'a', content_text: 'x' },
      { id: 'b', content_text: 'y' },
    ],
  };
  const out = cut(JSON.stringify(doc), 'application/feed+json', [1]);
  assert.deepEqual(JSON.parse(out as string), { ...doc, items: [{ id: 'b', content_text: 'y' }] });
});

test("no excerpt when the entries found do not match the parser's (it could keep the wrong ones)", () => {
  const rss = Buffer.from('<rss version="2.0"><channel><item><title>a</title></item></channel></rss>');
  assert.equal(feedExcerpt(rss, UTF8, 'rss', [0], 2), null);
  // A feed left unclosed is cut all the same, and what is written is closed.
  const open = feedExcerpt(Buffer.from('<rss><channel><item><title>a'), UTF8, 'rss', [0], 1);
  assert.ok(open === null || XMLValidator.validate(open.toString('utf8')) === true);
});

test('the fallback document of each format is well-formed and holds the entries, escaped', () => {
  const entries = [
    { title: 'A & <B>', link: 'http://a.example/?x=1&y=2', guid: 'g1', published: new Date('2026-01-02T03:04:05Z'), summary: ']]> "q"' },
  ];
  for (const f of ['rss', 'atom'] as const) {
    const d = entriesDocument(f, { title: 'Feed & co', url: 'http://a.example/feed', siteUrl: 'http://a.example/' }, entries);
    const text = d.body.toString('utf8');
    assert.equal(XMLValidator.validate(text), true, text);
    assert.ok(text.includes('A &amp; &lt;B&gt;'));
    assert.match(d.contentType, /charset=utf-8$/);
  }
  const j = entriesDocument('json', { title: null, url: 'http://a.example/feed', siteUrl: null }, entries);
  assert.equal(JSON.parse(j.body.toString('utf8')).items[0].title, 'A & <B>');
});
