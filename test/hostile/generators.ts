// Generators for the hostile-input tests: XML-RPC bodies built from the grammar with nasty content,
// real client payloads mutated byte by byte and token by token, hostile strings, query strings and
// headers. Shared by the fuzz tests; the fixed seed makes every run reproducible (FUZZ_SEED overrides).
import fc from 'fast-check';
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';

export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 0x5eed);
/** Scales every property's run count: FUZZ_RUNS=20000 for a long local session, the default for CI. */
export const FUZZ_SCALE = Number(process.env.FUZZ_RUNS ?? 3000) / 3000;
export const runs = (n: number) => Math.max(10, Math.round(n * FUZZ_SCALE));

const FIXTURES = new URL('../fixtures/', import.meta.url).pathname;

/** The body of a recorded `.http` request (everything after the blank line). */
export function httpBody(raw: Buffer): Buffer {
  for (const sep of ['\r\n\r\n', '\n\n']) {
    const i = raw.indexOf(sep);
    if (i >= 0) return raw.subarray(i + sep.length);
  }
  return raw;
}

/** Real client requests (test/fixtures/xmlrpc) and the hostile corpus's XML-RPC bodies: the mutation seeds. */
export function seedBodies(): Buffer[] {
  const out: Buffer[] = [];
  const x = join(FIXTURES, 'xmlrpc');
  for (const f of readdirSync(x).sort()) if (f.endsWith('.http')) out.push(httpBody(readFileSync(join(x, f))));
  const h = join(FIXTURES, 'hostile', 'xmlrpc');
  if (existsSync(h)) for (const f of readdirSync(h).sort()) if (!f.endsWith('.json')) out.push(readFileSync(join(h, f)));
  return out.filter((b) => b.length > 0);
}

/** Fragments that exercise the dangerous corners of XML and of our decoder when spliced in anywhere. */
export const XML_TOKENS = [
  '<!DOCTYPE methodCall [<!ENTITY a "aaaaaaaaaa">]>',
  '<!DOCTYPE x SYSTEM "file:///etc/passwd">',
  '<!ENTITY % p SYSTEM "http://169.254.169.254/">',
  '&a;',
  '&amp;',
  '&lt;',
  '&#0;',
  '&#x10FFFF;',
  '&#xD800;',
  '&#65;',
  '&nbsp;',
  '&unknown;',
  '&',
  '&#;',
  '&#x;',
  '<![CDATA[',
  ']]>',
  '<![CDATA[<x>&amp;]]>',
  '<!--',
  '-->',
  '<?xml version="1.0" encoding="UTF-16"?>',
  '<?xml version="1.0" encoding="iso-8859-1"?>',
  '<?xml version="1.0" encoding="x-unknown"?>',
  '<?pi x?>',
  '<value>',
  '</value>',
  '<string>',
  '</string>',
  '<param>',
  '</param>',
  '<params>',
  '</params>',
  '<struct>',
  '</struct>',
  '<member>',
  '</member>',
  '<name>',
  '</name>',
  '<array>',
  '</array>',
  '<data>',
  '</data>',
  '<base64>',
  '</base64>',
  '<int>',
  '<boolean>',
  '<double>',
  '<nil/>',
  '<dateTime.iso8601>',
  '<i8>',
  '<__proto__>',
  '</__proto__>',
  '<constructor>',
  '<prototype>',
  '<hasOwnProperty>',
  '<toString>',
  '<valueOf/>',
  '<name>__proto__</name>',
  '<name>constructor</name>',
  '#text',
  ' xmlns="x"',
  ' a="1" a="2"',
  ' version=2',
  '<methodCall>',
  '</methodCall>',
  '<methodName>',
  '</methodName>',
  'weblogUpdates.ping',
  'weblogUpdates.extendedPing',
  'system.listMethods',
  'system.methodHelp',
  'http://',
  'https://',
  'javascript:',
  'http://127.0.0.1/',
  'http://[::1]/',
  '\u0000',
  '\u0001',
  '\u001b',
  '\u007f',
  '\u0085',
  '\ufeff',
  '\ufffe',
  '\uffff',
  '\u2028',
  '\ud800',
  '\udc00',
  '\r\n',
  '\t',
  '<script>alert(1)</script>',
  '"><img src=x onerror=alert(1)>',
  "'",
  '"',
  '<',
  '>',
];

/** Raw byte sequences: invalid UTF-8, BOMs, overlong forms, UTF-16 fragments. */
export const BYTE_TOKENS = [
  [0xff],
  [0xfe],
  [0xc0, 0x80],
  [0xe0, 0x80, 0x80],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xc3],
  [0x80],
  [0xef, 0xbb, 0xbf],
  [0xff, 0xfe],
  [0xfe, 0xff],
  [0x00, 0x3c],
  [0x3c, 0x00],
  [0x00],
  [0xe9],
  [0x9d],
].map((b) => Buffer.from(b));

const hostileChar = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: 'grapheme', maxLength: 3 }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '&',
      '<',
      '>',
      '"',
      "'",
      ']]>',
      '\u0000',
      '\u0008',
      '\u000b',
      '\u001f',
      '\u007f',
      '\u0085',
      '\ufffe',
      '\uffff',
      '\ud800',
      '\udfff',
      '\ufeff',
      '\u2028',
      '\u202e',
      ' ',
      '\t',
      '\n',
      '\r',
    ),
  },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 3 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom('&amp;', '&#039;', '&amp;amp;', '&lt;b&gt;', '&#0;', '&#x1F600;', '&nbsp;', '%00', '%ff', '%3Cscript%3E'),
  },
);

/** Text as a hostile sender would put it in a name or tag: markup, references, controls, lone surrogates. */
export const hostileString = (maxLength = 40) => fc.array(hostileChar, { maxLength }).map((a) => a.join(''));

/** URLs, mostly plausible, some hostile. */
export const hostileUrl = fc.oneof(
  { weight: 5, arbitrary: fc.webUrl({ withQueryParameters: true, withFragments: true }) },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.constantFrom('http://', 'https://', 'HTTP://', 'ftp://', 'javascript:', 'http:/', '//', 'http://u:p@', 'data:text/html,'),
        fc.domain(),
        hostileString(12),
      )
      .map(([s, d, p]) => `${s}${d}/${p}`),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'http://127.0.0.1/',
      'http://[::1]/',
      'http://0x7f.1/',
      'http://example.com./',
      'http://xn--nxasmq6b.com/',
      'http://例え.jp/',
      'http://a/' + 'x'.repeat(2100),
      'http://[::ffff:10.0.0.1]/',
      '',
      ' ',
      'http://',
    ),
  },
  { weight: 1, arbitrary: hostileString(20) },
);

/** Escapes text for an XML text node; `raw` leaves it as is so that malformed markup gets through. */
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');

type Tree = string;
/** A <value> from the XML-RPC grammar with hostile leaves, nesting to `depth`. */
export const xmlValue: fc.Arbitrary<Tree> = fc.letrec<{ value: Tree }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    hostileString().map((s) => `<value>${esc(s)}</value>`),
    hostileString().map((s) => `<value><string>${esc(s)}</string></value>`),
    hostileUrl.map((s) => `<value><string>${esc(s)}</string></value>`),
    hostileString().map((s) => `<value><string><![CDATA[${s.replace(/]]>/g, '')}]]></string></value>`),
    fc.uint8Array({ maxLength: 40 }).map((b) => `<value><base64>${Buffer.from(b).toString('base64')}</base64></value>`),
    fc.oneof(fc.integer(), fc.constantFrom('x', '', '99999999999999999999', '-0', '+1')).map((i) => `<value><int>${i}</int></value>`),
    fc.constantFrom('0', '1', 'true', '').map((b) => `<value><boolean>${b}</boolean></value>`),
    fc.oneof(fc.double().map(String), fc.constantFrom('NaN', 'Infinity', '1e999', '')).map((d) => `<value><double>${d}</double></value>`),
    fc.constant('<value><nil/></value>'),
    fc.constant('<value/>'),
    fc.array(tie('value'), { maxLength: 4 }).map((vs) => `<value><array><data>${vs.join('')}</data></array></value>`),
    fc
      .array(
        fc.tuple(
          fc.oneof(hostileString(10), fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty')),
          tie('value'),
        ),
        { maxLength: 4 },
      )
      .map((ms) => `<value><struct>${ms.map(([n, v]) => `<member><name>${esc(n)}</name>${v}</member>`).join('')}</struct></value>`),
  ),
})).value;

export const methodName = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('weblogUpdates.ping', 'weblogUpdates.extendedPing') },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'system.listMethods',
      'system.methodHelp',
      'system.methodSignature',
      'weblogUpdates.foo',
      '__proto__',
      'constructor',
      'toString',
      '',
    ),
  },
  { weight: 1, arbitrary: hostileString(20).map(esc) },
);

/** A methodCall from the grammar: mostly well-formed, with hostile content and odd shapes. */
export const grammarCall = fc
  .record({
    decl: fc.constantFrom(
      '<?xml version="1.0"?>\n',
      "<?xml version='1.0' encoding='utf-8'?>",
      '<?xml version="1.0" encoding="ISO-8859-1"?>',
      '',
      '<?xml version="1.0" encoding="us-ascii"?>\r\n',
    ),
    name: methodName,
    params: fc.array(xmlValue, { maxLength: 7 }),
    ws: fc.constantFrom('', '\n', '\r\n  ', ' '),
  })
  .map(
    ({ decl, name, params, ws }) =>
      `${decl}<methodCall>${ws}<methodName>${name}</methodName>${ws}<params>${params.map((p) => `<param>${ws}${p}${ws}</param>`).join(ws)}</params></methodCall>${ws}`,
  );

/** A weblogUpdates call with string parameters only: the shape that reaches validation and storage. */
export const pingCall = fc
  .record({
    method: fc.constantFrom('weblogUpdates.ping', 'weblogUpdates.extendedPing'),
    name: fc.oneof(hostileString(30), fc.constantFrom('Joe&amp;#039;s &amp;amp; Co', 'A&#0;B', '&nbsp;', ' ')),
    url: fc.oneof({ weight: 3, arbitrary: fc.webUrl() }, { weight: 1, arbitrary: hostileUrl }),
    rest: fc.array(fc.oneof(hostileUrl, hostileString(30), fc.constant('')), { maxLength: 3 }),
    untyped: fc.boolean(),
  })
  .map(({ method, name, url, rest, untyped }) => {
    const v = (s: string) => (untyped ? `<value>${esc(s)}</value>` : `<value><string>${esc(s)}</string></value>`);
    return `<?xml version="1.0"?>\n<methodCall><methodName>${method}</methodName><params>${[name, url, ...rest].map((p) => `<param>${v(p)}</param>`).join('')}</params></methodCall>\n`;
  });

type Mutation = (b: Buffer) => Buffer;

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  // Replace, insert or delete a few bytes.
  fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })).map(([at, v]): Mutation => (b) => {
    if (!b.length) return b;
    const c = Buffer.from(b);
    c[at % c.length] = v;
    return c;
  }),
  fc.tuple(fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 8 })).map(([at, ins]): Mutation => (b) => {
    const i = at % (b.length + 1);
    return Buffer.concat([b.subarray(0, i), Buffer.from(ins), b.subarray(i)]);
  }),
  fc.tuple(fc.nat(), fc.integer({ min: 1, max: 64 })).map(([at, n]): Mutation => (b) => {
    const i = at % (b.length + 1);
    return Buffer.concat([b.subarray(0, i), b.subarray(i + n)]);
  }),
  // Splice a dangerous token or byte sequence in.
  fc.tuple(fc.nat(), fc.constantFrom(...XML_TOKENS)).map(([at, t]): Mutation => (b) => {
    const i = at % (b.length + 1);
    return Buffer.concat([b.subarray(0, i), Buffer.from(t), b.subarray(i)]);
  }),
  fc.tuple(fc.nat(), fc.constantFrom(...BYTE_TOKENS)).map(([at, t]): Mutation => (b) => {
    const i = at % (b.length + 1);
    return Buffer.concat([b.subarray(0, i), t, b.subarray(i)]);
  }),
  // Truncate; duplicate a chunk (deep or repeated structure); re-encode as UTF-16.
  fc.nat().map(
    (at): Mutation =>
      (b) =>
        b.subarray(0, at % (b.length + 1)),
  ),
  fc.tuple(fc.nat(), fc.integer({ min: 1, max: 200 }), fc.integer({ min: 2, max: 60 })).map(([at, len, times]): Mutation => (b) => {
    const i = at % (b.length + 1);
    const chunk = b.subarray(i, i + len);
    return Buffer.concat([b.subarray(0, i), ...Array(times).fill(chunk), b.subarray(i)]);
  }),
  fc.constantFrom<Mutation>(
    (b) => Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(b.toString('utf8'), 'utf16le')]),
    (b) => Buffer.from(b.toString('utf8'), 'utf16le'),
    (b) => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), b]),
    (b) =>
      Buffer.from(
        b.toString('latin1').replace(/<\/?\w/g, (m) => m.toUpperCase()),
        'latin1',
      ),
  ),
);

/** A real client payload (or a corpus entry) with 1 to 8 mutations applied. */
export const mutatedBody = (seeds: Buffer[]) =>
  fc
    .tuple(fc.constantFrom(...seeds), fc.array(mutation, { minLength: 1, maxLength: 8 }))
    .map(([seed, ms]) => ms.reduce((b, m) => m(b), seed));

/**
 * Makes a counterexample readable in a failure report: small bodies in full (as base64 to paste into a
 * fixture), big ones by length and head, instead of fast-check's byte-by-byte listing of 60 kB.
 */
export function printable(b: Buffer): Buffer {
  Object.defineProperty(b, fc.toStringMethod, {
    value: () =>
      b.length <= 4096
        ? `Buffer.from(${JSON.stringify(b.toString('base64'))}, 'base64')`
        : `<${b.length} bytes, starting ${JSON.stringify(b.subarray(0, 300).toString('latin1'))}>`,
  });
  return b;
}

/** Any body an attacker might POST to /RPC2; mutations of the biggest seeds can exceed BODY_LIMIT. */
export const anyRpcBody = (seeds: Buffer[]) =>
  fc
    .oneof(
      { weight: 4, arbitrary: grammarCall.map((s) => Buffer.from(s)) },
      { weight: 3, arbitrary: pingCall.map((s) => Buffer.from(s)) },
      { weight: 5, arbitrary: mutatedBody(seeds) },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)) },
      { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 300 }).map((s) => Buffer.from(s)) },
    )
    .map(printable);

/** A raw query string: real parameter names with hostile, sometimes badly percent-encoded values. */
export const queryString = fc
  .array(
    fc.tuple(
      fc.oneof(
        {
          weight: 5,
          arbitrary: fc.constantFrom(
            'name',
            'url',
            'changesURL',
            'changesUrl',
            'rssUrl',
            'tags',
            'category',
            'blogname',
            'blogurl',
            'u',
            'title',
          ),
        },
        { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'name[]', 'url[x]', '', '&', '=', 'a%00') },
      ),
      fc.oneof(
        { weight: 3, arbitrary: hostileString(30).map(encodeURIComponentLoose) },
        { weight: 3, arbitrary: hostileUrl.map(encodeURIComponentLoose) },
        {
          weight: 1,
          arbitrary: fc.constantFrom('%', '%zz', '%ff%fe', '%c0%80', '%ed%a0%80', '%00', '+', '%2B', '%%', '%E9', 'a'.repeat(3000)),
        },
      ),
    ),
    { maxLength: 6 },
  )
  .map((ps) => ps.map(([k, v]) => `${k}=${v}`).join('&'));

/** encodeURIComponent that never throws (lone surrogates are kept as raw text, as a sloppy client would). */
export function encodeURIComponentLoose(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return s.replace(/[^\ud800-\udfff]/g, (c) => encodeURIComponent(c));
  }
}

/** Header values an attacker controls: user agents, forwarded-for, conditional GET, encodings. */
export const hostileHeaderValue = fc.oneof(
  fc.string({ unit: 'binary-ascii', maxLength: 200 }).map((s) => s.replace(/[\r\n\0]/g, '')),
  fc.constantFrom(
    '',
    ' ',
    '"',
    'W/"x"',
    '*',
    'Thu, 01 Jan 1970 00:00:00 GMT',
    'not a date',
    '99999999999',
    'gzip;q=2, br;q=-1, *;q=nan',
    'feed, gzip',
    'bytes=0-',
    'bytes=9-1',
    '127.0.0.1, ::1, garbage',
    '__proto__',
  ),
);

/** The RSS Ping seed documents (test/fixtures/rss-ping) and the hostile corpus's rss_pings. */
export function rssSeedBodies(): Buffer[] {
  const out: Buffer[] = [];
  for (const sub of ['rss-ping', join('hostile', 'rss-ping')]) {
    const d = join(FIXTURES, sub);
    if (existsSync(d)) for (const f of readdirSync(d).sort()) if (!f.endsWith('.json')) out.push(readFileSync(join(d, f)));
  }
  return out;
}

const rssItem = fc
  .record({
    title: hostileString(30),
    link: fc.oneof({ weight: 3, arbitrary: fc.webUrl() }, { weight: 1, arbitrary: hostileUrl }),
    description: hostileString(60),
    kind: fc.constantFrom('item', 'entry', 'rss', 'other'),
  })
  .map(({ title, link, description, kind }) => {
    const e = (s: string) => esc(s).replace(/>/g, '&gt;');
    if (kind === 'entry')
      return `<entry xmlns="http://www.w3.org/2005/Atom"><title type="html">${e(title)}</title><link href="${e(link).replace(/"/g, '&quot;')}"/><summary>${e(description)}</summary><id>${e(link)}</id></entry>`;
    if (kind === 'rss')
      return `<rss version="2.0"><channel><title>C</title><item><title>${e(title)}</title><link>${e(link)}</link><description>${e(description)}</description></item></channel></rss>`;
    if (kind === 'other') return `<${['post', 'x:item', '__proto__', 'constructor'][title.length % 4]}>${e(title)}</x>`;
    return `<item><title>${e(title)}</title><link>${e(link)}</link><description><![CDATA[${description.replace(/]]>/g, '')}]]></description><guid>${e(link)}</guid></item>`;
  });

/** An rss_ping from the grammar (RSS Ping), loose as real senders are, with hostile content. */
export const rssPingDoc = fc
  .record({
    version: fc.constantFrom('version=2', 'version="2.0"', "version='2'", '', 'version=3', 'version="2" version="2"'),
    name: hostileString(30),
    site: fc.oneof({ weight: 3, arbitrary: fc.webUrl() }, { weight: 1, arbitrary: hostileUrl }),
    feeds: fc.array(fc.oneof({ weight: 3, arbitrary: fc.webUrl() }, { weight: 1, arbitrary: hostileUrl }), { minLength: 0, maxLength: 4 }),
    hash: fc.option(
      fc.tuple(
        fc.constantFrom('', ' algorithm="SHA1"', ' algorithm="md5"', ' algorithm="sha256"', ' type=sha1'),
        fc.stringMatching(/^[0-9a-fA-F]{0,40}$/),
      ),
    ),
    payloadAttrs: fc.constantFrom(
      ' type="RSS 2.0" encoding="utf-8"',
      '',
      ' type=atom',
      ' encoding="iso-8859-1"',
      ' encoding="utf-16"',
      ' encoding="x-bogus"',
      ' xmlns:a="http://a/"',
    ),
    decl: fc.constantFrom('', '<?xml version="1.0" encoding="utf-8"?>\n', '<?xml version="1.0" encoding="iso-8859-1"?>'),
    innerDecl: fc.boolean(),
    item: rssItem,
  })
  .map(({ version, name, site, feeds, hash, payloadAttrs, decl, innerDecl, item }) =>
    [
      `${decl}<rss_ping ${version}>`,
      `<site_name>${esc(name)}</site_name>`,
      `<site_uri>${esc(site)}</site_uri>`,
      ...feeds.map((f) => `<feed_uri type="RSS 2.0">${esc(f)}</feed_uri>`),
      hash ? `<payload_hash${hash[0]}>${hash[1]}</payload_hash>` : '',
      `<payload${payloadAttrs}>${innerDecl ? '<?xml version="1.0"?>' : ''}${item}</payload>`,
      '</rss_ping>',
    ].join('\n'),
  );

export const anyRssBody = (seeds: Buffer[]) =>
  fc
    .oneof(
      { weight: 4, arbitrary: rssPingDoc.map((s) => Buffer.from(s)) },
      { weight: 5, arbitrary: mutatedBody(seeds) },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)) },
    )
    .map(printable);
