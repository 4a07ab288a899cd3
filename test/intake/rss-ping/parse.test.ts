import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalFeedType, parseRssPing, quoteAttributes, RssPingError } from '../../../src/intake/rss-ping/parse.js';
import { extractPayload } from '../../../src/intake/rss-ping/payload.js';
import { ITEM, rssPing, seed, SEEDS } from './helpers.js';

const refused = (body: string | Buffer, message: string, contentType?: string) =>
  assert.throws(
    () => parseRssPing(Buffer.isBuffer(body) ? body : Buffer.from(body), contentType),
    (e: unknown) => {
      assert.ok(e instanceof RssPingError, String(e));
      assert.equal(e.message, message);
      assert.equal(e.statusCode, 400);
      return true;
    },
  );

/** The payload content as located independently: after the <payload …> start tag, before the last </payload>. */
function payloadSlice(buf: Buffer): Buffer {
  const s = buf.toString('latin1');
  const start = s.indexOf('>', s.indexOf('<payload ')) + 1;
  return buf.subarray(start, s.lastIndexOf('</payload>'));
}

test('the four seed examples parse byte for byte (unquoted version, inner XML declaration, namespaces on payload, iso-8859-1)', () => {
  const expected = {
    'seed-1-rss2-feed': {
      site: 'http://photomatt.net',
      name: 'Photo Matt',
      feeds: [['http://photomatt.net/index.xml', 'RSS 2.0']],
      type: 'RSS 2.0',
      enc: 'utf-8',
      hashUri: 'http://photomatt.net/edheuhdghgDDefweffd',
    },
    'seed-2-atom10-entry': {
      site: 'http://photomatt.net',
      name: 'Photo Matt',
      feeds: [['http://photomatt.net/posts.atom', 'Atom 1.0']],
      type: 'Atom 1.0 fragment',
      enc: 'utf-8',
      hashUri: 'http://photomatt.net/edheuhdghgDDefweffd',
    },
    'seed-3-rss10-item': {
      site: 'http://www.davidgalbraith.org',
      name: "David galbraith's weblog",
      feeds: [
        ['http://www.davidgalbraith.org/index.rdf', 'RSS 1.0'],
        ['http://www.davidgalbraith.org/index.xml', 'RSS 0.91'],
      ],
      type: 'RSS 1.0 fragment',
      enc: 'iso-8859-1',
      hashUri: 'http://davidgalbraith.org/edheuhduewDDefweffd',
    },
    'seed-4-rss10-feed': {
      site: 'http://www.davidgalbraith.org',
      name: "David galbraith's weblog",
      feeds: [
        ['http://www.davidgalbraith.org/index.rdf', 'RSS 1.0'],
        ['http://www.davidgalbraith.org/index.xml', 'RSS 0.91'],
      ],
      type: 'RSS 1.0',
      enc: 'iso-8859-1',
      hashUri: 'http://davidgalbraith.org/edheuhdghgDDefweffd',
    },
  } as const;
  for (const name of SEEDS) {
    const buf = seed(name);
    const d = parseRssPing(buf, 'text/xml');
    const e = expected[name];
    assert.equal(d.version, '2', name);
    assert.equal(d.siteName, e.name, name);
    assert.equal(d.siteUri, e.site, name);
    assert.deepEqual(
      d.feeds.map((f) => [f.uri, f.type]),
      e.feeds.map((f) => [...f]),
      name,
    );
    assert.equal(d.payload.type, e.type, name);
    assert.equal(d.payload.encoding, e.enc, name);
    assert.equal(d.payloadHashUri?.uri, e.hashUri, name);
    assert.equal(d.payloadHashUri?.algorithm, null, name);
    assert.ok(d.payloadHash && /^edheuhd/.test(d.payloadHash.value), name);
    assert.deepEqual(d.payload.bytes, payloadSlice(buf), `${name}: the payload bytes are exactly those sent`);
    assert.equal(d.payload.text, payloadSlice(buf).toString('latin1'), name);
  }
  const ns = parseRssPing(seed('seed-3-rss10-item')).payload.attributes;
  assert.equal(ns['xmlns:rdf'], 'http://www.w3.org/1999/02/22-rdf-syntax-ns#');
  assert.equal(ns.xmlns, 'http://purl.org/rss/1.0/');
});

test('the seed payloads yield their headline and URI', () => {
  const got = SEEDS.map((n) => {
    const d = parseRssPing(seed(n));
    const p = extractPayload(d.payload.text, d.siteUri, d.payload.type);
    return [p.format, p.headline, p.link, p.guid];
  });
  assert.deepEqual(got, [
    [
      'rss-feed',
      'Movable Type 3.2',
      'http://photomatt.net/2005/07/14/movable-type-32/',
      'http://photomatt.net/2005/07/14/movable-type-32/',
    ],
    ['atom-entry', 'Atom-Powered Robots Run Amok', 'http://example.org/2003/12/13/atom03', 'urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a'],
    [
      'rss-item',
      'Weird sewer fishing machine in lower Manhattan',
      'http://www.davidgalbraith.org/archives/000850.html',
      'http://WWW.davidgalbraith.org/archives/000850.html',
    ],
    [
      'rdf-feed',
      'Weird sewer fishing machine in lower Manhattan',
      'http://www.davidgalbraith.org/archives/000850.html',
      'http://WWW.davidgalbraith.org/archives/000850.html',
    ],
  ]);
  const d = parseRssPing(seed('seed-1-rss2-feed'));
  assert.match(extractPayload(d.payload.text, d.siteUri).summary!, /^The new version of Movable Type sounds very nice, and they’re doing/);
});

test('lenient: no version, quoted version, CRLF, a UTF-8 BOM, single quotes, unknown elements, comments', () => {
  const base = rssPing({ siteUri: 'http://example.com/' });
  assert.equal(parseRssPing(Buffer.from(base.replace('<rss_ping version=2>', '<rss_ping>'))).version, null);
  assert.equal(parseRssPing(Buffer.from(base.replace('version=2', 'version="2.0"'))).version, '2.0');
  assert.equal(parseRssPing(Buffer.from(base.replace(/\n/g, '\r\n'))).siteName, 'Test Blog');
  assert.equal(parseRssPing(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(base)])).charset.from, 'bom');
  const odd = base
    .replace('<feed_uri type="RSS 2.0">', "<!-- feeds --><feed_uri type='rss 2.0'>")
    .replace('<site_name>', '<generator>x</generator><site_name>')
    .replace('<rss_ping version=2>', '<?xml version="1.0"?>\n<rss_ping version=2 xmlns:x=urn:x>');
  const d = parseRssPing(Buffer.from(odd));
  assert.equal(d.feeds[0].type, 'rss 2.0');
  assert.equal(d.siteName, 'Test Blog');
});

test('strict: what is not an rss_ping, or is ambiguous, is refused with the reason', () => {
  const ok = rssPing({ siteUri: 'http://example.com/' });
  refused('', 'Empty request: POST an rss_ping document.');
  refused('   \n', 'Empty request: POST an rss_ping document.');
  refused('hello', 'The request is not an XML document: POST an rss_ping document.');
  refused(
    '<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName></methodCall>',
    'The document element must be <rss_ping>, not <methodCall>.',
  );
  refused(ok.replace('version=2', 'version=1'), 'Unsupported rss_ping version "1": this server reads version 2.');
  refused(
    ok.replace(/<payload[\s\S]*<\/payload>/, ''),
    'The rss_ping has no <payload>: RSS Ping carries the new item (a feed with one item, an item or an entry).',
  );
  refused(
    ok.replace(/<payload[\s\S]*<\/payload>/, '<payload type="RSS 2.0"/>'),
    'The <payload> is empty: it must hold a feed with one item, an RSS item or an Atom entry.',
  );
  refused(ok.replace('</payload>', ''), 'The <payload> element is not closed: </payload> is missing.');
  refused(
    ok.replace('</payload>', `</payload><payload>${ITEM}</payload>`),
    'The rss_ping has more than one <payload>; send one item per ping.',
  );
  refused(ok.replace('<site_name>Test Blog</site_name>', ''), 'The rss_ping has no <site_name>.');
  refused(ok.replace('<site_name>Test Blog</site_name>', '<site_name>  </site_name>'), 'The rss_ping has no <site_name>.');
  refused(ok.replace(/<site_uri>.*<\/site_uri>/, ''), 'The rss_ping has no <site_uri>.');
  refused(ok.replace(/<feed_uri.*<\/feed_uri>/, ''), 'The rss_ping has no <feed_uri>: name at least one feed the item comes from.');
  refused(ok.replace(/<feed_uri type="RSS 2.0">.*<\/feed_uri>/, '<feed_uri type="RSS 2.0"></feed_uri>'), 'A <feed_uri> is empty.');
  refused(
    ok.replace('<site_name>Test Blog</site_name>', '<site_name>A</site_name><site_name>B</site_name>'),
    'The rss_ping has more than one <site_name>.',
  );
  refused(ok.replace('<site_name>Test Blog</site_name>', '<site_name><b>A</b></site_name>'), '<site_name> must hold text, not elements.');
  refused(
    ok.replace('</site_name>', '</site_nam>'),
    "The rss_ping is not well-formed XML (Expected closing tag 'site_name' (opened in line 2, col 1) instead of closing tag 'site_nam'. at line 2).",
  );
  refused(
    rssPing({ siteUri: 'http://example.com/', feeds: Array.from({ length: 21 }, (_, i) => `http://example.com/${i}.xml`) }),
    'The rss_ping has more than 20 <feed_uri> elements.',
  );
});

test('DOCTYPE and entity declarations are refused anywhere, payload included (entity bombs never expand)', () => {
  const bomb = `<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]><item><title>&lol2;</title><link>http://example.com/x</link></item>`;
  refused(rssPing({ siteUri: 'http://example.com/', payload: bomb }), 'DOCTYPE and entity declarations are not allowed in an rss_ping.');
  refused(
    `<!DOCTYPE rss_ping SYSTEM "file:///etc/passwd">\n${rssPing({ siteUri: 'http://example.com/' })}`,
    'DOCTYPE and entity declarations are not allowed in an rss_ping.',
  );
  refused(
    rssPing({ siteUri: 'http://example.com/', payload: '<!doctype item><item/>' }),
    'DOCTYPE and entity declarations are not allowed in an rss_ping.',
  );
  refused(
    rssPing({ siteUri: 'http://example.com/', payload: `<__proto__>${ITEM}</__proto__>` }),
    'The element name __proto__ is not allowed.',
  );
  // A declaration outside a DTD is not well-formed; the parser read it as a start tag.
  refused(
    rssPing({ siteUri: 'http://example.com/', payload: `<!ATTLIST item x CDATA "y">${ITEM}` }),
    'Markup declarations (<!ATTLIST) are not allowed in an rss_ping.',
  );
  refused(
    rssPing({ siteUri: 'http://example.com/', payload: `<!element item ANY>${ITEM}` }),
    'Markup declarations (<!ELEMENT) are not allowed in an rss_ping.',
  );
});

test('character encodings: BOM, then declaration, then Content-Type, then payload encoding, then the payload declaration, then UTF-8', () => {
  const latin1 = (s: string) => Buffer.from(s, 'latin1');
  const doc = (attrs: string, decl = '') =>
    `${decl}<rss_ping version=2><site_name>Caf\u00e9</site_name><site_uri>http://example.com/</site_uri><feed_uri type="RSS 2.0">http://example.com/feed</feed_uri>` +
    `<payload type="RSS 2.0 fragment"${attrs}><item><title>Cr\u00e8me br\u00fbl\u00e9e</title><link>http://example.com/1</link></item></payload></rss_ping>`;
  // ISO-8859-1 bytes, declared only on <payload>, as the seed's examples do.
  const d = parseRssPing(latin1(doc(' encoding="iso-8859-1"')), 'text/xml');
  assert.deepEqual(d.charset, { label: 'iso-8859-1', from: 'payload-encoding' });
  assert.equal(d.siteName, 'Café');
  assert.match(d.payload.text, /Crème brûlée/);
  assert.deepEqual(d.payload.bytes, payloadSlice(latin1(doc(' encoding="iso-8859-1"'))), 'the raw bytes stay Latin-1');
  assert.equal(extractPayload(d.payload.text, null).headline, 'Crème brûlée');
  // The Content-Type charset wins over the payload attribute; the document's declaration over both.
  assert.deepEqual(parseRssPing(latin1(doc(' encoding="utf-8"')), 'text/xml; charset=ISO-8859-1').charset, {
    label: 'iso-8859-1',
    from: 'content-type',
  });
  assert.deepEqual(
    parseRssPing(latin1(doc(' encoding="utf-8"', '<?xml version="1.0" encoding="windows-1252"?>')), 'text/xml; charset=utf-8').charset,
    { label: 'windows-1252', from: 'declaration' },
  );
  // UTF-8 by default; an inner declaration is a hint when nothing else says.
  assert.equal(parseRssPing(Buffer.from(doc(''), 'utf8')).siteName, 'Café');
  const inner = doc('').replace('<item>', '<?xml version="1.0" encoding="iso-8859-1"?><item>');
  assert.deepEqual(parseRssPing(latin1(inner)).charset, { label: 'iso-8859-1', from: 'payload-declaration' });
  refused(doc(' encoding="klingon"'), 'Unsupported character encoding "klingon": send UTF-8 or ISO-8859-1.');
  refused(
    Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(doc(''), 'utf16le')]),
    'UTF-16 rss_pings are not supported: send UTF-8 or ISO-8859-1.',
  );
});

test('the payload runs to its last end tag, so a CDATA section may mention </payload>', () => {
  const payload = `<item><title>On tags</title><description><![CDATA[ write </payload> to close it ]]></description><link>http://example.com/t</link></item>`;
  const d = parseRssPing(Buffer.from(rssPing({ siteUri: 'http://example.com/', payload })));
  assert.equal(d.payload.text, payload);
  assert.equal(extractPayload(d.payload.text, null).summary, 'write to close it');
});

test('hash algorithm attributes: any attribute naming SHA1 or MD5; another algorithm is refused', () => {
  const doc = (attrs: string) =>
    Buffer.from(rssPing({ siteUri: 'http://example.com/', hashUri: 'http://example.com/h', hashUriAttrs: attrs }));
  assert.equal(parseRssPing(doc('')).payloadHashUri?.algorithm, null);
  assert.equal(parseRssPing(doc(' algorithm="MD5"')).payloadHashUri?.algorithm, 'md5');
  assert.equal(parseRssPing(doc(' type="SHA-1"')).payloadHashUri?.algorithm, 'sha1');
  assert.equal(parseRssPing(doc(' hash=sha1')).payloadHashUri?.algorithm, 'sha1');
  assert.equal(parseRssPing(doc(' x="md5"')).payloadHashUri?.algorithm, 'md5');
  refused(doc(' algorithm="SHA256"'), 'Unsupported hash algorithm "SHA256" on <payload_hash_uri>: use SHA1 or MD5.');
  const mbox = parseRssPing(
    Buffer.from(
      rssPing({
        siteUri: 'http://example.com/',
        extra: '<publisher_mbox_hash type="SHA1">5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8</publisher_mbox_hash>',
      }),
    ),
  );
  assert.deepEqual(mbox.publisherMboxHash, { value: '5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8', algorithm: 'sha1' });
});

test('quoteAttributes quotes unquoted values and leaves comments, CDATA and PIs alone', () => {
  assert.equal(quoteAttributes('<a b=1 c=\'2\' d="x>y" e><f g=h/>'), '<a b="1" c="2" d="x>y" e=""><f g="h"/>');
  assert.equal(quoteAttributes('<!-- <a b=1> --><![CDATA[<a b=1>]]><?pi a=b?>'), '<!-- <a b=1> --><![CDATA[<a b=1>]]><?pi a=b?>');
  assert.equal(quoteAttributes('<a b="&amp; &x <">'), '<a b="&amp; &amp;x &lt;">');
});

test('feed types are "name version", case-insensitive', () => {
  assert.equal(canonicalFeedType('rss 2.0'), 'RSS 2.0');
  assert.equal(canonicalFeedType(' ATOM  0.3 '), 'Atom 0.3');
  assert.equal(canonicalFeedType('Atom 1.0'), 'Atom 1.0');
  assert.equal(canonicalFeedType('RSS'), null);
  assert.equal(canonicalFeedType(null), null);
});
