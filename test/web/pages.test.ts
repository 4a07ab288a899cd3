// The pages for people through the app (no browser: test/web/browser.test.ts drives Chromium): GET / , GET
// /weblog?url= ("did my ping arrive?"), GET /status and the hashed assets they link, with the security
// headers, HTML escaping of everything a stranger sent, nothing the CSP forbids (inline script or style),
// and a 503 page when the database is gone.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { BACKEND, methodCall, rpc, startApp, uniqueUrl, type TestApp } from '../helpers/app.js';
import { CSP } from '../../src/web/plugin.js';
import { CACHE_MS } from '../../src/operations/stats/plugin.js';

const dir = mkdtempSync(join(tmpdir(), 'pingd-pages-'));
const blockedHost = `blocked-${process.pid}.example.com`;
const BLOCKED_CLIENT_ADDR = '192.0.2.66';
writeFileSync(join(dir, 'blocklist.txt'), `${blockedHost}\nclient:${BLOCKED_CLIENT_ADDR}\n`);

let t: TestApp;
before(async () => {
  t = await startApp({ RENDER_SCHEDULER: false, BLOCKLIST_FILE: join(dir, 'blocklist.txt') });
});
after(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** What the tests below sent through the app, for the status page's numbers. */
const sent = { accepted: 0, throttled: 0, blocked: 0 };
/** Every page fetched, for the checks that hold on all of them. */
const pages = new Map<string, string>();

async function page(url: string, status = 200, headers: Record<string, string> = {}): Promise<string> {
  const res = await t.app.inject({ method: 'GET', url, headers });
  assert.equal(res.statusCode, status, `${url}: ${res.body.slice(0, 500)}`);
  assert.equal(res.headers['content-type'], 'text/html; charset=utf-8', url);
  assert.equal(res.headers['content-security-policy'], CSP, url);
  assert.equal(res.headers['x-content-type-options'], 'nosniff', url);
  pages.set(url, res.body);
  return res.body;
}

async function ping(url: string, name: string): Promise<{ flerror?: boolean; message?: string }> {
  return rpc(t.app, methodCall('weblogUpdates.ping', [name, url]));
}

/** The inner HTML of the element with this id (tables and lists here are not nested in themselves). */
function byId(html: string, tag: string, id: string): string {
  const m = new RegExp(`<${tag} id="${id}"[^>]*>([\\s\\S]*?)</${tag}>`).exec(html);
  assert.ok(m, `no <${tag} id="${id}">`);
  return m[1];
}

/** Table rows as arrays of cell texts (tags stripped, entities left as written). */
function rows(tableHtml: string): string[][] {
  const body = /<tbody>([\s\S]*?)<\/tbody>/.exec(tableHtml)?.[1] ?? '';
  return [...body.matchAll(/<tr>([\s\S]*?)<\/tr>/g)].map((r) =>
    [...r[1].matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((c) => c[1].replace(/<[^>]+>/g, '')),
  );
}

const archiveOf = (iso: string) => `/${iso.slice(0, 4)}/${iso.slice(5, 7)}/${iso.slice(8, 10)}/${iso.slice(11, 13)}.xml`;
const NAME = '<b>&"';
const NAME_ESCAPED = '&lt;b&gt;&amp;&quot;';

test('GET /: how to ping (the WordPress line with /RPC2), what is published, a labelled form', async () => {
  const lastFullHour = () => archiveOf(new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3_600_000).toISOString());
  const hours = [lastFullHour()];
  const html = await page('/', 200, { host: 'ping.example.org' });
  hours.push(lastFullHour());
  assert.match(
    html,
    /<em>Settings → Writing → Update Services<\/em>, add this line:<\/p>\s*<pre [^>]*><code>http:\/\/ping\.example\.org\/RPC2<\/code><\/pre>/,
  );
  for (const href of ['/changes.xml', '/shortChanges.xml', '/updates.xml', '/stream']) assert.ok(html.includes(`<a href="${href}">`), href);
  // The last full hour's archive, as an example (either side of an hour turning during the request).
  assert.ok(
    hours.some((h) => html.includes(`<a href="${h}">${h}</a>`)),
    'the last full hour archive link',
  );
  const forms = [...html.matchAll(/<form\b[\s\S]*?<\/form>/g)].map((m) => m[0]);
  assert.equal(forms.length, 1);
  assert.match(forms[0], /^<form method="get" action="\/pingSiteForm">/);
  assert.equal((forms[0].match(/<input\b/g) ?? []).length, 4);
  assert.doesNotMatch(forms[0].replace(/<label>[\s\S]*?<\/label>/g, ''), /<input\b/, 'every input is inside a <label>');
  for (const name of ['name', 'url', 'changesURL', 'rssUrl']) assert.match(forms[0], new RegExp(`<label>[^<]+<input name="${name}"`), name);
});

test('GET /: a Host that is not a plain host name is not repeated in the page', async () => {
  const html = await page('/', 200, { host: 'evil.example"><script>x' });
  assert.doesNotMatch(html, /evil\.example/);
  assert.match(html, /<pre [^>]*><code>http:\/\/localhost:\d+\/RPC2<\/code><\/pre>/);
});

test('GET /weblog without a URL: the lookup form, labelled, nothing else', async () => {
  for (const url of ['/weblog', '/weblog?url=']) {
    const html = await page(url);
    assert.match(html, /<form method="get" action="\/weblog" class="lookup">\s*<label>Weblog URL <input name="url" type="url" value=""/);
    assert.doesNotMatch(html, /class="err"|<h2>Yes:/);
  }
});

test('GET /weblog?url=javascript:… : 400 with the validation message, the URL echoed escaped', async () => {
  const html = await page(`/weblog?url=${encodeURIComponent('javascript:alert(1)')}`, 400);
  assert.ok(html.includes('<p class="err">The weblog URL must use http or https, not javascript.</p>'), html);
  assert.ok(html.includes('value="javascript:alert(1)"'));
  const odd = await page(`/weblog?url=${encodeURIComponent('javascript:"><script>alert(1)</script>')}`, 400);
  assert.ok(odd.includes('value="javascript:&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"'), odd);
  assert.doesNotMatch(odd, /<script>/);
});

test('GET /weblog for an unknown weblog: 404 naming it, HTML-escaped', async () => {
  const asked = `http://unknown-${process.pid}.example.com/"><script>alert(1)</script>`;
  const html = await page(`/weblog?url=${encodeURIComponent(asked)}`, 404);
  assert.doesNotMatch(html, /<script>/, 'nothing of the URL is raw HTML');
  assert.ok(
    html.includes(`value="http://unknown-${process.pid}.example.com/&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`),
    'the asked URL, escaped in the form',
  );
  // The normalised URL (what pingd compares) is named in the answer.
  assert.ok(
    html.includes(
      `<p class="err">pingd has no ping from <code>http://unknown-${process.pid}.example.com/%22%3E%3Cscript%3Ealert(1)%3C/script%3E</code>.</p>`,
    ),
    html,
  );
  assert.match(html, /one ping per weblog every 300 seconds is kept/);
});

test('GET /weblog for an unknown weblog whose pings were refused (blocked): 404 saying so', async () => {
  const url = `http://${blockedHost}/`;
  const r = await ping(url, 'Blocked');
  assert.equal(r.flerror, true);
  sent.blocked++;
  const html = await page(`/weblog?url=${encodeURIComponent(url)}`, 404);
  assert.ok(html.includes('<p class="err">Its pings were refused: blocked.</p>'), html);
  assert.ok(html.includes(`pingd has no ping from <code>${url}</code>`));
});

let known: string;
test('GET /weblog for a known weblog: its ping (method, accepted, archive hour), its name escaped, where it is listed', async () => {
  known = uniqueUrl('page');
  assert.equal((await ping(known, NAME)).flerror, false);
  sent.accepted++;
  const [row] = await t.app.db.query<{ received_at: Date }>('select received_at from pings where url = $1', [known]);
  const receivedIso = new Date(row.received_at).toISOString();
  const html = await page(`/weblog?url=${encodeURIComponent(known)}`);
  assert.ok(html.includes(`<h2>Yes: ${NAME_ESCAPED}</h2>`), 'the name, escaped');
  assert.ok(!html.includes(NAME), 'never raw');
  assert.ok(html.includes(`<dt>Pings accepted</dt><dd>1</dd>`));
  assert.ok(html.includes(`<a href="${known}">${known}</a>`));
  assert.ok(html.includes('<dt>Verification</dt><dd><span class="muted">off on this server</span></dd>'));
  const pings = rows(/<h2>Latest pings<\/h2>([\s\S]*?)<\/table>/.exec(html)?.[1] ?? '');
  assert.deepEqual(pings, [[receivedIso.slice(0, 19).replace('T', ' '), 'weblogUpdates.ping', 'accepted', archiveOf(receivedIso)]]);
  assert.ok(html.includes(`<a href="${archiveOf(receivedIso)}">${archiveOf(receivedIso)}</a>`), 'the archive hour is a link');
  assert.match(html, /<li><a href="\/changes\.xml">changes\.xml<\/a>: listed \(pinged \d+ s ago; the list covers the last 1 hour/);
  assert.match(
    html,
    /<li><a href="\/shortChanges\.xml">shortChanges\.xml<\/a>: listed \(pinged \d+ s ago; the list covers the last 5 minutes/,
  );
});

test('GET /weblog after a second ping inside the throttle: the refusal is listed above the accepted ping', async () => {
  const r = await ping(known, NAME);
  assert.equal(r.flerror, true);
  assert.match(r.message ?? '', /less than 300 seconds ago/);
  sent.throttled++;
  const html = await page(`/weblog?url=${encodeURIComponent(known)}`);
  const pings = rows(/<h2>Latest pings<\/h2>([\s\S]*?)<\/table>/.exec(html)?.[1] ?? '');
  assert.deepEqual(
    pings.map((p) => [p[1], p[2]]),
    [
      ['weblogUpdates.ping', 'refused: throttled'],
      ['weblogUpdates.ping', 'accepted'],
    ],
  );
  assert.equal(pings[0][3], '–', 'a refused ping has no archive hour');
  assert.ok(html.includes('<td class="err">refused: throttled</td>'));
  assert.ok(html.includes(`<dt>Pings accepted</dt><dd>1</dd>`), 'the refusal did not count');
});

test('GET /status: the tables filled from the pings sent, the latest ping named escaped, the chart scripts', async () => {
  const other = uniqueUrl('status');
  assert.equal((await ping(other, 'Status & Co')).flerror, false);
  sent.accepted++;
  const html = await page('/status');
  assert.match(html, /<script src="\/assets\/uPlot\.iife\.min\.[0-9a-f]{12}\.js" defer><\/script>/);
  assert.match(html, /<script src="\/assets\/status\.[0-9a-f]{12}\.js" defer><\/script>/);
  assert.match(html, /<link rel="stylesheet" href="\/assets\/uPlot\.min\.[0-9a-f]{12}\.css">/);

  assert.ok(html.includes(`<div class="value" id="accepted-total">${sent.accepted}</div>`), 'accepted total');
  assert.ok(html.includes(`<div class="value" id="refused-total">${sent.blocked + sent.throttled}</div>`), 'refused total');
  assert.ok(html.includes(`<div class="value ok" id="db-state">ready</div>`));
  assert.ok(html.includes(`Database (${BACKEND})`));
  assert.deepEqual(rows(byId(html, 'table', 'refused-table')), [
    ['invalid', '0'],
    ['throttled', String(sent.throttled)],
    ['rate_limited', '0'],
    ['blocked', String(sent.blocked)],
    ['unavailable', '0'],
  ]);
  assert.deepEqual(rows(byId(html, 'table', 'verification-table')), [['none settled (VERIFY_PINGS=off)']]);
  const hosts = rows(byId(html, 'table', 'hosts-table'));
  assert.deepEqual(hosts[0], [new URL(known).hostname, '1', '1'], 'the busiest host: one accepted, one throttled');
  assert.deepEqual(hosts.map((h) => h[0]).sort(), [blockedHost, new URL(known).hostname, new URL(other).hostname].sort());
  assert.deepEqual(
    hosts.find((h) => h[0] === blockedHost),
    [blockedHost, '0', '1'],
  );
  assert.deepEqual(rows(byId(html, 'table', 'queues-table')), [
    ['verification', '0', '0'],
    ['relay', '0', '0'],
    ['websub', '0', '0'],
    ['rsscloud', '0', '0'],
  ]);
  assert.deepEqual(
    rows(byId(html, 'table', 'documents-table')).map((r) => r[0]),
    ['changes.xml', 'shortChanges.xml', 'updates.xml'],
  );
  const recent = byId(html, 'ul', 'recent');
  const items = [...recent.matchAll(/<li data-id="\d+">[\s\S]*?<\/li>/g)].map((m) => m[0]);
  assert.equal(items.length, sent.accepted);
  assert.match(items[0], />Status &amp; Co<\/a> <span class="muted">ping<\/span>/, 'newest first');
  assert.ok(
    items[1].includes(`<a href="/weblog?url=${encodeURIComponent(known)}">${NAME_ESCAPED}</a>`),
    'the name escaped, linked to its page',
  );
  assert.ok(!html.includes(NAME));
  // The page and GET /api/stats are the same snapshot.
  const api = (await t.app.inject({ method: 'GET', url: '/api/stats' })).json();
  assert.ok(html.includes(`<time datetime="${api.generatedAt}" id="generated-at">`));
});

// REGRESSION: refusals screened before validation (a blocked client address, the per-address rate limit)
// were remembered under the URL as sent, while the page looks up the normalised URL: a weblog whose engine
// sends "HTTP://Blog.Example.com" never saw why its pings were refused.
test('a ping refused before validation (a blocked client) is found by the page under its normalised URL', async () => {
  const raw = `HTTP://Client-Refused-${process.pid}.Example.COM`;
  const normalised = `http://client-refused-${process.pid}.example.com/`;
  const res = await t.app.inject({
    method: 'POST',
    url: '/RPC2',
    headers: { 'content-type': 'text/xml' },
    payload: methodCall('weblogUpdates.ping', ['Refused client', raw]),
    remoteAddress: BLOCKED_CLIENT_ADDR,
  });
  assert.equal(res.statusCode, 200);
  assert.match(res.body, /<name>flerror<\/name><value><boolean>1<\/boolean>/);
  assert.match(res.body, /Pings from your address are not accepted by this server\./);
  for (const asked of [raw, normalised]) {
    const html = await page(`/weblog?url=${encodeURIComponent(asked)}`, 404);
    assert.ok(html.includes(`pingd has no ping from <code>${normalised}</code>`), asked);
    assert.ok(html.includes('<p class="err">Its pings were refused: blocked.</p>'), `${asked}: the refusal is named`);
  }
});

test('no page has an inline script, an inline style or an event-handler attribute (the CSP forbids them)', async () => {
  await page('/pingSiteForm');
  assert.ok(pages.size >= 6, [...pages.keys()].join(' '));
  for (const [url, html] of pages) {
    const tags = html.match(/<[a-zA-Z][^>]*>/g) ?? [];
    assert.ok(tags.length > 10, url);
    for (const tag of tags) {
      if (/^<script\b/i.test(tag)) assert.match(tag, /\ssrc="\/assets\/[^"]+"/, `${url}: ${tag}`);
      assert.doesNotMatch(tag, /\s(style|on[a-z]+)\s*=/i, `${url}: ${tag}`);
      assert.doesNotMatch(tag, /^<style\b/i, `${url}: ${tag}`);
      assert.doesNotMatch(tag, /(href|src|action)="\s*javascript:/i, `${url}: ${tag}`);
    }
  }
});

test('every asset the pages link: 200, cached for a year and immutable, the right type, the bytes its hash names', async () => {
  const linked = new Set<string>();
  for (const html of pages.values()) for (const m of html.matchAll(/(?:href|src)="(\/assets\/[^"]+)"/g)) linked.add(m[1]);
  assert.deepEqual([...linked].map((u) => u.replace(/\.[0-9a-f]{12}\./, '.*.')).sort(), [
    '/assets/site.*.css',
    '/assets/status.*.js',
    '/assets/uPlot.iife.min.*.js',
    '/assets/uPlot.min.*.css',
  ]);
  const require = createRequire(import.meta.url);
  const source: Record<string, string> = {
    site: new URL('../../src/web/assets/site.css', import.meta.url).pathname,
    status: new URL('../../src/web/assets/status.js', import.meta.url).pathname,
    'uPlot.iife.min': require.resolve('uplot/dist/uPlot.iife.min.js'),
    'uPlot.min': require.resolve('uplot/dist/uPlot.min.css'),
  };
  for (const url of linked) {
    const res = await t.app.inject({ method: 'GET', url });
    assert.equal(res.statusCode, 200, url);
    const cc = String(res.headers['cache-control']);
    assert.match(cc, /max-age=31536000/, url);
    assert.match(cc, /immutable/, url);
    assert.match(String(res.headers['content-type']), url.endsWith('.css') ? /^text\/css/ : /^(text|application)\/javascript/, url);
    const [, base, hash] = /^\/assets\/(.+)\.([0-9a-f]{12})\.(css|js)$/.exec(url) ?? [];
    const bytes = readFileSync(source[base]);
    assert.ok(res.rawPayload.equals(bytes), `${url} serves ${source[base]}`);
    assert.equal(createHash('sha256').update(bytes).digest('hex').slice(0, 12), hash, `${url}: the hash is of its bytes`);
  }
});

test('assets: an unknown hash is a plain-text 404; path traversal never reaches a file', async () => {
  const res = await t.app.inject({ method: 'GET', url: '/assets/site.000000000000.css' });
  assert.equal(res.statusCode, 404);
  assert.equal(res.headers['content-type'], 'text/plain; charset=utf-8');
  assert.equal(res.headers['cache-control'], 'no-store');
  assert.equal(res.body, 'No asset site.000000000000.css (pages name their assets with the hash of their bytes).\n');
  // The asset directory's neighbours: the plugin's own source, the package manifest.
  for (const url of [
    '/assets/..%2Fplugin.ts',
    '/assets/%2e%2e%2fplugin.ts',
    '/assets/%2E%2E%2Fplugin.ts',
    '/assets/..%2F..%2F..%2Fpackage.json',
    '/assets/../web/plugin.ts',
    '/assets/..%5Cplugin.ts',
    '/assets/site.css',
    '/assets/status.js',
  ]) {
    const r = await t.app.inject({ method: 'GET', url });
    assert.equal(r.statusCode, 404, url);
    assert.doesNotMatch(r.body, /fastify-plugin|"dependencies"|Owns/, url);
  }
});

test('GET /status with the database gone: 503 page with Retry-After', async () => {
  // Past the cached statistics of the test above (the statistics clock moved on, not waited for), then
  // the database goes: closed under the embedded run, dropped (its connections terminated) on the server.
  const clock = t.app.stats.now;
  t.app.stats.now = () => clock() + CACHE_MS;
  if (BACKEND === 'pglite') await t.app.db.close();
  else await t.db.drop();
  const res = await t.app.inject({ method: 'GET', url: '/status' });
  assert.equal(res.statusCode, 503);
  assert.equal(res.headers['retry-after'], '10');
  assert.equal(res.headers['cache-control'], 'no-store');
  assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
  assert.equal(res.headers['content-security-policy'], CSP);
  assert.match(res.body, /<title>Status unavailable · pingd<\/title>/);
  assert.ok(res.body.includes('<p class="err">The database did not answer, so the statistics cannot be read.'), res.body);
  assert.ok(res.body.includes('<a href="/readyz">/readyz</a>'));
  assert.doesNotMatch(res.body, /id="accepted-total"/);
});
