// What RSS Ping writes with xmlbuilder2: the rss_ping reply, and the /updates.xml items built from what was
// pinged. xmlbuilder2 leaves an `&` that starts a reference unescaped and writes forbidden characters as
// they are; these tests prove hostile text still reads back exactly (minus the removed characters).
import { test } from 'node:test';
import { spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { rssPingResponseXml } from '../../../src/intake/rss-ping/response.js';
import { updatesHead, updatesItem, UPDATES_FOOT } from '../../../src/publishing/documents/updates.js';
import { stripControls } from '../../../src/platform/xml/escape.js';
import { readRssPingReply } from './helpers.js';

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
  htmlEntities: true,
  processEntities: true,
  isArray: (name) => name === 'item' || name === 'rssping:feed',
});

const HOSTILE =
  'Tom &amp; Jerry <b>"bold"</b> \'quoted\' &bogus; &#0; &#x41; ]]> \u0000\u0001\u001b\u007f\u0085\ufffe lone \ud800 low \udc00 pair \ud83d\ude00 end';
const CLEAN = stripControls(HOSTILE);

test('the rss_ping reply: declaration, newline, one line, newline', () => {
  assert.equal(
    rssPingResponseXml(false, 'Thanks for the ping.', 'publisher_side'),
    '<?xml version="1.0" encoding="utf-8"?>\n<rss_ping_response><flerror>0</flerror><message>Thanks for the ping.</message><authentication>publisher_side</authentication></rss_ping_response>\n',
  );
  assert.equal(
    rssPingResponseXml(true, 'Refused: <no> & "why"'),
    '<?xml version="1.0" encoding="utf-8"?>\n<rss_ping_response><flerror>1</flerror><message>Refused: &lt;no&gt; &amp; &quot;why&quot;</message></rss_ping_response>\n',
  );
  assert.equal(
    rssPingResponseXml(true, ''),
    '<?xml version="1.0" encoding="utf-8"?>\n<rss_ping_response><flerror>1</flerror><message></message></rss_ping_response>\n',
  );
});

test('the rss_ping reply carries a hostile message back exactly, minus the characters XML cannot carry', () => {
  const xml = rssPingResponseXml(true, HOSTILE);
  assert.equal(XMLValidator.validate(xml), true);
  assert.equal(parser.parse(xml).rss_ping_response.message, CLEAN);
  assert.equal(readRssPingReply(200, xml).message, CLEAN);
});

test('an /updates.xml item carries hostile titles, names, URLs and types back exactly through fast-xml-parser', () => {
  const item = updatesItem({
    ping_id: 1,
    at_us: Date.UTC(2025, 0, 1) * 1000,
    site_url: `http://x.example/?a=1&amp;b=2&c="3"`,
    site_name: HOSTILE,
    feeds: [
      { uri: 'http://x.example/f?x=&amp;y', type: HOSTILE },
      { uri: 'http://x.example/g', type: null },
    ],
    auth: 'publisher_side',
    headline: HOSTILE,
    item_link: 'http://x.example/p?a=1&amp;b=2',
    item_guid: HOSTILE,
    item_uri: 'urn:x:1',
    summary: HOSTILE,
  });
  const doc = updatesHead(new Date(Date.UTC(2025, 0, 1))) + item + UPDATES_FOOT;
  assert.match(doc, /^<\?xml version="1\.0" encoding="utf-8"\?>\n<rss /);
  assert.equal(XMLValidator.validate(doc), true);
  // An independent strict parser (Python's expat) agrees that it is well-formed.
  const py = spawnSync('python3', ['-c', 'import sys, xml.etree.ElementTree as ET; print(ET.fromstring(sys.stdin.buffer.read()).tag)'], {
    input: doc,
    encoding: 'utf8',
  });
  assert.equal(py.stdout.trim(), 'rss', py.stderr);
  const channel = parser.parse(doc).rss.channel;
  assert.equal(channel.title, 'RSS Ping updates');
  const [it] = channel.item;
  assert.equal(it.title, CLEAN);
  assert.equal(it.description, CLEAN);
  assert.equal(it.link, 'http://x.example/p?a=1&amp;b=2');
  assert.equal(it.guid['#text'], CLEAN);
  assert.equal(it.source['#text'], CLEAN);
  assert.equal(it.source['@_url'], 'http://x.example/f?x=&amp;y');
  assert.equal(it['rssping:site']['#text'], CLEAN);
  assert.equal(it['rssping:site']['@_url'], 'http://x.example/?a=1&amp;b=2&c="3"');
  assert.deepEqual(
    it['rssping:feed'].map((f: Record<string, string>) => [f['@_url'], f['@_type']]),
    [
      ['http://x.example/f?x=&amp;y', CLEAN],
      ['http://x.example/g', undefined],
    ],
  );
  assert.equal(it['rssping:authentication'], 'publisher_side');
});

test('updates.xml items stay separate strings, each one <item> ending in a newline', () => {
  const row = {
    ping_id: 1,
    at_us: Date.UTC(2025, 0, 1) * 1000,
    site_url: 'http://x.example/',
    site_name: 'X',
    feeds: [],
    auth: 'none' as const,
    headline: 'H',
    item_link: null,
    item_guid: null,
    item_uri: 'urn:x:1',
    summary: null,
  };
  assert.equal(
    updatesItem(row),
    '<item>\n<title>H</title>\n<guid isPermaLink="false">urn:x:1</guid>\n<pubDate>Wed, 01 Jan 2025 00:00:00 GMT</pubDate>\n<rssping:site url="http://x.example/">X</rssping:site>\n<rssping:authentication>none</rssping:authentication>\n<rssping:origin>rss_ping</rssping:origin>\n</item>\n',
  );
  assert.ok(updatesHead(new Date(0)).endsWith('<docs>https://www.rssboard.org/rss-specification</docs>\n'));
});
