// The open hub (W3C WebSub for any feed), through a loopback subscriber of our own that checks what
// websub.rocks checks of a hub (tests 100–106: a typical subscription, one with a secret, extra parameters,
// a re-subscription, an unsubscribe, plain-text and JSON topics' Content-Type): a subscription to any feed
// is verified (§5.3), then the topic is fetched once (a feed is subscribed, anything else denied, §5.2); a
// publish (or a ping) that makes verification find new entries POSTs each subscriber the feed with only
// those entries, with the topic's Content-Type and Link header, unsigned without a secret and `sha256=`
// with one (§7, §8); extra parameters are ignored; a re-subscription updates instead of adding; an
// unsubscribe stops deliveries.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { XMLValidator } from 'fast-xml-parser';
import type { TestApp } from '../../helpers/app.js';
import { startFeedServer, type FeedServer } from '../../helpers/feed-server.js';
import { hubApp, metric, PUBLIC, queued, startSubscriber, subscribe, subscriptionsApi, waitForHub, type Subscriber } from './helpers.js';

let t: TestApp;
let sub: Subscriber;
let blog: FeedServer;
let topic: string;
const RSS_TYPE = 'application/rss+xml; charset=utf-8';
let items: string[] = [];

/** The blog's feed: its items newest first, with a namespace and CDATA as real feeds have. */
const feed = () =>
  `<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/" xmlns:atom="http://www.w3.org/2005/Atom">` +
  `<channel><title>Odd &amp; Ends</title><link>${blog.origin}/</link><description>d</description>` +
  `<atom:link rel="hub" href="${PUBLIC}/websub"/><atom:link rel="self" href="${topic}"/>` +
  items
    .map(
      (n) =>
        `<item><title>Post ${n} &lt;b&gt;</title><link>${blog.origin}/p/${n}</link><guid>${blog.origin}/p/${n}</guid>` +
        `<content:encoded><![CDATA[<p>Body ${n} & more]]></content:encoded></item>`,
    )
    .join('') +
  `</channel></rss>`;

before(async () => {
  t = await hubApp({ VERIFY_PINGS: 'mark', PING_MIN_INTERVAL: 0, VERIFY_FEED_INTERVAL: 0 });
  Object.assign(t.app.websub.timing, { retryBaseMs: 20, retryMaxMs: 100 });
  sub = await startSubscriber('127.0.0.33');
  blog = await startFeedServer('127.0.0.51');
  topic = `${blog.origin}/feed.xml`;
  items = ['2', '1'];
  blog.route('/feed.xml', (_req, res) => {
    res.writeHead(200, { 'content-type': RSS_TYPE });
    res.end(feed());
  });
  blog.route('/page.html', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>not a feed</title><p>hello</p>');
  });
  blog.route('/gone.xml', (_req, res) => {
    res.writeHead(410);
    res.end();
  });
});
after(async () => {
  await t.close();
  await sub.close();
  await blog.close();
});

async function settled(): Promise<void> {
  await waitForHub(t, async () => (await queued(t)) === 0, 'the hub has nothing left to do');
}

/** A publish as WordPress sends it; then the verification of the topic runs. */
async function publishTopic(): Promise<void> {
  const r = await t.app.inject({
    method: 'POST',
    url: '/websub',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: `hub.mode=publish&hub.url=${topic}`,
  });
  assert.equal(r.statusCode, 204, r.body);
}

async function ourSubs(path: string) {
  return (await subscriptionsApi(t)).filter((s) => s.callback === `${sub.origin}${path}`);
}

test('subscribing to any feed: intent verified first, then the topic fetched once, then stored; extra parameters ignored (websub.rocks 102)', async () => {
  const before = blog.hits('/feed.xml').length;
  const r = await subscribe(t, {
    'hub.callback': `${sub.origin}/a`,
    'hub.mode': 'subscribe',
    'hub.topic': topic,
    'hub.extra': 'x',
    foo: 'bar',
  });
  assert.equal(r.status, 202);
  await waitForHub(t, async () => (await ourSubs('/a')).length === 1, 'the subscription stored');
  const gets = sub.getsTo('/a');
  assert.equal(gets.length, 1);
  assert.equal(gets[0].query.get('hub.mode'), 'subscribe');
  assert.equal(gets[0].query.get('hub.topic'), topic);
  assert.equal(blog.hits('/feed.xml').length, before + 1, 'the topic was fetched once, after the intent was confirmed');
  await settled();
  assert.equal(sub.postsTo('/a').length, 0, 'nothing is delivered for what the feed held before');
  assert.equal(await metric(t, 'pingd_websub_topic_checks_total{outcome="verified",why="subscribe"}'), 1);
});

test("a publish with a new entry: each subscriber gets one POST of the feed with only that entry, the topic's Content-Type and Link, unsigned without a secret (websub.rocks 100)", async () => {
  items = ['3', ...items];
  await publishTopic();
  await waitForHub(t, () => sub.postsTo('/a').length === 1, 'the delivery');
  const p = sub.postsTo('/a')[0];
  assert.equal(p.headers['content-type'], RSS_TYPE);
  assert.equal(p.headers.link, `<${PUBLIC}/websub>; rel="hub", <${topic}>; rel="self"`);
  assert.equal(p.headers['x-hub-signature'], undefined);
  const body = p.body.toString('utf8');
  assert.equal(XMLValidator.validate(body), true, 'well-formed');
  assert.equal(
    body,
    '<?xml version="1.0" encoding="utf-8"?>\n' +
      `<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/" xmlns:atom="http://www.w3.org/2005/Atom">` +
      `<channel><title>Odd &amp; Ends</title><link>${blog.origin}/</link><description>d</description>` +
      `<atom:link rel="hub" href="${PUBLIC}/websub"/><atom:link rel="self" href="${topic}"/>` +
      `<item><title>Post 3 &lt;b&gt;</title><link>${blog.origin}/p/3</link><guid>${blog.origin}/p/3</guid>` +
      `<content:encoded><![CDATA[<p>Body 3 & more]]></content:encoded></item></channel></rss>`,
  );
  await settled();
  assert.equal(sub.postsTo('/a').length, 1, 'one POST per change');
});

test('with a secret: X-Hub-Signature sha256 of the body (websub.rocks 101); a re-subscription updates instead of adding (103)', async () => {
  assert.equal(
    (await subscribe(t, { 'hub.callback': `${sub.origin}/a`, 'hub.mode': 'subscribe', 'hub.topic': topic, 'hub.secret': 'first' })).status,
    202,
  );
  await settled();
  assert.equal(
    (await subscribe(t, { 'hub.callback': `${sub.origin}/a`, 'hub.mode': 'subscribe', 'hub.topic': topic, 'hub.secret': 'second' })).status,
    202,
  );
  await settled();
  assert.equal((await ourSubs('/a')).length, 1, 'still one subscription');
  items = ['4', ...items];
  await publishTopic();
  await waitForHub(t, () => sub.postsTo('/a').length === 2, 'the delivery');
  const p = sub.postsTo('/a')[1];
  assert.equal(p.headers['x-hub-signature'], `sha256=${createHmac('sha256', 'second').update(p.body).digest('hex')}`);
  assert.match(p.body.toString('utf8'), /<title>Post 4 &lt;b&gt;<\/title>/);
  assert.doesNotMatch(p.body.toString('utf8'), /Post 3/);
});

test('an unsubscribe stops deliveries (websub.rocks 104): the next change reaches the other subscriber only', async () => {
  assert.equal((await subscribe(t, { 'hub.callback': `${sub.origin}/b`, 'hub.mode': 'subscribe', 'hub.topic': topic })).status, 202);
  await waitForHub(t, async () => (await ourSubs('/b')).length === 1, 'the second subscription');
  assert.equal((await subscribe(t, { 'hub.callback': `${sub.origin}/a`, 'hub.mode': 'unsubscribe', 'hub.topic': topic })).status, 202);
  await waitForHub(t, async () => (await ourSubs('/a')).length === 0, 'the unsubscription');
  items = ['5', ...items];
  await publishTopic();
  // The barrier: the subscriber still subscribed has its delivery; the queue is empty.
  await waitForHub(t, () => sub.postsTo('/b').length === 1, 'the delivery to /b');
  await settled();
  assert.equal(sub.postsTo('/a').length, 2, 'nothing more for the unsubscribed callback');
  assert.match(sub.postsTo('/b')[0].body.toString('utf8'), /Post 5/);
});

for (const [what, path, reason] of [
  ['not a feed', '/page.html', 'the topic is not a feed this hub can read (RSS, Atom or JSON Feed)'],
  ['gone', '/gone.xml', 'the topic is gone (410)'],
  ['not found (404)', '/missing.xml', 'the topic is not a feed this hub can read (RSS, Atom or JSON Feed)'],
] as const) {
  test(`a topic that is ${what}: verified, fetched once, then denied with "${reason}"; nothing stored`, async () => {
    const cb = `/denied-${path.slice(1).replace(/\W/g, '')}`;
    sub.onGet(cb, (q) => ({ status: 200, body: q.get('hub.challenge') ?? 'ok' }));
    assert.equal(
      (await subscribe(t, { 'hub.callback': `${sub.origin}${cb}`, 'hub.mode': 'subscribe', 'hub.topic': `${blog.origin}${path}` })).status,
      202,
    );
    await settled();
    const gets = sub.getsTo(cb);
    assert.equal(gets.length, 2);
    assert.equal(gets[0].query.get('hub.mode'), 'subscribe');
    assert.deepEqual(
      [...gets[1].query.entries()],
      [
        ['hub.mode', 'denied'],
        ['hub.topic', `${blog.origin}${path}`],
        ['hub.reason', reason],
      ],
    );
    assert.equal((await ourSubs(cb)).length, 0);
  });
}

test('/weblog shows how many subscribe to the feed and how the latest deliveries went, never who; /status the deliveries per minute and the queue', async () => {
  const page = await t.app.inject({ method: 'GET', url: `/weblog?url=${encodeURIComponent(`${blog.origin}/`)}` });
  assert.equal(page.statusCode, 200);
  const m = /<dd id="websub-subscribers">([^]*?)<\/dd>/.exec(page.body);
  assert.ok(m, 'the subscribers line');
  assert.match(m[1], /^1 · latest deliveries: <span class="ok">delivered \(HTTP 204\)<\/span> at <time/);
  assert.ok(!page.body.includes(sub.origin), 'no callback');
  const stats = await t.app.inject({ method: 'GET', url: '/api/stats?window=1h' });
  const q = stats.json().health.queues.find((x: { name: string }) => x.name === 'websub');
  assert.equal(q.depth, 0);
  // Three deliveries in this file (two to /a, one to /b), within about a minute.
  assert.ok(q.perMinute >= 1 && q.perMinute <= 3, `deliveries in the last minute: ${q.perMinute}`);
  const status = await t.app.inject({ method: 'GET', url: '/status' });
  assert.match(status.body, /WebSub: <span id="websub-per-minute">\d+<\/span> deliveries/);
});

test("a publish naming two feeds of one weblog (WordPress's RSS and Atom): one ping, and the second feed's subscribers get its change too", async () => {
  blog.route('/atom.xml', (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/atom+xml' });
    res.end(
      `<feed xmlns="http://www.w3.org/2005/Atom"><title>A</title><id>urn:a</id><link href="${blog.origin}/"/>${items
        .map((n) => `<entry><id>urn:a:${n}</id><title>Post ${n}</title></entry>`)
        .join('')}</feed>`,
    );
  });
  const atom = `${blog.origin}/atom.xml`;
  assert.equal((await subscribe(t, { 'hub.callback': `${sub.origin}/atom`, 'hub.mode': 'subscribe', 'hub.topic': atom })).status, 202);
  await waitForHub(t, async () => (await ourSubs('/atom')).length === 1, 'the Atom subscription');
  items = ['6', ...items];
  const r = await t.app.inject({
    method: 'POST',
    url: '/websub',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: `hub.mode=publish&hub.url=${topic}&hub.url=${atom}`,
  });
  assert.equal(r.statusCode, 204);
  await waitForHub(t, () => sub.postsTo('/atom').length === 1 && sub.postsTo('/b').length === 2, 'both feeds delivered');
  const body = sub.postsTo('/atom')[0].body.toString('utf8');
  assert.equal(sub.postsTo('/atom')[0].headers['content-type'], 'application/atom+xml');
  assert.match(body, /<entry><id>urn:a:6<\/id><title>Post 6<\/title><\/entry><\/feed>$/);
  assert.equal((body.match(/<entry>/g) ?? []).length, 1);
});

// What broke: WordPress's WebSub plugin (4.0.0, Publisher::get_feed_urls_by_post_id) publishes, for each
// feed type (rss2, atom), the blog's feed, each tag's and category's feed and the author's: a post with 8
// tags and 1 category sends 22 `hub.url`, rawurlencoded, and pingd answered 400 "at most 20 topics may be
// published at once": no ping stored, nothing delivered, and the plugin does not retry.
test("WordPress's publish of a post with 8 tags and 1 category (22 URLs, its exact bytes): one ping, and a tag feed's subscriber gets the new entry", async () => {
  const tags = ['travel', 'food', 'lisbon', 'porto', 'wine', 'trains', 'photos', 'notes'];
  const tagFeed = (slug: string, type: string) => `${blog.origin}/tag/${slug}/feed/${type === 'atom' ? 'atom/' : ''}`;
  const wordpressFeeds: string[] = [];
  for (const type of ['rss2', 'atom']) {
    wordpressFeeds.push(`${blog.origin}/feed/${type === 'atom' ? 'atom/' : ''}`);
    for (const slug of tags) wordpressFeeds.push(tagFeed(slug, type));
    wordpressFeeds.push(`${blog.origin}/category/journeys/feed/${type === 'atom' ? 'atom/' : ''}`);
    wordpressFeeds.push(`${blog.origin}/author/ana/feed/${type === 'atom' ? 'atom/' : ''}`);
  }
  assert.equal(wordpressFeeds.length, 22);
  for (const path of ['/feed/', '/tag/lisbon/feed/']) {
    blog.route(path, (_req, res) => {
      res.writeHead(200, { 'content-type': RSS_TYPE });
      res.end(feed());
    });
  }
  const lisbon = tagFeed('lisbon', 'rss2');
  assert.equal((await subscribe(t, { 'hub.callback': `${sub.origin}/lisbon`, 'hub.mode': 'subscribe', 'hub.topic': lisbon })).status, 202);
  await waitForHub(t, async () => (await ourSubs('/lisbon')).length === 1, 'the tag feed subscription');
  items = ['wp', ...items];
  const [before] = await t.app.db.query<{ n: number }>("select count(*)::int as n from pings where method = 'websub'");
  // PHP's rawurlencode: RFC 3986 unreserved characters kept, everything else %XX (encodeURIComponent
  // differs only in !'()*, which these URLs do not hold).
  const body = `hub.mode=publish${wordpressFeeds.map((u) => `&hub.url=${encodeURIComponent(u)}`).join('')}`;
  const r = await t.app.inject({
    method: 'POST',
    url: '/websub',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'user-agent': `WordPress/6.8.1; ${blog.origin}; PubSubHubbub/WebSub`,
    },
    payload: body,
  });
  assert.equal(r.statusCode, 204, r.body);
  const [afterCount] = await t.app.db.query<{ n: number }>("select count(*)::int as n from pings where method = 'websub'");
  assert.equal(afterCount.n - before.n, 1, 'the 22 topics of one weblog are one ping');
  await waitForHub(t, () => sub.postsTo('/lisbon').length === 1, 'the tag feed delivered');
  const delivered = sub.postsTo('/lisbon')[0].body.toString('utf8');
  assert.match(delivered, /<title>Post wp &lt;b&gt;<\/title>/);
  assert.equal((delivered.match(/<item>/g) ?? []).length, 1);
});

test("a JSON Feed topic: the delivery is JSON holding only the new item, with the topic's own Content-Type (websub.rocks 106)", async () => {
  let ids = ['j1'];
  blog.route('/feed.json', (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/feed+json' });
    res.end(
      JSON.stringify({
        version: 'https://jsonfeed.org/version/1.1',
        title: 'J',
        items: ids.map((id) => ({ id, content_text: `text ${id}` })),
      }),
    );
  });
  const json = `${blog.origin}/feed.json`;
  assert.equal((await subscribe(t, { 'hub.callback': `${sub.origin}/json`, 'hub.mode': 'subscribe', 'hub.topic': json })).status, 202);
  await waitForHub(t, async () => (await ourSubs('/json')).length === 1, 'the JSON subscription');
  ids = ['j2', ...ids];
  const r = await t.app.inject({
    method: 'POST',
    url: '/websub',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: `hub.mode=publish&hub.topic=${encodeURIComponent(json)}`,
  });
  assert.equal(r.statusCode, 204);
  await waitForHub(t, () => sub.postsTo('/json').length === 1, 'the JSON delivery');
  const p = sub.postsTo('/json')[0];
  assert.equal(p.headers['content-type'], 'application/feed+json');
  assert.deepEqual(JSON.parse(p.body.toString('utf8')), {
    version: 'https://jsonfeed.org/version/1.1',
    title: 'J',
    items: [{ id: 'j2', content_text: 'text j2' }],
  });
});
