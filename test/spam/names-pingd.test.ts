// The last trust signal end to end (issue 39, trust.names_pingd): splog-looking weblogs whose feeds, served
// from a loopback host, name this pingd (PUBLIC_URL) as their WebSub hub or rssCloud cloud are verified,
// rescored, and listed under SPAM_FILTER=hold, with the reason in words on "did my ping arrive?"; the same
// feed naming another hub stays held without it; and a feed that stops naming pingd is held again at its
// next ping's rescoring.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, type TestApp } from '../helpers/app.js';
import { startFeedServer, type FeedServer } from '../helpers/feed-server.js';
import { ping, settled } from '../verification/helpers.js';
import { waitFor } from '../helpers/wait.js';

const PUBLIC = 'https://ping.example.com';
const REASON = 'its feed names this server as its hub or cloud';

let t: TestApp;
let s: FeedServer;
before(async () => {
  s = await startFeedServer('127.0.0.2');
  t = await startApp({
    PUBLIC_URL: PUBLIC,
    SPAM_FILTER: 'hold',
    SPAM_RESCORE_INTERVAL: 0,
    VERIFY_PINGS: 'mark',
    FETCH_ALLOW_PRIVATE: true,
    FETCH_HOST_INTERVAL_MS: 0,
    VERIFY_FEED_INTERVAL: 0,
    PING_MIN_INTERVAL: 0,
    RENDER_SCHEDULER: false,
    PUBLISH_POINTER_TTL_MS: 0,
  });
  await t.app.ready();
});
after(async () => {
  await t?.close();
  await s?.close();
});

/** An RSS 2.0 feed of `site` with one post per entry of `posts`, `channel` added to its channel. */
function feed(site: string, channel: string, posts = 1): string {
  const items = Array.from(
    { length: posts },
    (_, i) => `<item><title>Post ${i + 1}</title><link>${site}post-${i + 1}</link><guid>${site}post-${i + 1}</guid></item>`,
  );
  return (
    `<?xml version="1.0"?><rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>Quotes</title>` +
    `<link>${site}</link><description>D</description>${channel}${items.reverse().join('')}</channel></rss>`
  );
}

/** Serves what `body()` says now at `path` on the feed server; returns the feed's URL. */
function serve(path: string, body: () => string): string {
  s.route(path, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/rss+xml' });
    res.end(body());
  });
  return `${s.origin}${path}`;
}

/** Pings with the feed, waits for the verification's outcome and its stream position, then rescores. */
async function pingAndRescore(pairs: [url: string, rss: string][]): Promise<void> {
  for (const [url, rss] of pairs) await ping(t, url, rss, 'Cheap Insurance Quotes');
  for (const [url] of pairs) assert.equal((await settled(t, url)).outcome !== null, true);
  // The rescoring job finds weblogs by stream position: a settled outcome gets its own shortly after.
  await waitFor(
    async () => {
      const [r] = await t.app.db.query<{ n: number }>(
        'select count(*)::int as n from ping_verifications where outcome is not null and event_id is null',
      );
      return Number(r.n) === 0;
    },
    { what: 'every settled verification to have its stream position' },
  );
  const run = await t.app.spamRescorer.runOnce();
  assert.equal(run.ran, true, JSON.stringify(run));
}

async function spamOf(url: string): Promise<{ score: number; held: boolean; codes: string[] }> {
  const [r] = await t.app.db.query<{ score: number; held: boolean; reasons: { code: string }[] | string }>(
    'select s.score, s.held, s.reasons from weblog_spam s join weblogs w on w.id = s.weblog_id where w.url = $1',
    [url],
  );
  const reasons = typeof r.reasons === 'string' ? (JSON.parse(r.reasons) as { code: string }[]) : r.reasons;
  return { score: Number(r.score), held: r.held, codes: reasons.map((x) => x.code) };
}

async function listed(): Promise<Set<string>> {
  await t.app.renderer.tick({ force: true });
  const doc = await t.app.inject({ url: '/changes.xml' });
  return new Set([...doc.body.matchAll(/ url="([^"]+)"/g)].map((m) => m[1]));
}

const page = async (url: string) => (await t.app.inject({ url: `/weblog?url=${encodeURIComponent(url)}` })).body;

test("a splog-looking weblog whose feed names this pingd's hub or cloud is listed once rescored; one naming another hub is not", async () => {
  const hubBlog = 'http://cheapcarinsurancequotes.info/';
  const cloudBlog = 'http://cheaphomeinsurancequotes.info/';
  const otherBlog = 'http://cheaplifeinsurancequotes.info/';
  let hub = `<atom:link rel="hub" href="${PUBLIC}/websub"/>`;
  const hubFeed = serve('/hub.xml', () => feed(hubBlog, hub));
  const cloudFeed = serve('/cloud.xml', () =>
    feed(
      cloudBlog,
      '<cloud domain="PING.example.com" port="443" path="/rsscloud/pleaseNotify" registerProcedure="" protocol="https-post"/>',
    ),
  );
  const otherFeed = serve('/other.xml', () => feed(otherBlog, '<atom:link rel="hub" href="https://pubsubhubbub.appspot.com/"/>'));

  await pingAndRescore([
    [hubBlog, hubFeed],
    [cloudBlog, cloudFeed],
    [otherBlog, otherFeed],
  ]);
  for (const url of [hubBlog, cloudBlog]) {
    const sp = await spamOf(url);
    assert.deepEqual([sp.held, sp.codes.includes('trust.names_pingd')], [false, true], `${url}: ${JSON.stringify(sp)}`);
    assert.ok(sp.score <= 0.5, JSON.stringify(sp));
    assert.ok((await page(url)).includes(REASON), `${url}: the reason in words`);
  }
  const other = await spamOf(otherBlog);
  assert.deepEqual([other.held, other.codes.includes('trust.names_pingd')], [true, false], JSON.stringify(other));
  assert.ok(!(await page(otherBlog)).includes(REASON));
  const now = await listed();
  assert.deepEqual(
    [hubBlog, cloudBlog, otherBlog].map((u) => now.has(u)),
    [true, true, false],
    'listed: the two that named this pingd',
  );

  // The publisher stops naming pingd: its next ping's verification reads the feed again, and the job holds it.
  hub = '';
  await pingAndRescore([[hubBlog, hubFeed]]);
  const again = await spamOf(hubBlog);
  assert.deepEqual([again.held, again.codes.includes('trust.names_pingd')], [true, false], JSON.stringify(again));
  assert.ok(!(await listed()).has(hubBlog));
});
