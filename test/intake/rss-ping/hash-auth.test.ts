// Pingserver-side authentication against a real local HTTP server serving the hash.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import zlib from 'node:zlib';
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { startApp, type TestApp } from '../../helpers/app.js';
import { PINGD_VERSION } from '../../../src/platform/fetch/user-agent.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';
import { payloadDigests, sameSite, servedDigest, trimBytes } from '../../../src/intake/rss-ping/hash-auth.js';
import { readRssPingReply, rssPing, seed } from './helpers.js';
import { findPayloadsBySite, findWeblog } from '../../helpers/rows.js';

type Route = { status?: number; body?: string | Buffer; headers?: Record<string, string> };

interface HashServer {
  host: string;
  port: number;
  base: string;
  routes: Map<string, Route>;
  hits: string[];
  server: http.Server;
}

async function hashServer(host: string): Promise<HashServer> {
  const routes = new Map<string, Route>();
  const hits: string[] = [];
  const userAgents: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url!);
    userAgents.push(String(req.headers['user-agent']));
    const r = routes.get(req.url!) ?? { status: 404, body: 'not found' };
    res.writeHead(r.status ?? 200, { 'content-type': 'text/plain', ...(r.headers ?? {}) });
    res.end(r.body ?? '');
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as AddressInfo).port;
  lastUserAgents = userAgents;
  return { host, port, base: `http://${host}:${port}`, routes, hits, server };
}

let lastUserAgents: string[] = [];
let hs: HashServer; // 127.0.0.1: the publisher's site
let internal: HashServer; // 127.0.0.2: an "internal" host that must never be reached when private is refused
let uaSeen: string[];
let open: TestApp; // FETCH_ALLOW_PRIVATE=true (tests only), no throttle
let allowOne: TestApp; // FETCH_ALLOW_PRIVATE=false, FETCH_ALLOW_ADDRESSES=127.0.0.1, default throttle
let defaults: TestApp; // production defaults for fetching, authentication required

before(async () => {
  hs = await hashServer('127.0.0.1');
  uaSeen = lastUserAgents;
  internal = await hashServer('127.0.0.2');
  open = await startApp({ FETCH_ALLOW_PRIVATE: true, PING_MIN_INTERVAL: 0 });
  allowOne = await startApp({ FETCH_ALLOW_PRIVATE: false, FETCH_ALLOW_ADDRESSES: parseCidrList('127.0.0.1') });
  defaults = await startApp({ RSSPING_REQUIRE_AUTH: true });
});

after(async () => {
  for (const s of [hs, internal]) {
    s.server.closeAllConnections();
    await new Promise((r) => s.server.close(r));
  }
  await Promise.all([open?.close(), allowOne?.close(), defaults?.close()]);
});

let n = 0;
/** A site on the hash server's host, and a hash path for it. */
function site(s: HashServer = hs) {
  const id = `b${++n}`;
  return { siteUri: `${s.base}/${id}/`, hashPath: `/${id}/hash.txt`, hashUri: `${s.base}/${id}/hash.txt` };
}

const sha1 = (b: Buffer | string) => createHash('sha1').update(b).digest('hex');
const md5 = (b: Buffer | string) => createHash('md5').update(b).digest('hex');

async function post(t: TestApp, body: string | Buffer) {
  const res = await t.app.inject({ method: 'POST', url: '/rssping', headers: { 'content-type': 'text/xml' }, payload: body });
  return { ...readRssPingReply(res.statusCode, res.body), headers: res.headers };
}

const PAYLOAD = '\n<item><title>Signed</title><link>http://example.com/signed</link></item>\n';

test('a matching SHA1 of the payload bytes exactly as sent authenticates the ping (pingserver_side)', async () => {
  const s = site();
  hs.routes.set(s.hashPath, { body: sha1(PAYLOAD) });
  const r = await post(open, rssPing({ siteUri: s.siteUri, hashUri: s.hashUri, payload: PAYLOAD }));
  assert.deepEqual([r.status, r.flerror, r.authentication], [200, false, 'pingserver_side']);
  assert.equal(r.message, 'Thanks for the ping. Authenticated: pingserver_side (the SHA1 of the payload matches payload_hash_uri).');
  const [row] = await findPayloadsBySite(open.app.db, s.siteUri);
  assert.deepEqual([row.auth, row.payload_hash_uri], ['pingserver_side', s.hashUri]);
  assert.equal(hs.hits.filter((h) => h === s.hashPath).length, 1, 'one GET');
  assert.match(uaSeen[uaSeen.length - 1], new RegExp(`^pingd/${PINGD_VERSION.replace(/\./g, '\\.')}( \\(\\+https?://\\S+\\))?$`));
});

test('the trimmed payload also matches; the served digest is case-insensitive and may be surrounded by whitespace; gzip is fine', async () => {
  const s = site();
  hs.routes.set(s.hashPath, { body: `  ${sha1(PAYLOAD.trim()).toUpperCase()}\r\n` });
  const r = await post(open, rssPing({ siteUri: s.siteUri, hashUri: s.hashUri, payload: PAYLOAD }));
  assert.equal(r.authentication, 'pingserver_side', r.message);
  const z = site();
  hs.routes.set(z.hashPath, { body: zlib.gzipSync(sha1(PAYLOAD)), headers: { 'content-encoding': 'gzip' } });
  assert.equal((await post(open, rssPing({ siteUri: z.siteUri, hashUri: z.hashUri, payload: PAYLOAD }))).authentication, 'pingserver_side');
});

test('MD5 when the element says so, or when an MD5-sized digest is served without an algorithm attribute', async () => {
  const a = site();
  hs.routes.set(a.hashPath, { body: md5(PAYLOAD) });
  const r = await post(open, rssPing({ siteUri: a.siteUri, hashUri: a.hashUri, hashUriAttrs: ' algorithm="MD5"', payload: PAYLOAD }));
  assert.equal(r.message, 'Thanks for the ping. Authenticated: pingserver_side (the MD5 of the payload matches payload_hash_uri).');
  const b = site();
  hs.routes.set(b.hashPath, { body: md5(PAYLOAD) });
  assert.equal((await post(open, rssPing({ siteUri: b.siteUri, hashUri: b.hashUri, payload: PAYLOAD }))).authentication, 'pingserver_side');
  const c = site();
  hs.routes.set(c.hashPath, { body: md5(PAYLOAD) });
  const sha1Said = await post(
    open,
    rssPing({ siteUri: c.siteUri, hashUri: c.hashUri, hashUriAttrs: ' algorithm="SHA1"', payload: PAYLOAD }),
  );
  assert.equal(sha1Said.message, 'Thanks for the ping. Not authenticated: payload_hash_uri did not serve a SHA1 hex digest.');
});

test('a seed payload (inner XML declaration) and an ISO-8859-1 payload are hashed as the bytes sent', async () => {
  const s = site();
  const bytes = seed('seed-2-atom10-entry');
  const text = bytes
    .toString('latin1')
    .replace('<site_uri>http://photomatt.net</site_uri>', `<site_uri>${s.siteUri}</site_uri>`)
    .replace(
      '<payload_hash_uri>http://photomatt.net/edheuhdghgDDefweffd</payload_hash_uri>',
      `<payload_hash_uri>${s.hashUri}</payload_hash_uri>`,
    );
  const start = text.indexOf('>', text.indexOf('<payload ')) + 1;
  const raw = text.slice(start, text.lastIndexOf('</payload>'));
  assert.match(raw, /^\n\n<\?xml version="1\.0" encoding="utf-8"\?>\n<entry>/);
  hs.routes.set(s.hashPath, { body: sha1(raw) });
  assert.equal((await post(open, text)).authentication, 'pingserver_side');

  const l = site();
  const latin = `<item><title>Cr\u00e8me br\u00fbl\u00e9e</title><link>http://example.com/cb</link></item>`;
  hs.routes.set(l.hashPath, { body: sha1(Buffer.from(latin, 'latin1')) });
  assert.notEqual(sha1(Buffer.from(latin, 'latin1')), sha1(Buffer.from(latin, 'utf8')));
  const body = Buffer.from(
    rssPing({ siteUri: l.siteUri, hashUri: l.hashUri, payload: latin }).replace('encoding="utf-8"', 'encoding="iso-8859-1"'),
    'latin1',
  );
  const r = await post(open, body);
  assert.equal(r.authentication, 'pingserver_side', r.message);
  assert.equal((await findPayloadsBySite(open.app.db, l.siteUri))[0].headline, 'Crème brûlée');
});

test('a wrong hash is refused with 403 and nothing is stored', async () => {
  const s = site();
  hs.routes.set(s.hashPath, { body: sha1('something else') });
  const r = await post(open, rssPing({ siteUri: s.siteUri, hashUri: s.hashUri, payload: PAYLOAD }));
  assert.deepEqual(
    [r.status, r.flerror, r.message],
    [403, true, 'The SHA1 of the payload does not match the hash served at payload_hash_uri.'],
  );
  assert.equal(await findWeblog(open.app.db, s.siteUri), undefined);
});

test('a hash URI that cannot be used leaves the ping unauthenticated, and says why', async () => {
  const cases: [Route | 'off-site' | 'not-http', string][] = [
    [{ status: 404, body: 'nope' }, 'payload_hash_uri could not be fetched (HTTP 404)'],
    [{ status: 500, body: 'oops' }, 'payload_hash_uri could not be fetched (HTTP 500)'],
    [{ body: '<html><body>Welcome!</body></html>' }, 'payload_hash_uri did not serve a SHA1 hex digest'],
    [{ body: 'x'.repeat(5000) }, 'payload_hash_uri could not be fetched (the answer is larger than 4096 bytes)'],
    ['off-site', "payload_hash_uri is not on the site's host (localhost), so it was not fetched"],
    ['not-http', 'payload_hash_uri is not an http(s) URL'],
  ];
  for (const [route, note] of cases) {
    const s = site();
    let siteUri = s.siteUri;
    let hashUri = s.hashUri;
    if (route === 'off-site') siteUri = `http://localhost:${hs.port}/elsewhere-${n}/`;
    else if (route === 'not-http') hashUri = `ftp://127.0.0.1/${n}`;
    else hs.routes.set(s.hashPath, route);
    const hitsBefore = hs.hits.length;
    const r = await post(open, rssPing({ siteUri, hashUri, payload: PAYLOAD }));
    assert.deepEqual(
      [r.status, r.flerror, r.authentication, r.message],
      [200, false, 'none', `Thanks for the ping. Not authenticated: ${note}.`],
    );
    assert.equal((await findPayloadsBySite(open.app.db, siteUri))[0].auth, 'none');
    if (route === 'off-site' || route === 'not-http') assert.equal(hs.hits.length, hitsBefore, 'nothing fetched');
  }
});

test('an unreachable hash URI leaves the ping unauthenticated', async () => {
  const gone = http.createServer();
  await new Promise<void>((r) => gone.listen(0, '127.0.0.1', r));
  const port = (gone.address() as AddressInfo).port;
  await new Promise((r) => gone.close(r));
  const r = await post(open, rssPing({ siteUri: `http://127.0.0.1:${port}/`, hashUri: `http://127.0.0.1:${port}/hash`, payload: PAYLOAD }));
  assert.equal(r.message, 'Thanks for the ping. Not authenticated: payload_hash_uri could not be fetched (127.0.0.1: ECONNREFUSED).');
});

test('with private addresses refused, a hash URI that redirects to a private address is refused at the redirect', async () => {
  const internalSite = site(internal);
  internal.routes.set(internalSite.hashPath, { body: sha1(PAYLOAD) });
  const targets = [`${internal.base}${internalSite.hashPath}`, 'http://169.254.169.254/latest/meta-data/iam', `http://[::ffff:10.0.0.1]/`];
  const expected = [
    `127.0.0.2 is a loopback address, which this server does not connect to`,
    `169.254.169.254 is a cloud metadata address, which this server does not connect to`,
    `[::ffff:a00:1] is an IPv4-mapped private address, which this server does not connect to`,
  ];
  for (let i = 0; i < targets.length; i++) {
    const s = site();
    hs.routes.set(s.hashPath, { status: 302, headers: { location: targets[i] } });
    const r = await post(allowOne, rssPing({ siteUri: s.siteUri, hashUri: s.hashUri, payload: PAYLOAD }));
    assert.deepEqual([r.status, r.authentication], [200, 'none']);
    assert.equal(
      r.message,
      `Thanks for the ping. Not authenticated: payload_hash_uri could not be fetched (refused as unsafe: ${expected[i]}).`,
    );
    assert.ok(hs.hits.includes(s.hashPath), 'the allowed first hop was fetched');
  }
  assert.equal(internal.hits.length, 0, 'the private redirect target was never contacted');
});

test('with private addresses refused, a throttled rss_ping does not make us fetch again', async () => {
  const s = site();
  hs.routes.set(s.hashPath, { body: sha1(PAYLOAD) });
  assert.equal(
    (await post(allowOne, rssPing({ siteUri: s.siteUri, hashUri: s.hashUri, payload: PAYLOAD }))).authentication,
    'pingserver_side',
  );
  const again = await post(allowOne, rssPing({ siteUri: s.siteUri, hashUri: s.hashUri, payload: PAYLOAD }));
  assert.equal(again.status, 429);
  assert.ok(Number(again.headers['retry-after']) > 0);
  assert.equal(hs.hits.filter((h) => h === s.hashPath).length, 1);
});

test('production defaults: a hash URI on a private address is refused before connecting (and, auth required, the ping is 401)', async () => {
  const s = site(internal);
  internal.routes.set(s.hashPath, { body: sha1(PAYLOAD) });
  const r = await post(defaults, rssPing({ siteUri: s.siteUri, hashUri: s.hashUri, payload: PAYLOAD }));
  assert.deepEqual([r.status, r.flerror], [401, true]);
  assert.equal(
    r.message,
    'This server accepts only authenticated rss_pings (pingserver-side or publisher-side); not authenticated: payload_hash_uri could not be fetched (refused as unsafe: 127.0.0.2 is a loopback address, which this server does not connect to).',
  );
  assert.equal(internal.hits.length, 0);
});

test('hash helpers: trimming, digests, served digests, same site', () => {
  assert.deepEqual(trimBytes(Buffer.from(' \r\n\tx y\n ')), Buffer.from('x y'));
  assert.deepEqual(payloadDigests(Buffer.from('abc'), 'sha1'), [sha1('abc')]);
  assert.deepEqual(payloadDigests(Buffer.from('\nabc\n'), 'md5'), [md5('\nabc\n'), md5('abc')]);
  assert.equal(servedDigest(Buffer.from(` ${sha1('a').toUpperCase()}\n`)), sha1('a'));
  assert.equal(servedDigest(Buffer.from(`${sha1('a')} file.xml`)), null);
  assert.equal(sameSite('http://www.davidgalbraith.org/', new URL('http://davidgalbraith.org/h')), true);
  assert.equal(sameSite('http://photomatt.net/', new URL('https://PHOTOMATT.net:8443/h')), true);
  assert.equal(sameSite('http://victim.example/', new URL('http://attacker.example/h')), false);
  assert.equal(sameSite('http://example.com/', new URL('http://evil.example.com/h')), false);
});
