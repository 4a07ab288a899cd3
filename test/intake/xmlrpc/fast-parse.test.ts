// The fast methodCall scanner must give exactly what the full parser gives, or step aside (undefined):
// checked on every fixture from real clients, on hand-picked edge cases, and on generated documents.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import fc from 'fast-check';
import { fastParseMethodCall } from '../../../src/intake/xmlrpc/fast-parse.js';
import { parseMethodCall, parseMethodCallText, type MethodCall } from '../../../src/intake/xmlrpc/parse.js';
import { decodeXml } from '../../../src/platform/xml/decode.js';

const FIXTURES = new URL('../../fixtures/xmlrpc/', import.meta.url);

/** The full parser's answer: the call, or the fault it throws. */
function full(text: string): MethodCall | { fault: number } {
  try {
    return parseMethodCallText(text);
  } catch (err) {
    return { fault: (err as { faultCode: number }).faultCode };
  }
}

/** Fails unless the fast path agrees with the full parser (or declines); returns whether it took the input. */
function agrees(text: string): boolean {
  const fast = fastParseMethodCall(text);
  if (fast === undefined) return false;
  assert.deepEqual(fast, full(text), `fast path differs from the full parser on ${JSON.stringify(text)}`);
  return true;
}

test('the fast path agrees with the full parser on every real-client fixture, and takes the common ones', () => {
  const taken: string[] = [];
  for (const name of readdirSync(FIXTURES).filter((f) => f.endsWith('.http'))) {
    const raw = readFileSync(new URL(name, FIXTURES));
    const sep = raw.indexOf('\r\n\r\n');
    const head = raw.subarray(0, sep).toString('latin1');
    const contentType = /^content-type:\s*(.+)$/im.exec(head)?.[1]?.trim();
    const body = raw.subarray(sep + 4);
    if (body.length === 0) continue;
    const text = decodeXml(body, contentType);
    if (agrees(text)) taken.push(name);
  }
  // The fast path exists for these shapes; if it stopped taking them it would be dead code.
  for (const name of [
    'wordpress-extendedPing.http',
    'wordpress-ping.http',
    'ghost-ping.http',
    'python-extendedPing.http',
    'node-xmlrpc-extendedPing.http',
    'movabletype-ping.http',
  ]) {
    assert.ok(taken.includes(name), `fast path declined ${name}`);
  }
});

const call = (params: string, decl = '<?xml version="1.0"?>\n', name = 'weblogUpdates.ping') =>
  `${decl}<methodCall><methodName>${name}</methodName><params>${params}</params></methodCall>`;
const p = (v: string) => `<param><value>${v}</value></param>`;

test('edge cases: what the fast path takes equals the full parse, and refusals always take the full path', () => {
  const cases = [
    call(p('plain') + p('<string>http://x.example.com/</string>')),
    call(p('  spaced  ') + p('') + p('<string/>')),
    call(p('a\r\nb\rc') + p('<string>x\r\n</string>')),
    call(p('&amp;&lt;&gt;&quot;&apos;&#039;&#x41;&#65;') + p('Joe&amp;#039;s &amp;amp; Co')),
    call(p('&#0;') + p('x')),
    call(p('&#x1F;&#x7f;&#x9f;&#xD800;&#xFFFE;&#x110000;')),
    call(p('&nbsp;&copy;&foo;&AMP;')),
    call(p('&#X41;')),
    call(p('a & b')),
    call(p('<![CDATA[x<y&amp;]]>') + p('<string><![CDATA[a\r\nb]]></string>')),
    call(p('<string>a<![CDATA[b]]>c</string>')),
    call(p('<![CDATA[<!DOCTYPE x>]]>')),
    call(p('<string><![CDATA[<__proto__>]]></string>')),
    call(p('<int>1</int>')),
    call(p('<base64>aGk=</base64>')),
    call(p(' <string>x</string> ')),
    call(p('x<string>y</string>')),
    call(p('x'), "<?xml version='1.0' encoding='UTF-8'?>"),
    call(p('x'), '<?xml version="1.0" ?>'),
    call(p('x'), '<?xml version="1.0" encoding="utf-8" standalone="yes"?>'),
    call(p('x'), '<?xml?>'),
    call(p('x'), '  <?xml version="1.0"?>'),
    call(p('x'), '<?xml version="1.0"?><!-- c -->'),
    call(p('x'), '', ' weblogUpdates.ping '),
    call(p('x'), '', 'bad name'),
    call(p('x'), '', ''),
    call(p('x'), '', '&amp;'),
    call(' x '),
    call(''),
    '<methodCall><methodName>a</methodName></methodCall>',
    '<methodCall><methodName>a</methodName><params/></methodCall>',
    '<methodCall><methodName>a</methodName></methodCall>trailing',
    '<methodCall><methodName>a</methodName></methodCall>\n\n',
    '<methodCall ><methodName>a</methodName></methodCall>',
    '<methodCall><methodName>a</methodName><params><param><value>x</value></param></params></methodCall><methodCall/>',
    call(Array.from({ length: 33 }, () => p('x')).join('')),
    call(Array.from({ length: 32 }, () => p('x')).join('')),
    call('<param><value>x</value><value>y</value></param>'),
    call('<param></param>'),
    call(p('a\u0000b\u0001\uFFFE\uD800') + p('\u00e9\u{1F600}')),
    call(p('a]]>b > c')),
  ];
  let taken = 0;
  for (const c of cases) if (agrees(c)) taken++;
  assert.ok(taken >= 15, `fast path took only ${taken} of ${cases.length} edge cases`);
});

test('DOCTYPE and prototype names are refused even where the fast path could read the document', () => {
  const doc = call(p('<string><![CDATA[<!DOCTYPE x>]]></string>'));
  assert.throws(
    () => parseMethodCall(Buffer.from(doc)),
    (e: unknown) => (e as { faultCode: number }).faultCode === -32700,
  );
});

// Text built from the pieces that matter to XML character data: references of every kind, stray
// ampersands, line ends, markup characters, controls and non-BMP characters.
const textPiece = fc.oneof(
  fc.constantFrom(
    'a',
    'Z',
    ' ',
    '\t',
    '\n',
    '\r',
    '\r\n',
    '>',
    '"',
    "'",
    ']]>',
    '/',
    '=',
    '?',
    '\u00e9',
    '\u{1F600}',
    '\u0000',
    '\u0001',
    '\u007f',
    '\u0085',
    '\uFFFE',
    '\uFFFD',
  ),
  fc.constantFrom(
    '&amp;',
    '&lt;',
    '&gt;',
    '&quot;',
    '&apos;',
    '&#039;',
    '&#38;',
    '&#x26;',
    '&#x41;',
    '&#X41;',
    '&nbsp;',
    '&copy;',
    '&foo;',
    '&',
    '&#;',
    '&#x;',
    '&amp',
    '&#0;',
    '&#9;',
    '&#13;',
    '&#x7F;',
    '&#x85;',
    '&#xA0;',
    '&#xD7FF;',
    '&#xD800;',
    '&#xE000;',
    '&#xFFFD;',
    '&#xFFFE;',
    '&#x10000;',
    '&#x10FFFF;',
    '&#x110000;',
    '&#1114111;',
    '&#9999999;',
  ),
  fc.integer({ min: 0, max: 0x10ffff }).map((cp) => `&#${cp};`),
  fc.integer({ min: 0, max: 0x10ffff }).map((cp) => `&#x${cp.toString(16)};`),
  fc.integer({ min: 0x20, max: 0xd7ff }).map((cp) => String.fromCodePoint(cp)),
);
const text = fc.array(textPiece, { maxLength: 12 }).map((a) => a.join(''));
const ws = fc.constantFrom('', ' ', '\n', '\r\n', '\t', '\n    ');
const value = fc.oneof(
  text.map((t) => `<value>${t}</value>`),
  fc.tuple(ws, text, ws).map(([a, t, b]) => `<value>${a}<string>${t}</string>${b}</value>`),
  fc.tuple(ws, ws).map(([a, b]) => `<value>${a}<string/>${b}</value>`),
  fc.constant('<value/>'),
  text.filter((t) => !t.includes(']]>')).map((t) => `<value><![CDATA[${t}]]></value>`),
  text.filter((t) => !t.includes(']]>')).map((t) => `<value><string><![CDATA[${t}]]></string></value>`),
  fc.constantFrom(
    '<value><int>7</int></value>',
    '<value><boolean>1</boolean></value>',
    '<value><base64>aGk=</base64></value>',
    '<value><array><data></data></array></value>',
  ),
);
const decl = fc.constantFrom(
  '',
  '<?xml version="1.0"?>',
  '<?xml version="1.0"?>\n',
  "<?xml version='1.0'?>",
  '<?xml version="1.0" encoding="UTF-8"?>',
  '<?xml version="1.0" encoding="utf-8" ?>\r\n',
  '<?xml version="1.0" standalone="yes"?>',
  '<?xml version="1.1"?>',
  '<?xml version="2.0"?>',
  '<?xml encoding="utf-8"?>',
  ' <?xml version="1.0"?>',
  '\n',
);
const methodName = fc.constantFrom(
  'weblogUpdates.ping',
  'weblogUpdates.extendedPing',
  ' weblogUpdates.ping\n',
  'system.listMethods',
  'a',
  '',
  ' ',
  'a b',
  'x'.repeat(129),
  'a&amp;b',
  'a.b:c/d_e',
);
const doc = fc
  .tuple(
    decl,
    ws,
    methodName,
    ws,
    fc.array(fc.tuple(ws, value, ws), { maxLength: 6 }),
    ws,
    fc.boolean(),
    fc.constantFrom('', '\n', ' \r\n', 'x', '<a/>'),
  )
  .map(([d, w1, name, w2, params, w3, withParams, tail]) => {
    const ps = params.map(([a, v, b]) => `${a}<param>${a}${v}${b}</param>${b}`).join('');
    return `${d}<methodCall>${w1}<methodName>${name}</methodName>${w2}${withParams || ps ? `<params>${ps}${w3}</params>` : ''}${w3}</methodCall>${tail}`;
  });

test('generated methodCalls: the fast path equals the full parser wherever it answers', () => {
  let taken = 0;
  fc.assert(
    fc.property(doc, (d) => {
      if (agrees(d)) taken++;
    }),
    { numRuns: 4000, seed: 7 },
  );
  assert.ok(taken > 400, `fast path took only ${taken} of 4000 generated documents`);
});

test('generated mutations of a real ping: one character inserted, deleted or replaced anywhere', () => {
  const base = call(p('<string>Joe&amp;#039;s Blog</string>') + p('<string>http://blog.example.com/</string>'));
  const chars = fc.constantFrom('<', '>', '/', '&', ';', '!', '?', ' ', '\r', 'a', '"', "'", '=', '[', ']', '#', 'x', '\u0000');
  fc.assert(
    fc.property(fc.nat(base.length), fc.constantFrom('insert', 'delete', 'replace'), chars, (at, op, ch) => {
      const d =
        op === 'insert'
          ? base.slice(0, at) + ch + base.slice(at)
          : op === 'delete'
            ? base.slice(0, at) + base.slice(at + 1)
            : base.slice(0, at) + ch + base.slice(at + 1);
      agrees(d);
    }),
    { numRuns: 3000, seed: 11 },
  );
});
