import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { UNTRUSTED_XML } from '../../../src/platform/xml/parser-options.js';
import { longTextAsCdata } from '../../../src/intake/rss-ping/long-text.js';

// The two shapes rss_ping parses with (payload.ts and parse.ts): the tree must not change under either.
const parsers = {
  payload: new XMLParser({
    ...UNTRUSTED_XML,
    ignoreAttributes: false,
    attributeNamePrefix: '@_',
    trimValues: true,
    alwaysCreateTextNode: true,
    isArray: (_n, _j, _l, isAttribute) => !isAttribute,
    jPath: false,
  }),
  outer: new XMLParser({
    ...UNTRUSTED_XML,
    ignoreAttributes: false,
    attributeNamePrefix: '',
    attributesGroupName: '@',
    trimValues: true,
    isArray: (_n, jpath, _l, isAttribute) => !isAttribute && String(jpath).split('.').length === 2,
  }),
};

function sameTree(xml: string): boolean {
  assert.equal(XMLValidator.validate(xml), true, 'only validated documents are rewritten');
  const rewritten = longTextAsCdata(xml);
  for (const [name, p] of Object.entries(parsers))
    assert.deepEqual(p.parse(rewritten), p.parse(xml), `${name}: ${JSON.stringify(xml).slice(0, 300)}`);
  return rewritten !== xml;
}

const long = (s: string) => s.repeat(Math.ceil(300 / s.length));

test('long text handed over as CDATA gives the tree the text itself gives: trimming, line ends, references, comments', () => {
  const cases = [
    `<a>${long('plain text ')}</a>`,
    `<a>  ${long('&lt;p&gt;Caf&#233; &amp; cr&#xE8;me &quot;q&quot; &apos;a&apos; ')}  </a>`,
    `<a>&#32;${long('x')}&#9;</a>`, // references to whitespace survive the trim: the parser trims before decoding
    `<a>${long('a\r\nb\rc\n')}</a>`,
    `<a>${long('\r&#10;')}</a>`, // a CR, then a decoded LF: two line ends
    `<a>${long('x')}\r<!-- c -->\ny</a>`, // the parser reads through comments and joins the text
    `<a>${long(']]&gt; ]]> ')}</a>`, // what would end a CDATA section
    `<a>${long('x')}<![CDATA[ kept ]]>${long('y')}<b/>${long('z')}</a>`,
    `<a k="v>w"><?pi a="?>"?>${long('x')}</a>`,
    `<a><!ELEMENT x>${long('y')}</a>`, // a declaration the validator lets through, read as a start tag
    `<a>${long('&nbsp;&copy;&eacute;&#1;&#0;&#xD800;&#13;')}</a>`, // left to the parser's own decoding
  ];
  const rewritten = cases.map(sameTree);
  assert.deepEqual(rewritten, [true, true, true, true, true, true, true, true, true, true, false]);
  assert.equal(longTextAsCdata(`<a>${long('x')}`), `<a>${long('x')}`, 'not well-formed: left alone');
});

test('long text handed over as CDATA gives the same tree: generated documents', () => {
  const piece = fc.constantFrom(
    'a',
    ' ',
    '\n',
    '\r\n',
    '\r',
    '\t',
    '\u00a0',
    'é',
    '😀',
    '&amp;',
    '&lt;',
    '&gt;',
    '&quot;',
    '&apos;',
    '&#32;',
    '&#9;',
    '&#10;',
    '&#13;',
    '&#xD;',
    '&#1;',
    '&#0;',
    '&#xD800;',
    '&#233;',
    '&#x1F600;',
    '&#X41;',
    '&nbsp;',
    '&eacute;',
    ']]>',
    ']]&gt;',
    '>',
    'x y',
    '&#0065;',
    '&#1114112;',
  );
  const text = fc.tuple(fc.array(piece, { maxLength: 12 }), fc.integer({ min: 0, max: 200 })).map(([ps, k]) => ps.join('').repeat(k));
  const leaf = fc.oneof(
    text,
    text.map((t) => `<!--${t.replace(/-(?=-|$)/g, '')}-->`),
    text.map((t) => `<![CDATA[${t.replace(/]]>/g, '')}]]>`),
    fc.constant('<?pi a="?>" b?>'),
    fc.constant(`<e a="x>y" b='1'/>`),
  );
  const { el } = fc.letrec((tie) => ({
    el: fc
      .tuple(
        fc.constantFrom('a', 'b', 'x:c'),
        fc.array(fc.oneof({ depthSize: 'small' }, leaf, tie('el') as fc.Arbitrary<string>), { maxLength: 5 }),
      )
      .map(([n, kids]) => `<${n} k="v">${kids.join('')}</${n}>`),
  }));
  let rewritten = 0;
  fc.assert(
    fc.property(fc.array(fc.oneof(leaf, el), { maxLength: 6 }), (kids) => {
      const xml = `<payload>${kids.join('')}</payload>`;
      if (XMLValidator.validate(xml) === true && sameTree(xml)) rewritten++;
    }),
    { numRuns: 1000, seed: 20260101 },
  );
  assert.ok(rewritten > 100, `the rewrite happened (${rewritten} times)`);
});
