// WebSub publish as an intake protocol (PubSubHubbub 0.4 hub.mode=publish): WordPress's request as it sends
// it, over a listening server, becomes a ping committed before the 204; topics of one weblog make one ping;
// the weblog is the feed's own <link> once known; every bad or unwelcome publish gets its exact refusal and
// stores nothing more than the rules allow.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startApp, type TestApp } from '../../helpers/app.js';
import { waitFor } from '../../helpers/wait.js';
import { MAX_PUBLISH_URLS, MAX_PUBLISH_WEBLOGS } from '../../../src/intake/websub/publish.js';

const dir = mkdtempSync(join(tmpdir(), 'pingd-publish-'));
const blocklistPath = join(dir, 'blocklist.txt');
writeFileSync(blocklistPath, 'spam.example\n');

let t: TestApp;
let base: string;
before(async () => {
  t = await startApp({ PING_MIN_INTERVAL: 300, BLOCKLIST_FILE: blocklistPath, RATE_LIMIT_PER_IP: 0 });
  base = await t.listen();
});
after(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
const blog = () => `https://wp-${process.pid}-${++n}.example.org`;

/** A raw POST with exactly these bytes, as PHP's cURL transport sends a string body. */
function post(
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${base}/websub`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body), ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function pingsOf(url: string): Promise<{ method: string; rss_url: string | null; name: string }[]> {
  return t.app.db.query('select p.method, p.rss_url, p.name from pings p join weblogs w on w.id = p.weblog_id where w.url = $1', [url]);
}

test("WordPress's publish, verbatim: 204 after one ping of the blog is committed, its feed the first topic", async () => {
  const site = blog();
  // The WebSub plugin's publish_to_hub(): 'hub.mode=publish' then '&hub.url=' . esc_url($url) per feed
  // (not percent-encoded), posted by wp_remote_post with its User-Agent.
  const body = `hub.mode=publish&hub.url=${site}/feed/&hub.url=${site}/feed/atom/`;
  const r = await post(body, { 'user-agent': `WordPress/6.7.1; ${site}/; PubSubHubbub/WebSub` });
  assert.equal(r.status, 204);
  assert.equal(r.body, '');
  // One ping for the weblog (the throttle is the weblog's): the two feeds of one blog are one publication.
  const rows = await pingsOf(`${site}/`);
  assert.deepEqual(rows, [{ method: 'websub', rss_url: `${site}/feed/`, name: new URL(site).hostname }]);
});

test('hub.topic, hub.url[] and repeated fields: each topic of another weblog is its own ping', async () => {
  const a = blog();
  const b = blog();
  const c = blog();
  const r = await post(
    `hub.mode=publish&hub.topic=${encodeURIComponent(`${a}/feed`)}&hub.url%5B%5D=${encodeURIComponent(`${b}/rss`)}&hub.url[]=${encodeURIComponent(`${c}/atom.xml`)}&hub.extra=ignored`,
  );
  assert.equal(r.status, 204);
  assert.equal((await pingsOf(`${a}/`))[0]?.rss_url, `${a}/feed`);
  assert.equal((await pingsOf(`${b}/`))[0]?.rss_url, `${b}/rss`);
  assert.equal((await pingsOf(`${c}/`))[0]?.rss_url, `${c}/atom.xml`);
});

test("the weblog is the feed's own <link> once verification found it, and its name the feed's title", async () => {
  const topic = `${blog()}/feeds/posts.xml`;
  const site = `${blog()}/journal/`;
  await t.app.db.query('insert into feeds (url, fetch_url, site_url, title) values ($1, $1, $2, $3)', [topic, site, 'A Journal']);
  const r = await post(`hub.mode=publish&hub.url=${encodeURIComponent(topic)}`);
  assert.equal(r.status, 204);
  assert.deepEqual(await pingsOf(site), [{ method: 'websub', rss_url: topic, name: 'A Journal' }]);
});

test('a publish is listed in changes.xml like any ping', async () => {
  const site = blog();
  assert.equal((await post(`hub.mode=publish&hub.url=${site}/feed/`)).status, 204);
  // A tick finds the render lock busy while the scheduled render holds it (a loaded machine), and an
  // instance reuses its pointer to the current rendering for PUBLISH_POINTER_TTL_MS: render until listed.
  await waitFor(
    async () => {
      await t.app.renderer.tick();
      const doc = await t.app.inject({ method: 'GET', url: '/changes.xml' });
      return doc.body.includes(`url="${site}/"`);
    },
    { what: 'the weblog in changes.xml' },
  );
});

const refusals: [string, string, number, string][] = [
  ['no topic', 'hub.mode=publish', 400, 'hub.url (or hub.topic) is required to publish'],
  ['an empty topic', 'hub.mode=publish&hub.url=', 400, 'hub.url (or hub.topic) is required to publish'],
  ['a relative topic', 'hub.mode=publish&hub.url=/feed/', 400, 'The topic is not an absolute URL: it must start with http:// or https://.'],
  ['an ftp topic', 'hub.mode=publish&hub.url=ftp://a.example/feed', 400, 'The topic must use http or https, not ftp.'],
  [
    'a topic with credentials',
    'hub.mode=publish&hub.url=https://u:p@a.example/feed',
    400,
    'The topic must not contain a user name or password.',
  ],
  [
    `${MAX_PUBLISH_URLS + 1} topics`,
    `hub.mode=publish${Array.from({ length: MAX_PUBLISH_URLS + 1 }, (_, i) => `&hub.url=https://t.example/${i}`).join('')}`,
    400,
    `at most ${MAX_PUBLISH_URLS} topics may be published at once`,
  ],
  [
    `topics of ${MAX_PUBLISH_WEBLOGS + 1} weblogs`,
    `hub.mode=publish${Array.from({ length: MAX_PUBLISH_WEBLOGS + 1 }, (_, i) => `&hub.url=https://t${i}.example/f`).join('')}`,
    400,
    `at most ${MAX_PUBLISH_WEBLOGS} weblogs may be published at once (each is a ping); these topics name ${MAX_PUBLISH_WEBLOGS + 1}`,
  ],
  ['a blocked host', 'hub.mode=publish&hub.url=https://www.spam.example/feed', 403, ''],
];

for (const [what, body, status, reason] of refusals) {
  test(`${status} for ${what}${reason ? `: "${reason}"` : ''}, nothing stored`, async () => {
    const [before] = await t.app.db.query<{ n: number }>('select count(*)::int as n from pings');
    const r = await post(body);
    assert.equal(r.status, status);
    assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8');
    if (reason) assert.equal(r.body, `${reason}\n`);
    else assert.ok(r.body.length > 1);
    const [after] = await t.app.db.query<{ n: number }>('select count(*)::int as n from pings');
    assert.equal(after.n, before.n);
  });
}

test('a weblog published again within PING_MIN_INTERVAL: 429 with Retry-After and the throttle reason', async () => {
  const site = blog();
  assert.equal((await post(`hub.mode=publish&hub.url=${site}/feed/`)).status, 204);
  const r = await post(`hub.mode=publish&hub.url=${site}/feed/`);
  assert.equal(r.status, 429);
  assert.ok(Number(r.headers['retry-after']) > 0 && Number(r.headers['retry-after']) <= 300);
  assert.match(r.body, new RegExp(`^${site}/ was pinged less than 300 seconds ago`));
  assert.equal((await pingsOf(`${site}/`)).length, 1);
});

test('one throttled weblog among several: each topic says what became of it, the others are stored', async () => {
  const a = blog();
  const b = blog();
  assert.equal((await post(`hub.mode=publish&hub.url=${a}/feed/`)).status, 204);
  const r = await post(`hub.mode=publish&hub.url=${a}/feed/&hub.url=${b}/feed/`);
  assert.equal(r.status, 429);
  const lines = r.body.trimEnd().split('\n');
  assert.match(lines[0], new RegExp(`^${a}/feed/: ${a}/ was pinged less than 300 seconds ago`));
  assert.equal(lines[1], `${b}/feed/: accepted`);
  assert.equal((await pingsOf(`${b}/`)).length, 1);
});
