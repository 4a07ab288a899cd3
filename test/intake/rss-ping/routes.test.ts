import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { startApp, uniqueUrl, methodCall, rpc, type TestApp } from '../../helpers/app.js';
import { rssPing, readRssPingReply, seed, SEEDS, ITEM } from './helpers.js';
import { findPayloadsBySite, findPingsByUrl, findWeblog } from '../../helpers/rows.js';

const run = promisify(execFile);

let open: TestApp; // no throttle, no outbound fetches: the seed examples can be sent again and again
let strict: TestApp; // default throttle, authentication required

before(async () => {
  open = await startApp({ PING_MIN_INTERVAL: 0, RSSPING_VERIFY_HASH_URI: false });
  await open.listen();
  strict = await startApp({ RSSPING_REQUIRE_AUTH: true, RSSPING_BODY_LIMIT: 4096 });
});

after(async () => {
  await open?.close();
  await strict?.close();
});

async function post(t: TestApp, body: string | Buffer, headers: Record<string, string> = { 'content-type': 'text/xml' }, url = '/rssping') {
  const res = await t.app.inject({ method: 'POST', url, headers, payload: body });
  return { ...readRssPingReply(res.statusCode, res.body), headers: res.headers };
}

const countPayloads = async (t: TestApp) =>
  Number((await t.app.db.query<{ n: number }>('select count(*)::int as n from rssping_payloads'))[0].n);
const countPings = async (t: TestApp) => Number((await t.app.db.query<{ n: number }>('select count(*)::int as n from pings'))[0].n);

test('the four seed examples, sent with curl byte for byte, are accepted and stored with their payload', async () => {
  const expected: Record<
    string,
    { site: string; rss: string; headline: string; uri: string; format: string; feeds: { uri: string; type: string }[] }
  > = {
    'seed-1-rss2-feed': {
      site: 'http://photomatt.net/',
      rss: 'http://photomatt.net/index.xml',
      headline: 'Movable Type 3.2',
      uri: 'http://photomatt.net/2005/07/14/movable-type-32/',
      format: 'rss-feed',
      feeds: [{ uri: 'http://photomatt.net/index.xml', type: 'RSS 2.0' }],
    },
    'seed-2-atom10-entry': {
      site: 'http://photomatt.net/',
      rss: 'http://photomatt.net/posts.atom',
      headline: 'Atom-Powered Robots Run Amok',
      uri: 'http://example.org/2003/12/13/atom03',
      format: 'atom-entry',
      feeds: [{ uri: 'http://photomatt.net/posts.atom', type: 'Atom 1.0' }],
    },
    'seed-3-rss10-item': {
      site: 'http://www.davidgalbraith.org/',
      rss: 'http://www.davidgalbraith.org/index.rdf',
      headline: 'Weird sewer fishing machine in lower Manhattan',
      uri: 'http://www.davidgalbraith.org/archives/000850.html',
      format: 'rss-item',
      feeds: [
        { uri: 'http://www.davidgalbraith.org/index.rdf', type: 'RSS 1.0' },
        { uri: 'http://www.davidgalbraith.org/index.xml', type: 'RSS 0.91' },
      ],
    },
    'seed-4-rss10-feed': {
      site: 'http://www.davidgalbraith.org/',
      rss: 'http://www.davidgalbraith.org/index.rdf',
      headline: 'Weird sewer fishing machine in lower Manhattan',
      uri: 'http://www.davidgalbraith.org/archives/000850.html',
      format: 'rdf-feed',
      feeds: [
        { uri: 'http://www.davidgalbraith.org/index.rdf', type: 'RSS 1.0' },
        { uri: 'http://www.davidgalbraith.org/index.xml', type: 'RSS 0.91' },
      ],
    },
  };
  for (const name of SEEDS) {
    const file = fileURLToPath(new URL(`../../fixtures/rss-ping/${name}.xml`, import.meta.url));
    const { stdout } = await run('curl', [
      '-sS',
      '-X',
      'POST',
      '-H',
      'Content-Type: text/xml',
      '--data-binary',
      `@${file}`,
      '-w',
      '\n%{http_code}',
      `${open.url}/rssping`,
    ]);
    const status = Number(stdout.slice(stdout.lastIndexOf('\n') + 1));
    const r = readRssPingReply(status, stdout.slice(0, stdout.lastIndexOf('\n')));
    assert.equal(r.status, 200, `${name}: ${r.message}`);
    assert.equal(r.flerror, false);
    assert.equal(r.message, 'Thanks for the ping. Not authenticated: this server does not fetch payload_hash_uri.');
    assert.equal(r.authentication, 'none');

    const e = expected[name];
    const rows = await findPayloadsBySite(open.app.db, e.site);
    const row = rows[rows.length - 1];
    const bytes = seed(name);
    const s = bytes.toString('latin1');
    const raw = bytes.subarray(s.indexOf('>', s.indexOf('<payload ')) + 1, s.lastIndexOf('</payload>'));
    assert.equal(row.payload, raw.toString('utf8'), `${name}: the payload is kept exactly as received`);
    assert.equal(row.payload_sha1, createHash('sha1').update(raw).digest('hex'));
    assert.deepEqual([row.headline, row.item_uri, row.payload_format, row.auth], [e.headline, e.uri, e.format, 'none']);
    assert.deepEqual(row.feeds, e.feeds);
    const pings = await findPingsByUrl(open.app.db, e.site);
    const ping = pings.find((p) => Number(p.id) === row.ping_id)!;
    assert.deepEqual([ping.method, ping.url, ping.rss_url], ['rssPing', e.site, e.rss], `${name}: also an ordinary ping`);
    assert.equal(new Date(ping.received_at).getTime(), new Date(row.received_at).getTime());
  }
  const w = await findWeblog(open.app.db, 'http://www.davidgalbraith.org/');
  assert.equal(w?.name, "David galbraith's weblog");
  assert.equal(w?.rss_url, 'http://www.davidgalbraith.org/index.rdf');
});

test('any Content-Type is accepted, or none', async () => {
  for (const headers of [
    { 'content-type': 'application/xml' },
    { 'content-type': 'application/x-www-form-urlencoded' },
    { 'content-type': 'text/plain; charset=utf-8' },
    {} as Record<string, string>,
  ]) {
    const r = await post(open, rssPing({ siteUri: uniqueUrl() }), headers);
    assert.equal(r.status, 200, `${JSON.stringify(headers)}: ${r.message}`);
  }
});

test('ISO-8859-1 bytes are decoded and stored as UTF-8', async () => {
  const site = uniqueUrl('latin');
  const body = Buffer.from(
    rssPing({
      siteUri: site,
      siteName: 'Caf\u00e9 cr\u00e8me',
      payload: '<item><title>Cr\u00e8me br\u00fbl\u00e9e</title><link>http://example.com/cb</link></item>',
    }).replace('encoding="utf-8"', 'encoding="iso-8859-1"'),
    'latin1',
  );
  assert.equal(body.includes(Buffer.from('Crème', 'utf8')), false, 'the request really is Latin-1');
  const r = await post(open, body);
  assert.equal(r.status, 200, r.message);
  const [row] = await findPayloadsBySite(open.app.db, site);
  assert.equal(row.site_name, 'Café crème');
  assert.equal(row.headline, 'Crème brûlée');
  assert.equal(row.payload, '<item><title>Crème brûlée</title><link>http://example.com/cb</link></item>');
  assert.equal(row.payload_encoding, 'iso-8859-1');
  assert.equal((await findWeblog(open.app.db, site))?.name, 'Café crème');
});

test('malformed or incomplete rss_pings get 400 with the reason, and nothing is stored', async () => {
  const site = uniqueUrl('bad');
  const before = [await countPings(open), await countPayloads(open)];
  const cases: [string | Buffer, string][] = [
    ['', 'Empty request: POST an rss_ping document.'],
    [rssPing({ siteUri: 'ftp://example.com/' }), 'The weblog URL must use http or https, not ftp.'],
    [rssPing({ siteUri: site, siteName: '&#x85;' }), 'The weblog name is empty.'],
    [
      rssPing({ siteUri: site, feeds: ['http://example.com/ok.xml', 'javascript:alert(1)'] }),
      'The feed_uri must use http or https, not javascript.',
    ],
    [
      rssPing({ siteUri: site, payload: '<item><link>http://example.com/x</link></item>' }),
      'The payload has no headline: the item needs a title, description, content or summary.',
    ],
    [
      rssPing({ siteUri: site, payload: '<item><title>no uri</title></item>' }),
      'The payload has no URI: the item needs an http(s) link, a guid, a permalink or an id.',
    ],
    [
      rssPing({
        siteUri: site,
        payload:
          '<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><item><title>&b;</title><link>http://e.com/</link></item>',
      }),
      'DOCTYPE and entity declarations are not allowed in an rss_ping.',
    ],
    [methodCall('weblogUpdates.ping', ['x', site]), 'The document element must be <rss_ping>, not <methodCall>.'],
  ];
  for (const [body, message] of cases) {
    const r = await post(open, body);
    assert.deepEqual([r.status, r.flerror, r.message], [400, true, message]);
  }
  assert.deepEqual([await countPings(open), await countPayloads(open)], before);
});

test('the rss_ping has its own body limit: larger than BODY_LIMIT is fine, larger than RSSPING_BODY_LIMIT is 413', async () => {
  const big = `<item><title>Big</title><link>http://example.com/big</link><description>${'x'.repeat(100_000)}</description></item>`;
  const r = await post(open, rssPing({ siteUri: uniqueUrl('big'), payload: big }));
  assert.equal(r.status, 200, r.message);
  const site = uniqueUrl('huge');
  const tooBig = await post(
    strict,
    rssPing({
      siteUri: site,
      payload: `<item><title>Big</title><link>http://example.com/big</link><description>${'x'.repeat(5000)}</description></item>`,
    }),
  );
  assert.deepEqual([tooBig.status, tooBig.flerror, tooBig.message], [413, true, 'The rss_ping is larger than 4096 bytes.']);
  assert.equal((await findPayloadsBySite(strict.app.db, site)).length, 0);
});

test('RSSPING_REQUIRE_AUTH: an unauthenticated rss_ping is refused with 401 and not stored', async () => {
  const site = uniqueUrl('unauth');
  const r = await post(strict, rssPing({ siteUri: site }));
  assert.deepEqual([r.status, r.flerror], [401, true]);
  assert.equal(
    r.message,
    'This server accepts only authenticated rss_pings (pingserver-side or publisher-side); not authenticated: no payload_hash_uri and no publisher endpoint.',
  );
  assert.equal(await findWeblog(strict.app.db, site), undefined);
});

test('an rss_ping is throttled like any ping of the same weblog (429 with Retry-After), XML-RPC included', async () => {
  const t = await startApp({ RSSPING_VERIFY_HASH_URI: false });
  try {
    const site = uniqueUrl('throttle');
    const first = await post(t, rssPing({ siteUri: site }));
    assert.equal(first.status, 200, first.message);
    const again = await post(t, rssPing({ siteUri: site, payload: ITEM.replace('Hello world', 'Second') }));
    assert.equal(again.status, 429);
    assert.equal(again.flerror, true);
    assert.match(
      again.message,
      new RegExp(
        `^${site.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} was pinged less than 300 seconds ago; please ping again after \\S+Z \\(in \\d+ seconds\\)\\.$`,
      ),
    );
    assert.ok(Number(again.headers['retry-after']) > 0 && Number(again.headers['retry-after']) <= 300);
    assert.equal((await findPayloadsBySite(t.app.db, site)).length, 1, 'the throttled payload is not stored');
    const other = uniqueUrl('xmlrpc-first');
    assert.equal((await rpc(t.app, methodCall('weblogUpdates.ping', ['Blog', other]))).flerror, false);
    assert.equal((await post(t, rssPing({ siteUri: other }))).status, 429);
  } finally {
    await t.close();
  }
});

test('the ping and its payload commit together: when the payload cannot be stored, neither is, and the reply is 503', async () => {
  const t = await startApp({ PING_MIN_INTERVAL: 0, RSSPING_VERIFY_HASH_URI: false });
  try {
    const site = uniqueUrl('atomic');
    await t.app.db.exec('alter table rssping_payloads rename to rssping_payloads_away');
    const r = await post(t, rssPing({ siteUri: site }));
    assert.deepEqual(
      [r.status, r.flerror, r.message],
      [503, true, 'The ping could not be stored (database unavailable); please ping again later.'],
    );
    assert.equal(await findWeblog(t.app.db, site), undefined, 'no weblog row');
    assert.equal((await findPingsByUrl(t.app.db, site)).length, 0, 'no ping row');
    await t.app.db.exec('alter table rssping_payloads_away rename to rssping_payloads');
    const retry = await post(t, rssPing({ siteUri: site }));
    assert.equal(retry.status, 200, 'a retry is not throttled by a ping that was never acknowledged');
    assert.equal((await findPingsByUrl(t.app.db, site)).length, 1);
  } finally {
    await t.close();
  }
});

test('without RSSPING_SECRET publisher-side authentication is off: the token endpoint says so (503)', async () => {
  const res = await open.app.inject({ method: 'GET', url: '/rssping/token?site_uri=http%3A%2F%2Fexample.com%2F' });
  assert.deepEqual(
    [res.statusCode, res.headers['content-type'], res.body],
    [503, 'text/plain; charset=utf-8', 'Publisher-side authentication is not enabled on this server (RSSPING_SECRET is not set).\n'],
  );
});

test('outcomes are counted in /metrics', async () => {
  const res = await open.app.inject({ method: 'GET', url: '/metrics' });
  assert.match(res.body, /pingd_rssping_total\{outcome="accepted",auth="none"\} [1-9]/);
  assert.match(res.body, /pingd_rssping_total\{outcome="invalid",auth="none"\} [1-9]/);
  assert.match(res.body, /pingd_pings_total\{method="rssPing",outcome="accepted"\} [1-9]/);
});
