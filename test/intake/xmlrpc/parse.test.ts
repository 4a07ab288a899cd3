import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  parseMethodCall,
  XmlRpcFault,
  FAULT,
  asString,
  MAX_PARAMS,
  MAX_VALUE_DEPTH,
  MAX_ELEMENT_DEPTH,
} from '../../../src/intake/xmlrpc/parse.js';
import { pingFromCall } from '../../../src/intake/xmlrpc/methods.js';
import { decodeXml } from '../../../src/platform/xml/decode.js';

const call = (s: string | Buffer, ct?: string) => parseMethodCall(typeof s === 'string' ? Buffer.from(s) : s, ct);
const strings = (s: string | Buffer, ct?: string) => call(s, ct).params.map(asString);
const wrap = (params: string, decl = '<?xml version="1.0"?>') =>
  `${decl}\n<methodCall><methodName>weblogUpdates.ping</methodName><params>${params}</params></methodCall>`;

function fault(fn: () => unknown, code: number, message: string | RegExp) {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof XmlRpcFault, `expected a fault, got ${e}`);
    assert.equal(e.faultCode, code);
    if (typeof message === 'string') assert.equal(e.faultString, message);
    else assert.match(e.faultString, message);
    return true;
  });
}

test('untyped, typed, empty and base64 values are strings', () => {
  const s = strings(
    wrap(
      '<param><value>plain</value></param><param><value><string>typed</string></value></param><param><value></value></param><param><value/></param><param><value><base64>Q2Fmw6k=</base64></value></param><param><value><string/></value></param>',
    ),
  );
  assert.deepEqual(s, ['plain', 'typed', '', '', 'Café', '']);
});

test('entities: XML predefined, decimal and hex references are decoded once', () => {
  const [name] = strings(wrap('<param><value>Joe&amp;#039;s &amp;amp; Co &#233; &#x2665; &#9829; &lt;b&gt;</value></param>'));
  assert.equal(name, 'Joe&#039;s &amp; Co é ♥ ♥ <b>');
});

test('CDATA sections are text', () => {
  assert.deepEqual(strings(wrap('<param><value><string><![CDATA[A & <B>]]></string></value></param>')), ['A & <B>']);
});

test('whitespace inside string values is kept; around typed elements it is ignored', () => {
  assert.deepEqual(strings(wrap('<param>\r\n <value>\r\n  <string> x </string>\r\n </value>\r\n</param>')), [' x ']);
});

test('single-quoted declaration and CRLF line endings', () => {
  assert.deepEqual(strings(wrap('<param><value>a</value></param>\r\n', "<?xml version='1.0'?>")), ['a']);
});

test('charset: iso-8859-1 bytes decoded as Latin-1, us-ascii read as UTF-8, BOMs honoured', () => {
  const latin1 = Buffer.concat([
    Buffer.from('<?xml version="1.0" encoding="iso-8859-1"?><methodCall><methodName>m</methodName><params><param><value>Caf'),
    Buffer.from([0xe9]),
    Buffer.from('</value></param></params></methodCall>'),
  ]);
  assert.deepEqual(strings(latin1), ['Café']);
  const ascii = Buffer.from(
    '<?xml version="1.0" encoding="us-ascii"?><methodCall><methodName>m</methodName><params><param><value>Café ♥</value></param></params></methodCall>',
    'utf8',
  );
  assert.deepEqual(strings(ascii), ['Café ♥']);
  const bomUtf8 = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(wrap('<param><value>é</value></param>'))]);
  assert.deepEqual(strings(bomUtf8), ['é']);
  const utf16 = Buffer.concat([
    Buffer.from([0xff, 0xfe]),
    Buffer.from(wrap('<param><value>é</value></param>', '<?xml version="1.0" encoding="UTF-16"?>'), 'utf16le'),
  ]);
  assert.deepEqual(strings(utf16), ['é']);
  // No declaration: the HTTP charset decides.
  const noDecl = Buffer.concat([
    Buffer.from('<methodCall><methodName>m</methodName><params><param><value>Caf'),
    Buffer.from([0xe9]),
    Buffer.from('</value></param></params></methodCall>'),
  ]);
  assert.deepEqual(strings(noDecl, 'text/xml; charset=ISO-8859-1'), ['Café']);
});

test('invalid UTF-8 becomes U+FFFD, never a crash', () => {
  const bad = Buffer.concat([
    Buffer.from('<methodCall><methodName>m</methodName><params><param><value>a'),
    Buffer.from([0xff, 0xc3]),
    Buffer.from('</value></param></params></methodCall>'),
  ]);
  assert.ok(decodeXml(bad).includes('a\ufffd\ufffd'));
  assert.deepEqual(strings(bad), ['a\ufffd\ufffd']);
});

test('other value types are parsed (so they can be refused by type)', () => {
  const p = call(
    wrap(
      '<param><value><int>7</int></value></param><param><value><i4>-3</i4></value></param><param><value><boolean>1</boolean></value></param><param><value><double>1.5</double></value></param><param><value><array><data><value>a</value><value><int>2</int></value></data></array></value></param><param><value><struct><member><name>k</name><value>v</value></member></struct></value></param><param><value><nil/></value></param>',
    ),
  ).params;
  assert.deepEqual(
    p.map((v) => v.type),
    ['int', 'int', 'boolean', 'double', 'array', 'struct', 'nil'],
  );
  assert.equal((p[4] as { value: unknown[] }).value.length, 2);
  assert.equal(asString(p[0]), undefined);
});

test('a struct member named __proto__ is data, not a prototype', () => {
  const [v] = call(wrap('<param><value><struct><member><name>__proto__</name><value>x</value></member></struct></value></param>')).params;
  assert.equal(v.type, 'struct');
  const m = (v as { value: Map<string, unknown> }).value;
  assert.ok(m instanceof Map);
  assert.deepEqual([...m.keys()], ['__proto__']);
  assert.equal(({} as Record<string, unknown>).x, undefined);
});

test('faults: empty, malformed, wrong document, DOCTYPE, prototype tags, bad encodings, limits', () => {
  fault(() => parseMethodCall(Buffer.alloc(0)), FAULT.PARSE_ERROR, 'Empty request: POST an XML-RPC methodCall document.');
  fault(() => call('  \r\n '), FAULT.PARSE_ERROR, 'Empty request: POST an XML-RPC methodCall document.');
  fault(() => call('<methodCall><methodName>x</methodName>'), FAULT.PARSE_ERROR, /^Parse error: not well-formed XML \(/);
  fault(() => call('not xml at all'), FAULT.PARSE_ERROR, /^Parse error: not well-formed XML/);
  fault(
    () => call('<methodResponse><params/></methodResponse>'),
    FAULT.INVALID_REQUEST,
    'Invalid request: the document element must be <methodCall>.',
  );
  fault(() => call('<methodCall><params/></methodCall>'), FAULT.INVALID_REQUEST, 'Invalid request: <methodCall> needs a <methodName>.');
  fault(
    () => call('<methodCall><methodName>a b</methodName></methodCall>'),
    FAULT.METHOD_NOT_FOUND,
    'Method not found: the method name has characters XML-RPC does not allow.',
  );
  fault(
    () =>
      call(
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]><methodCall><methodName>&lol2;</methodName></methodCall>',
      ),
    FAULT.PARSE_ERROR,
    'Parse error: DOCTYPE and entity declarations are not allowed in XML-RPC.',
  );
  fault(
    () => call('<methodCall><methodName>m</methodName><__proto__><polluted>1</polluted></__proto__></methodCall>'),
    FAULT.PARSE_ERROR,
    'Parse error: The element name __proto__ is not allowed in XML-RPC.',
  );
  fault(
    () => call('<?xml version="1.0" encoding="x-klingon"?><methodCall/>'),
    FAULT.UNSUPPORTED_ENCODING,
    'Unsupported encoding: unsupported character encoding "x-klingon".',
  );
  fault(
    () => call(wrap('<param><value><foo>1</foo></value></param>')),
    FAULT.INVALID_REQUEST,
    'Invalid request: unknown value type <foo>.',
  );
  fault(
    () => call(wrap('<param><value><string>a</string><string>b</string></value></param>')),
    FAULT.INVALID_REQUEST,
    'Invalid request: a <value> holds more than one element.',
  );
  fault(
    () => call(wrap('<param><value>text<string>b</string></value></param>')),
    FAULT.INVALID_REQUEST,
    'Invalid request: a <value> mixes text and a typed element.',
  );
  fault(() => call(wrap('<param><nope/></param>')), FAULT.INVALID_REQUEST, 'Invalid request: every <param> needs a <value>.');
  fault(() => call(wrap('<param><value><int>x</int></value></param>')), FAULT.INVALID_PARAMS, 'Invalid params: <int> is not an integer.');
  fault(
    () => call(wrap('<param><value><boolean>yes</boolean></value></param>')),
    FAULT.INVALID_PARAMS,
    'Invalid params: <boolean> must be 0 or 1.',
  );
  fault(
    () => call(wrap('<param><value><base64>!!!</base64></value></param>')),
    FAULT.INVALID_PARAMS,
    'Invalid params: <base64> is not valid base64.',
  );
  fault(
    () => call(wrap('<param><value>a</value></param>'.repeat(MAX_PARAMS + 1))),
    FAULT.INVALID_PARAMS,
    `Invalid params: more than ${MAX_PARAMS} parameters.`,
  );
  const deep =
    '<value><array><data>'.repeat(MAX_VALUE_DEPTH + 2) + '<value>x</value>' + '</data></array></value>'.repeat(MAX_VALUE_DEPTH + 2);
  fault(
    () => call(wrap(`<param>${deep}</param>`)),
    FAULT.INVALID_PARAMS,
    `Invalid params: values nested deeper than ${MAX_VALUE_DEPTH} levels.`,
  );
});

test('pingFromCall: parameter forms of ping and extendedPing', () => {
  const v = (...xs: string[]) => xs.map((value) => ({ type: 'string' as const, value }));
  assert.deepEqual(pingFromCall('weblogUpdates.ping', v('N', 'http://a/')), {
    method: 'ping',
    name: 'N',
    url: 'http://a/',
    changesUrl: null,
    tags: null,
  });
  assert.deepEqual(pingFromCall('weblogUpdates.ping', v('N', 'http://a/', 'http://a/c', 'cat')), {
    method: 'ping',
    name: 'N',
    url: 'http://a/',
    changesUrl: 'http://a/c',
    tags: 'cat',
  });
  // WordPress: (name, url, rssUrl)
  assert.deepEqual(pingFromCall('weblogUpdates.extendedPing', v('N', 'http://a/', 'http://a/feed')), {
    method: 'extendedPing',
    name: 'N',
    url: 'http://a/',
    rssUrl: 'http://a/feed',
  });
  // Seed: (name, url, changesUrl, rssUrl[, tags]); Serendipity's '' = absent
  assert.deepEqual(pingFromCall('weblogUpdates.extendedPing', v('N', 'http://a/', '', 'http://a/feed')), {
    method: 'extendedPing',
    name: 'N',
    url: 'http://a/',
    changesUrl: null,
    rssUrl: 'http://a/feed',
    tags: null,
  });
  assert.deepEqual(
    pingFromCall('weblogUpdates.extendedPing', v('N', 'http://a/', 'http://a/p', 'http://a/feed', 'rss|opml')).tags,
    'rss|opml',
  );
  fault(
    () => pingFromCall('weblogUpdates.ping', v('N')),
    FAULT.INVALID_PARAMS,
    'Invalid params: weblogUpdates.ping takes 2 to 4 parameters, got 1.',
  );
  fault(
    () => pingFromCall('weblogUpdates.extendedPing', v('1', '2', '3', '4', '5', '6')),
    FAULT.INVALID_PARAMS,
    'Invalid params: weblogUpdates.extendedPing takes 2 to 5 parameters, got 6.',
  );
  fault(
    () =>
      pingFromCall('weblogUpdates.ping', [
        { type: 'string', value: 'N' },
        { type: 'int', value: 3 },
      ]),
    FAULT.INVALID_PARAMS,
    'Invalid params: parameter 2 (url) must be a string.',
  );
});

test('markup declarations outside a DTD are refused (REGRESSION: <!ATTLIST …> inside methodCall was read as a start tag that swallowed the params)', () => {
  fault(
    () => call(wrap('<!ATTLIST x y CDATA "z"><param><value>a</value></param>')),
    FAULT.PARSE_ERROR,
    'Parse error: Markup declarations (<!ATTLIST) are not allowed in XML-RPC.',
  );
  fault(
    () => call('<?xml version="1.0"?><!NOTATION n SYSTEM "x"><methodCall/>'),
    FAULT.PARSE_ERROR,
    'Parse error: Markup declarations (<!NOTATION) are not allowed in XML-RPC.',
  );
});

test('element nesting: 100 levels are read, 101 are refused (REGRESSION: maxNestedTags 100 let 101 through)', () => {
  const nested = (levels: number) => `<methodCall>${'<z>'.repeat(levels - 1)}${'</z>'.repeat(levels - 1)}</methodCall>`;
  // 100 levels reach the reader, which refuses the call for what it lacks, not for its depth.
  assert.throws(
    () => call(nested(MAX_ELEMENT_DEPTH)),
    (e: unknown) => e instanceof XmlRpcFault && e.faultCode !== FAULT.PARSE_ERROR,
  );
  fault(
    () => call(nested(MAX_ELEMENT_DEPTH + 1)),
    FAULT.PARSE_ERROR,
    `Parse error: elements nested deeper than ${MAX_ELEMENT_DEPTH} levels.`,
  );
});
