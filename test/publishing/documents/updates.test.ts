// /updates.xml (the payloads of the last hour as RSS 2.0) and the rss_ping weblogs in changes.xml,
// shortChanges.xml and the hour's archive, rendered by the publishing layer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import zlib from 'node:zlib';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { startApp, type TestApp } from '../../helpers/app.js';
import { archivePath, hourStart } from '../../../src/publishing/documents/archive.js';
import { addPublisher } from '../../../src/intake/rss-ping/publisher-repository.js';
import { deriveKey, sealPassword } from '../../../src/intake/rss-ping/secret-box.js';
import { foundItem, mergeNewestFirst, updatesItem } from '../../../src/publishing/documents/updates.js';
import { readRssPingReply, rssPing, seed } from '../../intake/rss-ping/helpers.js';

const SECRET = 'k'.repeat(40);
let t: TestApp;
let hashes: http.Server;
let hashPort = 0;
const served = new Map<string, string>();

interface Item {
  title: string | null;
  link: string | null;
  guid: string | null;
  permalink: string | null;
  description: string | null;
  source: string | null;
  sourceUrl: string | null;
  site: string | null;
  siteUrl: string | null;
  feeds: { url: string; type: string | null }[];
  auth: string | null;
  pubDate: string | null;
}

/** Parses RSS with Python's ElementTree (a strict, independent XML parser): the items, in order. */
function parseRss(xml: Buffer): { channel: Record<string, string>; items: Item[] } {
  const py = `
import sys, json, xml.etree.ElementTree as ET
NS = '{urn:pingd:rss-ping}'
root = ET.fromstring(sys.stdin.buffer.read())
assert root.tag == 'rss' and root.get('version') == '2.0', root.tag
ch = root.find('channel')
t = lambda e, n: (e.find(n).text if e.find(n) is not None else None)
out = {'channel': {c.tag: c.text for c in ch if c.tag != 'item'}, 'items': []}
for it in ch.findall('item'):
    g = it.find('guid'); s = it.find('source'); site = it.find(NS + 'site')
    out['items'].append({'title': t(it, 'title'), 'link': t(it, 'link'), 'guid': g.text if g is not None else None,
      'permalink': g.get('isPermaLink') if g is not None else None, 'description': t(it, 'description'),
      'source': s.text if s is not None else None, 'sourceUrl': s.get('url') if s is not None else None,
      'site': site.text if site is not None else None, 'siteUrl': site.get('url') if site is not None else None,
      'feeds': [{'url': f.get('url'), 'type': f.get('type')} for f in it.findall(NS + 'feed')],
      'auth': t(it, NS + 'authentication'), 'pubDate': t(it, 'pubDate')})
print(json.dumps(out))`;
  const r = spawnSync('python3', ['-c', py], { input: xml, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`not well-formed RSS: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function post(body: string | Buffer, path = '/rssping') {
  const res = await t.app.inject({ method: 'POST', url: path, headers: { 'content-type': 'text/xml' }, payload: body });
  return readRssPingReply(res.statusCode, res.body);
}

async function get(url: string, headers: Record<string, string> = {}) {
  const res = await t.app.inject({ method: 'GET', url, headers });
  return { status: res.statusCode, headers: res.headers, raw: res.rawPayload };
}

before(async () => {
  hashes = http.createServer((req, res) => {
    const h = served.get(req.url!);
    res.writeHead(h ? 200 : 404).end(h ?? '');
  });
  await new Promise<void>((r) => hashes.listen(0, '127.0.0.1', r));
  hashPort = (hashes.address() as AddressInfo).port;
  t = await startApp({
    RENDER_SCHEDULER: false,
    PUBLISH_POINTER_TTL_MS: 0,
    PING_MIN_INTERVAL: 0,
    FETCH_ALLOW_PRIVATE: true,
    RSSPING_SECRET: SECRET,
  });
});

after(async () => {
  await t?.close();
  hashes.closeAllConnections();
  await new Promise((r) => hashes.close(r));
});

test('updates.xml lists the payload items of the last hour, newest first, with source, site, feeds and authentication', async () => {
  // 1. A seed example without its hash URI (no request to the real photomatt.net from a test): unauthenticated.
  const seed1 = seed('seed-1-rss2-feed')
    .toString('utf8')
    .replace(/<payload_hash_uri>.*<\/payload_hash_uri>\n/, '');
  assert.equal((await post(seed1)).authentication, 'none');
  // 2. Pingserver-side authenticated.
  const site2 = `http://127.0.0.1:${hashPort}/two/`;
  const payload2 =
    '<entry xmlns="http://www.w3.org/2005/Atom"><title>Hashed &amp; signed</title><link href="http://127.0.0.1/two/post"/><id>tag:two,2025:1</id><summary>Sum &lt;b&gt;mary&lt;/b&gt;</summary></entry>';
  served.set('/two/hash', createHash('sha1').update(payload2).digest('hex'));
  const r2 = await post(
    rssPing({
      siteUri: site2,
      siteName: 'Two',
      hashUri: `http://127.0.0.1:${hashPort}/two/hash`,
      payload: payload2,
      feeds: [`http://127.0.0.1:${hashPort}/two/atom.xml`],
    }).replace('type="RSS 2.0"', 'type="atom 1.0"'),
  );
  assert.equal(r2.authentication, 'pingserver_side', r2.message);
  // 3. Publisher-side authenticated, with hostile text that must come out escaped and well-formed.
  const site3 = 'https://three.example.com/';
  await addPublisher(t.app.db, site3, sealPassword(deriveKey(SECRET), site3, 'three-password-123'));
  const tok = (await t.app.inject({ method: 'GET', url: `/rssping/token?site_uri=${encodeURIComponent(site3)}` })).body;
  const endpoint = createHash('sha1')
    .update(site3 + 'three-password-123' + tok)
    .digest('hex');
  const hostile =
    '<item><title>&lt;script&gt;alert(1)&lt;/script&gt; ]]&gt; &amp;amp; \u0001ctl</title><link>https://three.example.com/p?a=1&amp;b=2</link><guid isPermaLink="false">urn:three:1</guid></item>';
  const r3 = await post(rssPing({ siteUri: site3, siteName: 'Three "&amp;" &lt;co&gt;', payload: hostile }), `/rssping/${endpoint}`);
  assert.equal(r3.authentication, 'publisher_side', r3.message);

  await t.app.renderer.tick({});
  const res = await get('/updates.xml');
  assert.equal(res.status, 200);
  assert.equal(res.headers['content-type'], 'application/rss+xml; charset=utf-8');
  const doc = parseRss(res.raw);
  assert.equal(doc.channel.title, 'RSS Ping updates');
  // The site's home page (RSS 2.0: "the URL to the HTML website corresponding to the channel"), absolute:
  // http://localhost:PORT/ without PUBLIC_URL. docs/reference/documents.md said the feed's own path.
  assert.equal(doc.channel.link, `http://localhost:${t.config.PORT}/`);
  assert.deepEqual(
    doc.items.map((i) => [i.title, i.auth]),
    [
      ['<script>alert(1)</script> ]]> & ctl', 'publisher_side'],
      ['Hashed & signed', 'pingserver_side'],
      ['Movable Type 3.2', 'none'],
    ],
  );
  const [three, two, one] = doc.items;
  assert.deepEqual(three, {
    title: '<script>alert(1)</script> ]]> & ctl',
    link: 'https://three.example.com/p?a=1&b=2',
    guid: 'urn:three:1',
    permalink: 'false',
    description: null,
    source: 'Three "&" <co>',
    sourceUrl: 'https://three.example.com/feed.xml',
    site: 'Three "&" <co>',
    siteUrl: site3,
    feeds: [{ url: 'https://three.example.com/feed.xml', type: 'RSS 2.0' }],
    auth: 'publisher_side',
    pubDate: three.pubDate,
  });
  assert.ok(Math.abs(Date.parse(three.pubDate!) - Date.now()) < 3600_000, 'pubDate is the time received');
  assert.deepEqual(
    [two.link, two.guid, two.permalink, two.description, two.feeds],
    [
      'http://127.0.0.1/two/post',
      'tag:two,2025:1',
      'false',
      'Sum <b>mary</b>',
      [{ url: `http://127.0.0.1:${hashPort}/two/atom.xml`, type: 'Atom 1.0' }],
    ],
  );
  assert.deepEqual(
    [one.link, one.guid, one.permalink, one.sourceUrl, one.siteUrl],
    [
      'http://photomatt.net/2005/07/14/movable-type-32/',
      'http://photomatt.net/2005/07/14/movable-type-32/',
      'true',
      'http://photomatt.net/index.xml',
      'http://photomatt.net/',
    ],
  );
});

test('the rss_ping weblogs appear in changes.xml, shortChanges.xml and the hour archive like any other ping', async () => {
  for (const path of ['/changes.xml', '/shortChanges.xml', archivePath(hourStart(Date.now()))]) {
    const res = await get(path);
    assert.equal(res.status, 200, path);
    const body = res.raw.toString('utf8');
    assert.match(
      body,
      /<weblog name="Photo Matt" url="http:\/\/photomatt\.net\/" rssUrl="http:\/\/photomatt\.net\/index\.xml" when="\d+"\/>/,
      path,
    );
    assert.match(
      body,
      /<weblog name="Three &quot;&amp;&quot; &lt;co&gt;" url="https:\/\/three\.example\.com\/" rssUrl="https:\/\/three\.example\.com\/feed\.xml" when="\d+"\/>/,
      path,
    );
  }
});

test('updates.xml has the same validators, codings and RFC 3229 feed deltas as changes.xml', async () => {
  const full = await get('/updates.xml');
  const etag = String(full.headers.etag);
  assert.equal((await get('/updates.xml', { 'if-none-match': etag })).status, 304);
  const gz = await get('/updates.xml', { 'accept-encoding': 'gzip' });
  assert.equal(gz.headers['content-encoding'], 'gzip');
  assert.deepEqual(zlib.gunzipSync(gz.raw), full.raw);

  assert.equal(
    (
      await post(
        rssPing({
          siteUri: 'http://four.example.com/',
          siteName: 'Four',
          payload: '<item><title>Newest</title><link>http://four.example.com/n</link></item>',
        }),
      )
    ).status,
    200,
  );
  await t.app.renderer.tick({});
  const delta = await get('/updates.xml', { 'a-im': 'feed', 'if-none-match': etag });
  assert.equal(delta.status, 226);
  assert.equal(delta.headers.im, 'feed');
  assert.equal(delta.headers['cache-control'], 'no-store, im');
  assert.deepEqual(
    parseRss(delta.raw).items.map((i) => i.title),
    ['Newest'],
    'only what is new since the client’s copy',
  );
  assert.equal(parseRss((await get('/updates.xml')).raw).items.length, 4);
});

test('items older than an hour leave updates.xml', async () => {
  await t.app.db.query(
    "update rssping_payloads set received_at = received_at - interval '2 hours' where site_url = 'http://photomatt.net/'",
  );
  await t.app.renderer.tick({});
  const titles = parseRss((await get('/updates.xml')).raw).items.map((i) => i.title);
  assert.deepEqual(titles, ['Newest', '<script>alert(1)</script> ]]> & ctl', 'Hashed & signed']);
});

test('updatesItem escapes everything it writes', () => {
  const xml = updatesItem({
    ping_id: 1,
    at_us: Date.UTC(2025, 0, 1) * 1000,
    site_url: 'http://x.example/?a=1&b=<2>',
    site_name: 'a\u0000b & "c"',
    feeds: [{ uri: 'http://x.example/f?x="y"', type: 'RSS <2>' }],
    auth: 'none',
    headline: '</title><evil/>',
    item_link: null,
    item_guid: 'urn:x:<1>',
    item_uri: 'urn:x:<1>',
    summary: ']]>',
  });
  assert.equal(
    xml,
    '<item>\n<title>&lt;/title&gt;&lt;evil/&gt;</title>\n<description>]]&gt;</description>\n<guid isPermaLink="false">urn:x:&lt;1&gt;</guid>\n<pubDate>Wed, 01 Jan 2025 00:00:00 GMT</pubDate>\n' +
      '<source url="http://x.example/f?x=&quot;y&quot;">ab &amp; &quot;c&quot;</source>\n<rssping:site url="http://x.example/?a=1&amp;b=&lt;2&gt;">ab &amp; &quot;c&quot;</rssping:site>\n' +
      '<rssping:feed url="http://x.example/f?x=&quot;y&quot;" type="RSS &lt;2&gt;"/>\n<rssping:authentication>none</rssping:authentication>\n<rssping:origin>rss_ping</rssping:origin>\n</item>\n',
  );
});

test('foundItem escapes everything it writes and says the item was found by fetching', () => {
  const xml = foundItem({
    id: 1,
    at_us: Date.UTC(2025, 0, 1) * 1000,
    weblog_url: 'http://x.example/?a=1&b=<2>',
    weblog_name: 'a & "b"',
    feed_url: 'http://x.example/f?x="y"',
    title: '</title><evil/>',
    link: 'http://x.example/p?a=1&b=2',
    guid: null,
    published_us: Date.UTC(2024, 11, 31) * 1000,
    summary: ']]>',
  });
  assert.equal(
    xml,
    '<item>\n<title>&lt;/title&gt;&lt;evil/&gt;</title>\n<link>http://x.example/p?a=1&amp;b=2</link>\n<description>]]&gt;</description>\n' +
      '<guid isPermaLink="true">http://x.example/p?a=1&amp;b=2</guid>\n<pubDate>Tue, 31 Dec 2024 00:00:00 GMT</pubDate>\n' +
      '<source url="http://x.example/f?x=&quot;y&quot;">a &amp; &quot;b&quot;</source>\n<rssping:site url="http://x.example/?a=1&amp;b=&lt;2&gt;">a &amp; &quot;b&quot;</rssping:site>\n' +
      '<rssping:feed url="http://x.example/f?x=&quot;y&quot;"/>\n<rssping:origin>fetched</rssping:origin>\n</item>\n',
  );
});

test('mergeNewestFirst interleaves two newest-first streams by time, across page boundaries', async () => {
  async function* src(times: number[][]) {
    for (const page of times) yield page.map((atUs) => ({ xml: String(atUs), atUs }));
  }
  const out: number[] = [];
  let pages = 0;
  for await (const page of mergeNewestFirst(src([[9, 7], [5], [1]]), src([[8], [6, 2]]), 3)) {
    pages++;
    for (const e of page) out.push(e.atUs);
  }
  assert.deepEqual(out, [9, 8, 7, 6, 5, 2, 1]);
  assert.equal(pages, 3);
});
