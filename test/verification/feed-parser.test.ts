// Reading a fetched body as a feed: every fixture's items (title, link, guid, date) and channel hints as
// listed in expected.json, charsets from the XML declaration, the XML redirect (including the RSS Feed
// State document's own malformed example), the WebSub hubs and rssCloud cloud a feed names, and everything
// else as not_a_feed, without hanging on hostile entity expansion.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { MAX_HUBS, parseFeed, type Parsed } from '../../src/verification/feed-parser.js';
import type { FeedHints } from '../../src/verification/feed-repository.js';

interface ExpectedItem {
  title: string | null;
  link: string | null;
  guid: string | null;
  date: string | null;
}
interface ExpectedFeed {
  format: string;
  encoding?: string;
  items: ExpectedItem[];
  channel: { ttl?: number; skipHours?: number[]; skipDays?: string[]; updatePeriod?: string; updateFrequency?: number };
}

const fixtureUrl = (name: string) => new URL(`../fixtures/feeds/${name}`, import.meta.url);
const fixture = (name: string) => readFileSync(fixtureUrl(name));
const expected = JSON.parse(readFileSync(fixtureUrl('expected.json'), 'utf8')) as Record<string, ExpectedFeed>;

/** expected.json's format names → the module's format, and the Content-Type a server would send. */
function formatOf(name: string): { format: 'rss' | 'rdf' | 'atom' | 'json'; contentType: string } {
  if (name.startsWith('rss-1.0')) return { format: 'rdf', contentType: 'application/rdf+xml' };
  if (name.startsWith('rss-')) return { format: 'rss', contentType: 'application/rss+xml' };
  if (name.startsWith('atom-')) return { format: 'atom', contentType: 'application/atom+xml' };
  if (name.startsWith('json-feed')) return { format: 'json', contentType: 'application/feed+json' };
  throw new Error(`unknown format ${name} in expected.json`);
}

function asFeed(r: Parsed): Extract<Parsed, { kind: 'feed' }> {
  assert.equal(r.kind, 'feed', JSON.stringify(r));
  return r as Extract<Parsed, { kind: 'feed' }>;
}

const rss = (channel: string) =>
  Buffer.from(
    `<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel><title>T</title><link>http://x.example/</link><description>D</description>${channel}` +
      `<item><title>One</title><link>http://x.example/1</link></item></channel></rss>`,
  );

test('expected.json lists the fixtures this file reads', () => {
  assert.ok(Object.keys(expected).length >= 10, Object.keys(expected).join(' '));
  for (const name of [
    'rss091.xml',
    'rss092.xml',
    'rss10.rdf',
    'rss20.xml',
    'atom03.xml',
    'atom10.xml',
    'latin1.xml',
    'windows1252.xml',
    'feed.json',
  ]) {
    assert.ok(name in expected, name);
  }
});

for (const [name, exp] of Object.entries(expected)) {
  test(`${name}: a ${exp.format} feed whose items' title, link, guid and date are as in expected.json`, () => {
    const { format, contentType } = formatOf(exp.format);
    const feed = asFeed(parseFeed(fixture(name), contentType));
    assert.equal(feed.format, format);
    assert.equal(feed.items.length, exp.items.length);
    feed.items.forEach((it, i) => {
      const e = exp.items[i];
      assert.deepEqual(
        { title: it.title, link: it.link, guid: it.guid },
        { title: e.title, link: e.link, guid: e.guid },
        `${name} item ${i}`,
      );
      if (e.date !== null) assert.equal(it.published?.toISOString(), e.date, `${name} item ${i} date`);
    });
  });

  test(`${name}: channel hints as in expected.json`, () => {
    const { contentType } = formatOf(exp.format);
    const feed = asFeed(parseFeed(fixture(name), contentType));
    // expected.json names its channel hints as FeedHints does; map explicitly so a rename breaks here.
    const want: FeedHints = {};
    if (exp.channel.ttl !== undefined) want.ttl = exp.channel.ttl;
    if (exp.channel.skipHours !== undefined) want.skipHours = exp.channel.skipHours;
    if (exp.channel.skipDays !== undefined) want.skipDays = exp.channel.skipDays;
    if (exp.channel.updatePeriod !== undefined) want.updatePeriod = exp.channel.updatePeriod;
    if (exp.channel.updateFrequency !== undefined) want.updateFrequency = exp.channel.updateFrequency;
    assert.deepEqual(feed.hints, want);
  });
}

test('latin1.xml (ISO-8859-1 by its declaration) decodes é, è, Ü, ñ', () => {
  const feed = asFeed(parseFeed(fixture('latin1.xml'), 'application/rss+xml'));
  assert.equal(feed.title, "Carnet de voyage d'Hélène");
  assert.equal(feed.items[0].title, 'Café crème');
  assert.equal(feed.items[1].title, 'Über uns');
  assert.equal(feed.items[2].title, 'Niño, la tortilla de Señora Núñez');
});

// Bug demonstration (see the report): bytes 0x80–0x9F of windows-1252 must decode to the WHATWG
// windows-1252 characters (0x92 → ’ U+2019, 0x80 → € U+20AC, 0x97 → — U+2014), not to C1 controls.
test('windows1252.xml decodes ’ (0x92), € (0x80) and — (0x97) as windows-1252', () => {
  const feed = asFeed(parseFeed(fixture('windows1252.xml'), 'application/rss+xml'));
  assert.equal(feed.items[0].title, 'What’s a €20 note worth in 2026?');
  assert.equal(feed.items[1].title, 'Don’t pay £4.50 for coffee');
  assert.equal(feed.items[2].title, 'Reader questions — November');
});

test("xml-redirect.xml, the RSS Feed State document's malformed example kept verbatim, is a redirect", () => {
  assert.deepEqual(parseFeed(fixture('xml-redirect.xml'), 'text/xml'), {
    kind: 'redirect',
    newLocation: 'http://feeds.feedburner.com/TheRssBlog',
  });
});

test('a well-formed <redirect><newLocation> is a redirect', () => {
  const body = Buffer.from('<?xml version="1.0"?>\n<redirect><newLocation>http://x/</newLocation></redirect>');
  assert.deepEqual(parseFeed(body), { kind: 'redirect', newLocation: 'http://x/' });
  const amp = Buffer.from('<redirect>\n  <newLocation> http://x/feed?a=1&amp;b=2 </newLocation>\n</redirect>');
  assert.deepEqual(parseFeed(amp), { kind: 'redirect', newLocation: 'http://x/feed?a=1&b=2' });
});

test('xml-redirect-gone.xml (an empty <newLocation/>) is a redirect to nowhere', () => {
  assert.deepEqual(parseFeed(fixture('xml-redirect-gone.xml'), 'text/xml'), { kind: 'redirect', newLocation: null });
});

test('not-a-feed.xml (a sitemap) is not_a_feed', () => {
  assert.equal(parseFeed(fixture('not-a-feed.xml'), 'application/xml').kind, 'not_a_feed');
});

test('an empty body, whitespace, "{" garbage and HTML pages are not_a_feed', () => {
  const bodies: [string, Buffer, string | undefined][] = [
    ['empty', Buffer.alloc(0), undefined],
    ['whitespace', Buffer.from('  \n\t '), 'text/xml'],
    ['{', Buffer.from('{'), 'application/json'],
    ['{ garbage', Buffer.from('{ this is not json'), undefined],
    ['json, not a feed', Buffer.from('{"hello": "world"}'), 'application/json'],
    ['html', Buffer.from('<!doctype html><html><head><title>x</title></head><body><p>hi</p></body></html>'), 'text/html'],
    ['homepage.html', fixture('homepage.html'), 'text/html; charset=utf-8'],
  ];
  for (const [label, body, type] of bodies) {
    const r = parseFeed(body, type);
    assert.equal(r.kind, 'not_a_feed', `${label}: ${JSON.stringify(r)}`);
    assert.equal(typeof (r as { reason?: unknown }).reason, 'string', label);
  }
});

test('a billion-laughs entity document does not hang or throw: not_a_feed, or a feed with bounded text', async () => {
  const entities = ['<!ENTITY lol0 "lol">'];
  for (let i = 1; i <= 9; i++) entities.push(`<!ENTITY lol${i} "${`&lol${i - 1};`.repeat(10)}">`);
  const doc =
    `<?xml version="1.0"?>\n<!DOCTYPE rss [\n${entities.join('\n')}\n]>\n` +
    '<rss version="2.0"><channel><title>&lol9;</title><link>http://x.example/</link><description>&lol9;</description>' +
    '<item><title>&lol9;</title><link>http://x.example/1</link><description>&lol9;</description></item></channel></rss>';

  // Parsing is synchronous, so a timer in this process could never interrupt it: parse in a child process
  // (tsx's hooks do not reach worker threads on Node 20) and kill it if it has not answered within a
  // generous 5 s of being handed the document. The timer only fails the test; it measures nothing. The
  // child's start-up (loading tsx and the parser) is outside those 5 s, under a bound of its own.
  const module = new URL('../../src/verification/feed-parser.ts', import.meta.url).href;
  const source = `
    import { parseFeed } from ${JSON.stringify(module)};
    process.stdout.write('ready\\n');
    let doc = '';
    process.stdin.setEncoding('utf8');
    for await (const chunk of process.stdin) doc += chunk;
    let out;
    try {
      const r = parseFeed(Buffer.from(doc));
      const texts = r.kind === 'feed' ? [r.title, ...r.items.flatMap((i) => [i.title, i.link, i.guid, i.summary, i.content])] : [];
      out = { kind: r.kind, items: r.kind === 'feed' ? r.items.length : 0, longest: Math.max(0, ...texts.map((t) => (t ? t.length : 0))) };
    } catch (err) {
      out = { threw: String((err && err.stack) || err) };
    }
    process.stdout.write(JSON.stringify(out) + '\\n');
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], {
    cwd: new URL('../..', import.meta.url).pathname,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const timers: NodeJS.Timeout[] = [];
  try {
    const answer = await new Promise<{ kind?: string; items?: number; longest?: number; threw?: string }>((resolve, reject) => {
      let stdout = '';
      let stderr = '';
      let sent = false;
      timers.push(setTimeout(() => reject(new Error(`the parsing process did not start within 60 s: ${stderr}`)), 60_000));
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        stdout += d;
        if (!sent && stdout.startsWith('ready\n')) {
          sent = true;
          timers.push(setTimeout(() => reject(new Error('parseFeed did not return within 5 s on a billion-laughs document')), 5000));
          child.stdin.end(doc);
        }
      });
      child.once('error', reject);
      child.once('close', (code) => {
        try {
          resolve(JSON.parse(stdout.slice('ready\n'.length)));
        } catch {
          reject(new Error(`the parsing process exited with ${code} and no answer: ${stdout} ${stderr}`));
        }
      });
    });
    assert.equal(answer.threw, undefined, answer.threw);
    assert.ok(answer.kind === 'not_a_feed' || answer.kind === 'feed', JSON.stringify(answer));
    // Fully expanded, &lol9; is 3 × 10⁹ characters; the parser cuts text fields to 4000.
    assert.ok((answer.longest ?? 0) <= 4000, JSON.stringify(answer));
  } finally {
    for (const t of timers) clearTimeout(t);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

test('feedsmith 3.0.1 drops a single <skipDays><day> and a single <skipHours><hour>: both are still read', () => {
  const feed = asFeed(parseFeed(rss('<skipDays><day>Saturday</day></skipDays><skipHours><hour>3</hour></skipHours>')));
  assert.deepEqual(feed.hints.skipDays, ['Saturday']);
  assert.deepEqual(feed.hints.skipHours, [3]);
});

test('two or more days and hours are read too, and a channel without them has no such hints', () => {
  const two = asFeed(
    parseFeed(rss('<skipDays><day>Saturday</day><day>Sunday</day></skipDays><skipHours><hour>0</hour><hour>23</hour></skipHours>')),
  );
  assert.deepEqual(two.hints.skipDays, ['Saturday', 'Sunday']);
  assert.deepEqual(two.hints.skipHours, [0, 23]);
  const none = asFeed(parseFeed(rss('')));
  assert.deepEqual(none.hints, {});
});

// Where a feed says readers subscribe (issue 39's trust.names_pingd reads them: names-pingd.ts).
const HUB = 'https://ping.example.com/websub';

test('RSS 2.0: <atom:link rel="hub"> under any prefix bound to Atom, and <cloud>, are read; other links are not hubs', () => {
  const feed = asFeed(
    parseFeed(
      Buffer.from(
        `<?xml version="1.0"?><rss version="2.0" xmlns:a10="http://www.w3.org/2005/Atom"><channel><title>T</title>` +
          `<link>http://x.example/</link><description>D</description>` +
          `<a10:link rel="self" href="http://x.example/feed.xml"/><a10:link rel="HUB" href=" ${HUB} "/>` +
          `<cloud domain="ping.example.com" port="443" path="/rsscloud/pleaseNotify" registerProcedure="" protocol="https-post"/>` +
          `<item><title>One</title></item></channel></rss>`,
      ),
    ),
  );
  assert.equal(feed.format, 'rss');
  assert.deepEqual(feed.hubs, [HUB]);
  assert.deepEqual(feed.cloud, {
    domain: 'ping.example.com',
    port: 443,
    path: '/rsscloud/pleaseNotify',
    registerProcedure: null,
    protocol: 'https-post',
  });
  const plain = asFeed(parseFeed(rss('')));
  assert.deepEqual([plain.hubs, plain.cloud], [[], null]);
});

test("rss092.xml's Radio UserLand <cloud> (XML-RPC) is read with its procedure; a cloud without a domain or path is none", () => {
  assert.deepEqual(asFeed(parseFeed(fixture('rss092.xml'))).cloud, {
    domain: 'rpc.radio.example.net',
    port: 80,
    path: '/RPC2',
    registerProcedure: 'xmlStorageSystem.rssPleaseNotify',
    protocol: 'xml-rpc',
  });
  assert.equal(asFeed(parseFeed(rss('<cloud domain="" port="80" path="/RPC2" protocol="xml-rpc"/>'))).cloud, null);
  assert.equal(asFeed(parseFeed(rss('<cloud domain="c.example" port="80" protocol="xml-rpc"/>'))).cloud, null);
  assert.equal(asFeed(parseFeed(rss('<cloud domain="c.example" port="eighty" path="/RPC2"/>'))).cloud?.port, null);
});

test('RSS 1.0 (RDF) names its hub with <atom:link rel="hub"> too', () => {
  const feed = asFeed(
    parseFeed(
      Buffer.from(
        `<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"` +
          ` xmlns:atom="http://www.w3.org/2005/Atom"><channel rdf:about="http://x.example/"><title>T</title><link>http://x.example/</link>` +
          `<description>D</description><atom:link rel="hub" href="${HUB}"/></channel>` +
          `<item rdf:about="http://x.example/1"><title>One</title><link>http://x.example/1</link></item></rdf:RDF>`,
      ),
    ),
  );
  assert.deepEqual([feed.format, feed.hubs, feed.cloud], ['rdf', [HUB], null]);
});

test('Atom: <link rel="hub"> (or IANA\'s IRI for it) is a hub; self and alternate are not', () => {
  const atom = (links: string) =>
    asFeed(
      parseFeed(
        Buffer.from(
          `<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>T</title><id>urn:x</id>` +
            `<updated>2026-11-20T00:00:00Z</updated>${links}<entry><id>urn:1</id><title>One</title>` +
            `<updated>2026-11-20T00:00:00Z</updated></entry></feed>`,
        ),
      ),
    );
  const feed = atom(
    `<link rel="alternate" href="http://x.example/"/><link rel="self" href="http://x.example/feed.atom"/>` +
      `<link rel="hub" href="${HUB}"/><link rel="http://www.iana.org/assignments/relation/hub" href="https://other.example/hub"/>`,
  );
  assert.deepEqual([feed.format, feed.hubs, feed.cloud], ['atom', [HUB, 'https://other.example/hub'], null]);
  assert.equal(feed.siteUrl, 'http://x.example/');
  const many = atom(Array.from({ length: 50 }, (_, i) => `<link rel="hub" href="https://h${i}.example/"/>`).join(''));
  assert.equal(many.hubs.length, MAX_HUBS, 'at most MAX_HUBS are kept');
});

test('JSON Feed: hubs[] of type WebSub are hubs, one of type rssCloud is the cloud (its URL in parts)', () => {
  const feed = asFeed(
    parseFeed(
      Buffer.from(
        JSON.stringify({
          version: 'https://jsonfeed.org/version/1.1',
          title: 'T',
          hubs: [
            { type: 'WebSub', url: HUB },
            { type: 'rssCloud', url: 'https://ping.example.com/rsscloud/pleaseNotify' },
            { type: 'carrier-pigeon', url: 'https://pigeons.example/' },
          ],
          items: [{ id: '1', content_text: 'One' }],
        }),
      ),
      'application/feed+json',
    ),
  );
  assert.deepEqual(feed.hubs, [HUB]);
  assert.deepEqual(feed.cloud, {
    domain: 'ping.example.com',
    port: 443,
    path: '/rsscloud/pleaseNotify',
    registerProcedure: null,
    protocol: 'https-post',
  });
});
