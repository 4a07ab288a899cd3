// The one home of the characters we never publish and of XML/HTML escaping: what is removed, what is
// escaped, that the fast path of escapeAttr never lets a forbidden character through, and that everything
// written reads back as given (minus the removed characters) through an independent parser.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { escapeAttr, escapeXml, HAS_CONTROL, stripControls } from '../../../src/platform/xml/escape.js';

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
  htmlEntities: true,
  processEntities: true,
});

/** What XML 1.0 §2.2 allows, minus DEL and the C1 controls, which we remove too. */
function publishable(cu: number): boolean {
  return cu === 0x9 || cu === 0xa || cu === 0xd || (cu >= 0x20 && cu < 0x7f) || (cu > 0x9f && cu < 0xfffe);
}

test('stripControls removes C0 controls (not tab, LF, CR), DEL, C1 controls, U+FFFE/F and lone surrogates; keeps pairs', () => {
  assert.equal(stripControls('a\u0000b\u0008c\u000Bd\u000Ce\u001Ff\u007Fg\u0085h\u009Fi\uFFFEj\uFFFFk'), 'abcdefghijk');
  assert.equal(stripControls('tab\tlf\ncr\r'), 'tab\tlf\ncr\r');
  assert.equal(
    stripControls('lone \ud800 high, lone \udc00 low, pair \ud83d\ude00, reversed \ude00\ud83d'),
    'lone  high, lone  low, pair \ud83d\ude00, reversed ',
  );
  assert.equal(stripControls('plain ascii and ünïcödé 日本語'), 'plain ascii and ünïcödé 日本語');
});

test('every UTF-16 code unit: stripControls, HAS_CONTROL and the escapers agree on what is forbidden', () => {
  for (let cu = 0; cu <= 0xffff; cu++) {
    const c = String.fromCharCode(cu);
    const surrogate = cu >= 0xd800 && cu <= 0xdfff;
    const keep = !surrogate && publishable(cu);
    assert.equal(stripControls(`a${c}b`), keep ? `a${c}b` : 'ab', `U+${cu.toString(16)}`);
    assert.equal(HAS_CONTROL.test(`a${c}b`), !keep, `U+${cu.toString(16)}`);
    // The fast path of escapeAttr is one regex test: it must not let a forbidden character through.
    const attr = escapeAttr(`a${c}b`);
    if (!keep) assert.equal(attr, 'ab', `U+${cu.toString(16)}`);
    if (!keep) assert.equal(escapeXml(`a${c}b`), 'ab', `U+${cu.toString(16)}`);
  }
});

test('escapeAttr: the fast path returns its argument; the slow path escapes & < > " and tab, LF, CR', () => {
  const plain = 'http://w1.example.com/feed.xml?q=1';
  assert.equal(escapeAttr(plain), plain);
  assert.equal(escapeAttr('Joe\'s <b>"Blog"</b> & Co'), "Joe's &lt;b&gt;&quot;Blog&quot;&lt;/b&gt; &amp; Co");
  assert.equal(escapeAttr('a\tb\nc\rd'), 'a&#9;b&#10;c&#13;d');
  assert.equal(escapeAttr(']]> &amp; &#0; &bogus;'), ']]&gt; &amp;amp; &amp;#0; &amp;bogus;');
});

test('escapeXml escapes all five specials', () => {
  assert.equal(escapeXml('<a href="x">Joe\'s & Co</a>'), '&lt;a href=&quot;x&quot;&gt;Joe&apos;s &amp; Co&lt;/a&gt;');
});

test('escaped text and attributes read back exactly (minus removed characters) through fast-xml-parser', () => {
  const hostile = 'A &amp; B & C <x> "q" \'a\' &bogus; &#0; &#x41; ]]> \u0001\u0085 lone \ud800 pair \ud83d\ude00 tab\tend';
  const expected = stripControls(hostile);
  const xml = `<r><t a="${escapeAttr(hostile)}" b="${escapeXml(hostile).replace(/\t/g, '&#9;')}">${escapeXml(hostile)}</t></r>`;
  assert.equal(XMLValidator.validate(xml), true);
  const t = parser.parse(xml).r.t;
  assert.equal(t['#text'], expected);
  assert.equal(t['@_a'], expected);
  assert.equal(t['@_b'], expected);
});

test('the escaping module depends on no domain module', () => {
  const src = readFileSync(new URL('../../../src/platform/xml/escape.ts', import.meta.url), 'utf8');
  assert.doesNotMatch(src, /from\s+['"][^'"]*\/(intake|publishing|operations)\//);
});
