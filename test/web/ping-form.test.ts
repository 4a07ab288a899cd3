import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startApp, uniqueUrl, type TestApp } from '../helpers/app.js';
import { findPingsByUrl } from '../helpers/rows.js';

const run = promisify(execFile);
let t: TestApp;
before(async () => {
  t = await startApp();
});
after(async () => {
  await t.close();
});

const get = (url: string) => t.app.inject({ method: 'GET', url });
const q = (o: Record<string, string>) => new URLSearchParams(o).toString();

test('GET /pingSiteForm with name and url: 200, HTML page, row stored', async () => {
  const url = uniqueUrl('form');
  const res = await get(`/pingSiteForm?${q({ name: 'The RSS Blog', url, changesURL: `${url}new`, rssUrl: `${url}rss` })}`);
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
  assert.match(res.body, /<p class="ok">Thanks for the ping\. We have recorded that <a href="[^"]+">The RSS Blog<\/a>/);
  const [row] = await findPingsByUrl(t.app.db, url);
  assert.deepEqual([row.method, row.name, row.changes_url, row.rss_url], ['pingSiteForm', 'The RSS Blog', `${url}new`, `${url}rss`]);
});

test('the seed example URL shape (url with unencoded slashes after the scheme) works', async () => {
  const host = `kb-${process.pid}.example.com`;
  const res = await get(`/pingSiteForm?name=The+RSS+Blog&url=http%3A%2F%2F${host}/rss`);
  assert.equal(res.statusCode, 200);
  assert.equal((await findPingsByUrl(t.app.db, `http://${host}/rss`)).length, 1);
});

test('GET /ping is an alias and accepts changesUrl spelling', async () => {
  const url = uniqueUrl('alias');
  const res = await get(`/ping?${q({ url, name: 'Alias', changesUrl: `${url}c` })}`);
  assert.equal(res.statusCode, 200);
  assert.equal((await findPingsByUrl(t.app.db, url))[0].changes_url, `${url}c`);
});

test('without parameters: a form a person can fill in', async () => {
  const res = await get('/pingSiteForm');
  assert.equal(res.statusCode, 200);
  assert.match(res.body, /<form method="get" action="\/pingSiteForm">/);
  assert.match(res.body, /<input name="name"/);
  assert.match(res.body, /<input name="url"/);
});

test('refusals: 400 with the reason, everything echoed HTML-escaped, nothing stored', async () => {
  const cases: [Record<string, string>, number, string][] = [
    [{ name: '<script>alert(1)</script>', url: 'javascript:alert(1)' }, 400, 'The weblog URL must use http or https, not javascript.'],
    [{ url: 'http://x.example.com/"><script>' }, 400, 'The weblog name is missing.'],
    [{ name: 'N', url: '' }, 400, 'The weblog URL is missing.'],
    [
      { name: 'N', url: 'http://x.example.com/', rssUrl: 'rss.xml' },
      400,
      'The rssUrl is not an absolute URL: it must start with http:// or https://.',
    ],
  ];
  for (const [params, status, reason] of cases) {
    const res = await get(`/pingSiteForm?${q(params)}`);
    assert.equal(res.statusCode, status, JSON.stringify(params));
    assert.ok(res.body.includes(`<p class="err">${reason}</p>`), res.body);
    assert.doesNotMatch(res.body, /<script>/);
    if (params.name?.includes('script')) assert.match(res.body, /value="&lt;script&gt;alert\(1\)&lt;\/script&gt;"/);
    if (params.url?.includes('"')) assert.match(res.body, /value="http:\/\/x\.example\.com\/&quot;&gt;&lt;script&gt;"/);
  }
  assert.equal((await findPingsByUrl(t.app.db, 'http://x.example.com/')).length, 0);
});

test('throttled: 429 with Retry-After and the time to retry', async () => {
  const url = uniqueUrl('thr');
  assert.equal((await get(`/pingSiteForm?${q({ name: 'T', url })}`)).statusCode, 200);
  const res = await get(`/pingSiteForm?${q({ name: 'T', url })}`);
  assert.equal(res.statusCode, 429);
  assert.match(String(res.headers['retry-after']), /^(29\d|300)$/);
  assert.match(res.body, /was pinged less than 300 seconds ago; please ping again after/);
  assert.equal((await findPingsByUrl(t.app.db, url)).length, 1);
});

test('curl against a listening server (HTTP/1.0, Connection: close)', async () => {
  await t.listen();
  const url = uniqueUrl('curl');
  const { stdout } = await run('curl', [
    '-s',
    '--http1.0',
    '-o',
    '/dev/null',
    '-w',
    '%{http_code}',
    `${t.url}/pingSiteForm?${q({ name: 'Curl', url })}`,
  ]);
  assert.equal(stdout, '200');
  assert.equal((await findPingsByUrl(t.app.db, url)).length, 1);
});

test('GET / is a home page linking the documents', async () => {
  const res = await get('/');
  assert.equal(res.statusCode, 200);
  assert.match(res.body, /href="\/changes\.xml"/);
});
