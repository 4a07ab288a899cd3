// What an attacker can reach: the HTTP surface is exactly the public endpoints plus the operator API (only
// with ADMIN_TOKEN, or over the admin socket), publisher passwords are never stored readable, and RSS Ping
// publisher endpoints work once.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { startApp, type TestApp } from '../helpers/app.js';
import { addPublisher, findPublisher } from '../../src/intake/rss-ping/publisher-repository.js';
import { deriveKey, openPassword, sealPassword, SecretBoxError } from '../../src/intake/rss-ping/secret-box.js';

const SECRET = 'surface-test-secret-0123456789abcdef';
const ADMIN_TOKEN = 'surface-admin-token-0123456789';
let t: TestApp;
before(async () => {
  t = await startApp({ RSSPING_SECRET: SECRET, RSSPING_VERIFY_HASH_URI: false, ADMIN_TOKEN });
});
after(async () => {
  await t.close();
});

// Every route pingd serves over HTTP. Adding one is a decision: if it administers anything, it needs the
// ADMIN_TOKEN treatment (bearer token, constant-time comparison) and a test of its own.
const PUBLIC_ROUTES = new Set([
  'GET /',
  'POST /',
  'POST /RPC2',
  'POST /rpc2',
  'GET /ping',
  'GET /pingSiteForm',
  'POST /rssping',
  'POST /rssping/:endpoint',
  'GET /rssping/token',
  'GET /changes.xml',
  'GET /shortChanges.xml',
  'GET /updates.xml',
  'GET /:year(^\\d{4})/:month(^\\d{2})/:day(^\\d{2})/:hour(^\\d{2}).xml',
  'GET /healthz',
  'GET /readyz',
  'GET /metrics',
  // What verification knows of one weblog: read-only, public data (what its own feed and pings say).
  'GET /api/weblogs',
  // Push: the live stream of what intake accepted (the same data as changes.xml, sooner), its published
  // limits (settings, the ends of the kept log, a count of connections: nothing a client could not learn
  // from the stream itself), and WebSub subscription requests (each verified with the subscriber's own
  // callback before anything is stored).
  'GET /stream',
  'GET /stream/info',
  'POST /websub',
  // rssCloud: a ping (intake's path and screens) and subscription requests (bounded per client, per
  // endpoint host and in all before any request; each feed probed and each endpoint checked first).
  'POST /rsscloud/ping',
  'POST /rsscloud/pleaseNotify',
  // Pages for people and the numbers behind the status page: read-only counts, hosts and weblogs that
  // pinged (what changes.xml publishes anyway), documents' ages, queue depths; the pages' static files.
  'GET /weblog',
  'GET /status',
  'GET /api/stats',
  'GET /assets/:file',
]);

// The operator's: every `pingd` command, and the subscriptions' callbacks and delivery health (open to
// anyone until it moved behind ADMIN_TOKEN).
const ADMIN_ROUTES = new Set(['POST /api/admin/cli', 'GET /api/admin/websub/subscriptions', 'GET /api/websub/subscriptions']);

test('the HTTP surface is exactly the public endpoints and the operator API', async () => {
  const routes: string[] = [];
  // printRoutes draws the radix tree: a node's path is its ancestors' segments and its own (4 columns of
  // indentation per level). HEAD routes mirror GET ones.
  const text = t.app.printRoutes({ commonPrefix: false });
  const stack: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^([│ ]*)[└├]── (.+?)(?: \(([^)]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1].length / 4;
    stack.length = depth;
    const path = (stack[depth - 1] ?? '') + m[2];
    stack.push(path);
    for (const method of (m[3] ?? '').split(', ').filter(Boolean)) if (method !== 'HEAD') routes.push(`${method} ${path}`);
  }
  assert.ok(routes.length >= 10, text);
  const unexpected = routes.filter((r) => !PUBLIC_ROUTES.has(r) && !ADMIN_ROUTES.has(r));
  assert.deepEqual(unexpected, [], `routes not reviewed as public: ${unexpected.join(', ')}`);
  assert.deepEqual(routes.filter((r) => ADMIN_ROUTES.has(r)).sort(), [...ADMIN_ROUTES].sort());
});

test('the operator API answers nobody without ADMIN_TOKEN: 401 without it or with a wrong one', async () => {
  for (const route of ADMIN_ROUTES) {
    const [method, url] = route.split(' ') as ['GET' | 'POST', string];
    const payload = method === 'POST' ? { argv: ['stats'] } : undefined;
    for (const authorization of [undefined, 'Bearer surface-admin-token-012345678', `Bearer ${ADMIN_TOKEN}x`, ADMIN_TOKEN]) {
      const r = await t.app.inject({ method, url, payload, headers: authorization ? { authorization } : {} });
      assert.equal(r.statusCode, 401, `${route} with ${authorization}`);
      assert.equal(r.json().error, 'ADMIN_UNAUTHORIZED');
    }
    const ok = await t.app.inject({ method, url, payload, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.equal(ok.statusCode, 200, `${route}: ${ok.body}`);
  }
});

test('publisher passwords are stored sealed (AES-GCM under a key derived from RSSPING_SECRET), never readable', async () => {
  const key = deriveKey(SECRET);
  const password = 'correct horse battery staple';
  const site = 'http://sealed.example.com/';
  await addPublisher(t.app.db, site, sealPassword(key, site, password));
  const [raw] = await t.app.db.query<{ password_sealed: Uint8Array }>(
    'select password_sealed from rssping_publishers where site_url = $1',
    [site],
  );
  const bytes = Buffer.from(raw.password_sealed);
  assert.ok(!bytes.includes(Buffer.from(password)), 'the password is not in the row');
  assert.ok(!bytes.toString('latin1').includes('horse'));
  const row = await findPublisher(t.app.db, site);
  assert.equal(openPassword(key, site, row!.password_sealed), password);
  assert.throws(
    () => openPassword(deriveKey('another-secret-0123456789abcdefghij'), site, row!.password_sealed),
    SecretBoxError,
    'another key cannot open it',
  );
  assert.throws(() => openPassword(key, 'http://other.example.com/', row!.password_sealed), SecretBoxError, 'bound to its site');
});

test('a publisher endpoint works once: replaying it is refused, as is a made-up one', async () => {
  const key = deriveKey(SECRET);
  const password = 'pw-for-replay';
  const site = 'http://replay.example.com/';
  await addPublisher(t.app.db, site, sealPassword(key, site, password));
  const tok = await t.app.inject({ method: 'GET', url: `/rssping/token?site_uri=${encodeURIComponent(site)}` });
  assert.equal(tok.statusCode, 200, tok.body);
  const endpoint = createHash('sha1')
    .update(site + password + tok.body)
    .digest('hex');
  const doc = (n: number) =>
    `<rss_ping version=2><site_name>Replay</site_name><site_uri>${site}</site_uri><feed_uri type="RSS 2.0">${site}feed</feed_uri><payload type="RSS 2.0"><item><title>T${n}</title><link>${site}p${n}</link></item></payload></rss_ping>`;
  const first = await t.app.inject({ method: 'POST', url: `/rssping/${endpoint}`, payload: doc(1) });
  assert.equal(first.statusCode, 200, first.body);
  assert.match(first.body, /<authentication>publisher_side<\/authentication>/);
  const replay = await t.app.inject({ method: 'POST', url: `/rssping/${endpoint}`, payload: doc(2) });
  assert.equal(replay.statusCode, 401);
  assert.match(replay.body, /already used endpoint/);
  const forged = await t.app.inject({
    method: 'POST',
    url: `/rssping/${createHash('sha1')
      .update(site + 'guess' + tok.body)
      .digest('hex')}`,
    payload: doc(3),
  });
  assert.equal(forged.statusCode, 401);
});
