// The weblogUpdates format as bytes: exact elements, `when` in seconds, and well-formedness whatever the
// names and URLs hold, checked by a strict parser (expat) and a property test over arbitrary strings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { weblogElement, weblogUpdatesHead, WEBLOG_UPDATES_FOOT } from '../../../src/publishing/documents/weblog-updates.js';
import { escapeAttr } from '../../../src/platform/xml/escape.js';
import { strictParse, utc } from '../helpers.js';

const UPDATED = utc('2026-11-22T08:30:00');

test('the head and an element are the exact bytes of the seed format, `when` in seconds', () => {
  assert.equal(
    weblogUpdatesHead(new Date(UPDATED), 2000001),
    '<?xml version="1.0" encoding="utf-8"?>\n<weblogUpdates version="2" updated="Sun, 22 Nov 2026 08:30:00 GMT" count="2000001">\n',
  );
  assert.equal(
    weblogElement({ name: 'The RSS Blog', url: 'http://www.kbcafe.com/rss', rssUrl: null, atMs: UPDATED - 61_500 }, UPDATED),
    ' <weblog name="The RSS Blog" url="http://www.kbcafe.com/rss" when="61"/>\n',
  );
  assert.equal(
    weblogElement({ name: 'B', url: 'http://b.example/', rssUrl: 'http://b.example/feed?x=1&y=2', atMs: UPDATED }, UPDATED),
    ' <weblog name="B" url="http://b.example/" rssUrl="http://b.example/feed?x=1&amp;y=2" when="0"/>\n',
  );
  // A ping stamped a moment after `updated` (rendered in the same second) is not in the future.
  assert.match(weblogElement({ name: 'C', url: 'http://c.example/', rssUrl: null, atMs: UPDATED + 400 }, UPDATED), /when="0"/);
});

test('escaping: markup, quotes, whitespace that attribute normalisation would eat, and forbidden characters', () => {
  assert.equal(escapeAttr('Joe\'s <b>"Blog"</b> & Co'), "Joe's &lt;b&gt;&quot;Blog&quot;&lt;/b&gt; &amp; Co");
  assert.equal(escapeAttr('a\tb\nc\rd'), 'a&#9;b&#10;c&#13;d');
  assert.equal(escapeAttr('nul\u0000 bell\u0007 esc\u001b del\u007f c1\u0085 fffe\ufffe ffff\uffff'), 'nul bell esc del c1 fffe ffff');
  assert.equal(escapeAttr('lone \ud800 high, lone \udc00 low, pair \ud83d\ude00'), 'lone  high, lone  low, pair \ud83d\ude00');
  assert.equal(escapeAttr(']]> &amp; &#0; &bogus;'), ']]&gt; &amp;amp; &amp;#0; &amp;bogus;');
  assert.equal(escapeAttr('plain ascii and ünïcödé 日本語'), 'plain ascii and ünïcödé 日本語');
});

test('a document of hostile entries parses strictly and every attribute reads back as written (minus forbidden characters)', () => {
  const hostile = [
    '<script>alert(1)</script>',
    '"><weblog name="injected" url="x" when="0"/><x a="',
    'it\'s & "quoted"',
    'tab\there\nnewline\r\ncrlf',
    'controls \u0000\u0001\u0008\u000b\u000c\u000e\u001f\u007f\u0080\u009f',
    'surrogates \ud800 \udfff \ud83d\ude00',
    'nonchars \ufffe \uffff',
    '&lt;already escaped&gt; &#x0; &#1; &unknown;',
    ']]> <!-- --> <?pi?> <!DOCTYPE x [<!ENTITY e "boom">]> &e;',
    'bidi \u202e reversed \u200b zero-width \u2028 line sep \ufeff bom',
  ];
  const entries = hostile.map((name, i) => ({
    name,
    url: `http://h${i}.example.com/?q=${name}&x="1"`,
    rssUrl: i % 2 ? `http://h${i}.example.com/<rss>` : null,
    atMs: UPDATED - i * 1000,
  }));
  const xml = weblogUpdatesHead(new Date(UPDATED), 10) + entries.map((e) => weblogElement(e, UPDATED)).join('') + WEBLOG_UPDATES_FOOT;
  const doc = strictParse(xml);
  assert.deepEqual(doc.declaration, { version: '1.0', encoding: 'utf-8' });
  assert.equal(doc.root.name, 'weblogUpdates');
  assert.deepEqual(doc.root.attrs, { version: '2', updated: 'Sun, 22 Nov 2026 08:30:00 GMT', count: '10' });
  assert.equal(doc.children.length, hostile.length);
  const clean = (s: string) =>
    s.replace(
      /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
      '',
    );
  doc.children.forEach((c, i) => {
    const e = entries[i];
    const expected: Record<string, string> = { name: clean(e.name), url: clean(e.url), when: String(i) };
    if (e.rssUrl) expected.rssUrl = e.rssUrl;
    assert.deepEqual(c.attrs, expected);
    assert.equal(c.name, 'weblog');
  });
});

test('property: any name and URL gives a well-formed element that reads back without forbidden characters', () => {
  const strings = fc.string({ unit: 'binary', maxLength: 40 });
  const samples = fc.sample(
    fc.array(fc.record({ name: strings, url: strings, rss: fc.option(strings) }), { minLength: 1, maxLength: 30 }),
    25,
  );
  const entries = samples.flat().map((s, i) => ({ name: s.name, url: s.url, rssUrl: s.rss, atMs: UPDATED - i }));
  const xml =
    weblogUpdatesHead(new Date(UPDATED), entries.length) + entries.map((e) => weblogElement(e, UPDATED)).join('') + WEBLOG_UPDATES_FOOT;
  // One strict parse of the whole sample keeps this quick (one python process).
  const doc = strictParse(xml);
  assert.equal(doc.children.length, entries.length);
  const forbidden = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/;
  doc.children.forEach((c, i) => {
    assert.ok(!forbidden.test(c.attrs.name) && !forbidden.test(c.attrs.url));
    assert.equal(c.attrs.name, escapeAttrRoundTrip(entries[i].name));
    assert.equal('rssUrl' in c.attrs, Boolean(entries[i].rssUrl));
  });
});

/** What a parser reads back for a value we escaped: the value without the characters XML forbids. */
function escapeAttrRoundTrip(s: string): string {
  return escapeAttr(s).replace(
    /&(amp|lt|gt|quot|#9|#10|#13);/g,
    (_m, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#9': '\t', '#10': '\n', '#13': '\r' })[e] as string,
  );
}
