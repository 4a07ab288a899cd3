import { test } from 'node:test';
import assert from 'node:assert/strict';
import { extractPayload } from '../../../src/intake/rss-ping/payload.js';
import { RssPingError } from '../../../src/intake/rss-ping/parse.js';

const SITE = 'http://example.com/';

const refused = (payload: string, message: string) =>
  assert.throws(
    () => extractPayload(payload, SITE),
    (e: unknown) => e instanceof RssPingError && e.message === message && e.statusCode === 400,
  );

test('an RSS 2.0 item fragment', () => {
  const p = extractPayload(
    `\n<item><title>Hello</title><link>https://example.com/hello</link><guid isPermaLink="false">post-1</guid><description>&lt;p&gt;First &lt;b&gt;post&lt;/b&gt;.&lt;/p&gt;</description></item>\n`,
    SITE,
  );
  assert.deepEqual(p, {
    format: 'rss-item',
    headline: 'Hello',
    link: 'https://example.com/hello',
    guid: 'post-1',
    uri: 'https://example.com/hello',
    summary: 'First post .',
    tokenized: false,
  });
});

test('an Atom 1.0 entry with prefixes and several links: the alternate link wins, atom:id is the guid', () => {
  const p = extractPayload(
    `<?xml version="1.0" encoding="utf-8"?>
<atom:entry xmlns:atom="http://www.w3.org/2005/Atom">
  <atom:link rel="self" href="https://example.com/entry.atom"/>
  <atom:link rel="alternate" type="text/html" href="https://example.com/2024/robots"/>
  <atom:id>tag:example.com,2024:robots</atom:id>
  <atom:title type="html">Robots &amp;lt;3 Atom</atom:title>
  <atom:summary type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml"><p>Hi <b>there</b></p></div></atom:summary>
</atom:entry>`,
    SITE,
  );
  assert.deepEqual(p, {
    format: 'atom-entry',
    headline: 'Robots <3 Atom',
    link: 'https://example.com/2024/robots',
    guid: 'tag:example.com,2024:robots',
    uri: 'https://example.com/2024/robots',
    summary: 'Hi there',
    tokenized: false,
  });
});

test('an Atom 0.3 entry (escaped content, issued/modified) and a one-entry Atom feed', () => {
  const atom03 = extractPayload(
    `<entry xmlns="http://purl.org/atom/ns#"><title>Old Atom</title><link rel="alternate" type="text/html" href="http://example.com/old"/><id>tag:example.com,2004:1</id><issued>2004-01-01T00:00:00Z</issued><content type="text/html" mode="escaped">&lt;p&gt;Body&lt;/p&gt;</content></entry>`,
    SITE,
  );
  assert.equal(atom03.headline, 'Old Atom');
  assert.equal(atom03.link, 'http://example.com/old');
  assert.equal(atom03.summary, 'Body');
  const feed = extractPayload(
    `<feed xmlns="http://www.w3.org/2005/Atom"><title>Blog</title><entry><title>Only</title><link href="/only"/><id>urn:x:1</id></entry></feed>`,
    SITE,
  );
  assert.deepEqual([feed.format, feed.headline, feed.link], ['atom-feed', 'Only', 'http://example.com/only']);
});

test('a feed must carry exactly one item', () => {
  refused(
    `<rss version="2.0"><channel><title>x</title><item><title>a</title><link>http://e.com/a</link></item><item><title>b</title><link>http://e.com/b</link></item></channel></rss>`,
    'The payload feed must hold exactly one item, not 2.',
  );
  refused(`<rss version="2.0"><channel><title>x</title></channel></rss>`, 'The payload feed must hold exactly one item, not 0.');
  refused(
    `<feed xmlns="http://www.w3.org/2005/Atom"><entry><title>a</title><id>urn:a</id></entry><entry><title>b</title><id>urn:b</id></entry></feed>`,
    'The payload feed must hold exactly one entry, not 2.',
  );
});

test('missing headline and missing URI are refused, as the seed requires', () => {
  refused(
    `<item><link>http://example.com/x</link><guid>http://example.com/x</guid></item>`,
    'The payload has no headline: the item needs a title, description, content or summary.',
  );
  refused(
    `<item><title>  </title><description></description><link>http://example.com/x</link></item>`,
    'The payload has no headline: the item needs a title, description, content or summary.',
  );
  refused(
    `<item><title>No link</title><description>none</description></item>`,
    'The payload has no URI: the item needs an http(s) link, a guid, a permalink or an id.',
  );
  refused(
    `<entry><title>Only a bad link</title><link href="javascript:alert(1)"/></entry>`,
    'The payload has no URI: the item needs an http(s) link, a guid, a permalink or an id.',
  );
  refused(
    `<item><title>Spaces</title><guid>not a uri</guid></item>`,
    'The payload has no URI: the item needs an http(s) link, a guid, a permalink or an id.',
  );
});

test('a non-http link is never published as the link; another identifier is used', () => {
  const p = extractPayload(
    `<item><title>t</title><link>javascript:alert(1)</link><guid isPermaLink="false">urn:uuid:1</guid></item>`,
    SITE,
  );
  assert.equal(p.link, null);
  assert.equal(p.uri, 'urn:uuid:1');
});

test('a permalink guid (the RSS 2.0 default) is the link; permalink elements count; relative links resolve against the site', () => {
  assert.equal(extractPayload(`<item><title>t</title><guid>https://example.com/p/1</guid></item>`, SITE).link, 'https://example.com/p/1');
  assert.equal(extractPayload(`<item><title>t</title><guid isPermaLink="false">https://example.com/p/1</guid></item>`, SITE).link, null);
  assert.equal(
    extractPayload(`<post><title>t</title><permalink>/2024/01/post</permalink></post>`, SITE).link,
    'http://example.com/2024/01/post',
  );
  assert.equal(extractPayload(`<post><title>t</title><permalink>/2024/01/post</permalink></post>`, SITE).format, 'other');
});

test('the headline falls back to the description, summary or content, as plain text', () => {
  const long = 'word '.repeat(100);
  const p = extractPayload(`<item><description>${long}</description><link>http://example.com/d</link></item>`, SITE);
  assert.equal(p.headline.length, 200);
  assert.ok(p.headline.endsWith('…'));
  assert.equal(extractPayload(`<entry><summary>Just a summary</summary><id>urn:s</id></entry>`, SITE).headline, 'Just a summary');
  assert.equal(
    extractPayload(
      `<item><content:encoded xmlns:content="http://purl.org/rss/1.0/modules/content/">&lt;p&gt;Full text&lt;/p&gt;</content:encoded><link>http://example.com/c</link></item>`,
      SITE,
    ).headline,
    'Full text',
  );
  assert.equal(
    extractPayload(`<item><title>Joe&amp;#039;s post</title><link>http://example.com/j</link></item>`, SITE).headline,
    "Joe's post",
  );
});

test('tokenized content satisfies the minimum but is never shown', () => {
  const p = extractPayload(
    `<entry><content type="tokenized">movable type version sounds nice</content><link href="http://example.com/tok"/></entry>`,
    SITE,
  );
  assert.equal(p.tokenized, true);
  assert.equal(p.summary, null);
  assert.equal(p.headline, 'http://example.com/tok');
  const q = extractPayload(
    `<entry><title>Shown</title><content>indexed words only</content><link href="http://example.com/t2"/></entry>`,
    SITE,
    'Atom 1.0 fragment tokenized',
  );
  assert.deepEqual([q.tokenized, q.headline, q.summary], [true, 'Shown', null]);
});

test('a payload that is not one well-formed element is refused', () => {
  refused('', 'The <payload> is empty: it must hold a feed with one item, an RSS item or an Atom entry.');
  refused('<?xml version="1.0"?>\n', 'The <payload> is empty: it must hold a feed with one item, an RSS item or an Atom entry.');
  refused(
    '<item><title>x</item>',
    "The payload is not well-formed XML (Expected closing tag 'title' (opened in line 1, col 16) instead of closing tag 'item'., line 1).",
  );
  refused(
    '<item><title>a</title><link>http://e.com/a</link></item><item><title>b</title><link>http://e.com/b</link></item>',
    'The payload must hold exactly one element (a feed with one item, an RSS item or an Atom entry), not 2.',
  );
  refused('just text', 'The payload must hold exactly one element (a feed with one item, an RSS item or an Atom entry), not 0.');
  refused('<item><title>a\u0000</title></item>', 'The payload contains NUL characters.');
  const deep = '<item><title>deep</title><link>http://e.com/d</link>' + '<x>'.repeat(200) + '</x>'.repeat(200) + '</item>';
  assert.throws(
    () => extractPayload(deep, SITE),
    (e: unknown) => e instanceof RssPingError && /^The payload is not well-formed XML \(/.test(e.message),
  );
});
