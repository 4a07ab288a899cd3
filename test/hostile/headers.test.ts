// A stranger's headers and query strings against every pattern they meet. Regression first: the Bearer
// checks of the operator API and GET /metrics matched `/^Bearer\s+(.+?)\s*$/i`, which backtracked
// quadratically over a run of spaces (313 ms of event loop for one 16 KB header; a few such requests a
// second froze intake, issue 43). Then a pump: every header pingd reads and every query parameter, each
// filled with one token repeated far past Node's 16 KiB header limit, on every route that reads it. Like
// redos.test.ts these are hang detectors: a super-linear pattern runs minutes past the test's timeout on
// these sizes, a linear one milliseconds (a pattern holds the event loop, so a test's timeout fires only once
// it lets go: the sizes are chosen so that the old code fails within minutes, not hours). The lint rule `regexp/no-super-linear-*` (eslint.config.js)
// keeps new patterns linear; this keeps what reaches them honest.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, type TestApp } from '../helpers/app.js';
import { bearerToken, bearerCheck } from '../../src/platform/bearer.js';
import { ADMIN_REFUSALS } from '../../src/platform/admin-auth.js';

const ADMIN_TOKEN = 'admin-token-0123456789abcdef';
const METRICS_TOKEN = 'metrics-token-0123456789';
const METRICS_REFUSAL = 'GET /metrics needs the METRICS_TOKEN: send "Authorization: Bearer <token>".\n';

let t: TestApp;
let base: string;
before(async () => {
  t = await startApp({ ADMIN_TOKEN, METRICS_TOKEN, TRUST_PROXY: 1 });
  base = await t.listen();
  // The documents rendered, so that polls reach the conditional-request code rather than a 503.
  await t.app.renderer.tick({});
});
after(async () => {
  await t.close();
});

/** The attack of issue 43: `Bearer a`, spaces, `b`. */
const spaced = (n: number) => `Bearer a${' '.repeat(n)}b`;

test('bearerToken reads the token the old pattern read, and nothing else', () => {
  for (const [header, token] of [
    ['Bearer abc', 'abc'],
    ['bearer abc', 'abc'],
    ['BEARER\tabc  ', 'abc'],
    ['Bearer    a b  ', 'a b'],
    ['Bearer\u00a0abc\u3000', 'abc'],
    ['Bearer', undefined],
    ['Bearer ', undefined],
    ['Bearer      ', undefined],
    ['Bearerabc', undefined],
    ['Basic abc', undefined],
    ['', undefined],
    [undefined, undefined],
  ] as const) {
    assert.equal(bearerToken(header), token, JSON.stringify(header));
  }
  // A header longer than any token it could carry is refused unread.
  assert.equal(bearerToken(`Bearer ${'x'.repeat(5000)}`), undefined);
  const check = bearerCheck('s3cret-token-of-some-length');
  assert.equal(check('Bearer s3cret-token-of-some-length'), true);
  assert.equal(check('bearer   s3cret-token-of-some-length \t'), true);
  assert.equal(check('Bearer s3cret-token-of-some-lengtH'), false);
  assert.equal(check(spaced(16_000)), false);
});

test(
  '200 requests with a 16 KB "Bearer a<spaces>b" header over HTTP are each refused (old code: 79-313 ms each)',
  { timeout: 30_000 },
  async () => {
    const authorization = spaced(16_000);
    const started = performance.now();
    for (let i = 0; i < 100; i++) {
      const admin = await fetch(`${base}/api/admin/websub/subscriptions`, { headers: { authorization } });
      assert.equal(admin.status, 401);
      assert.deepEqual(await admin.json(), { error: 'ADMIN_UNAUTHORIZED', message: ADMIN_REFUSALS.denied });
      const metrics = await fetch(`${base}/metrics`, { headers: { authorization } });
      assert.equal(metrics.status, 401);
      assert.equal(await metrics.text(), METRICS_REFUSAL);
    }
    // The pattern held the event loop 79-313 ms per request (16-63 s for these 200); a scan, ~1 ms each.
    const ms = performance.now() - started;
    assert.ok(ms < 8000, `200 refusals took ${Math.round(ms)} ms`);
    // And the right tokens still pass, with the spacing clients send.
    const ok = await fetch(`${base}/metrics`, { headers: { authorization: `bearer  ${METRICS_TOKEN} ` } });
    assert.equal(ok.status, 200);
    await ok.arrayBuffer();
    const adminOk = await fetch(`${base}/api/admin/websub/subscriptions`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.notEqual(adminOk.status, 401);
    await adminOk.arrayBuffer();
  },
);

test(
  'a 256 KiB "Bearer a<spaces>b" header is refused with the exact 401s (the pattern, quadratic: ~21 s each)',
  { timeout: 30_000 },
  async () => {
    const authorization = spaced(256 * 1024);
    const started = performance.now();
    const admin = await t.app.inject({ method: 'GET', url: '/api/admin/websub/subscriptions', headers: { authorization } });
    assert.equal(admin.statusCode, 401);
    assert.deepEqual(admin.json(), { error: 'ADMIN_UNAUTHORIZED', message: ADMIN_REFUSALS.denied });
    const metrics = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization } });
    assert.equal(metrics.statusCode, 401);
    assert.equal(metrics.body, METRICS_REFUSAL);
    // The pattern took 21 s of event loop for each of these two; a node:test timeout cannot interrupt it.
    const ms = performance.now() - started;
    assert.ok(ms < 5000, `two refusals took ${Math.round(ms)} ms`);
  },
);

/** Each token a pattern might loop on: whitespace, separators of lists, parameters, quotes and URLs. */
const TOKENS = [' ', '\t', ',', ';', '=', '"', 'a', '/', '%', 'W/"x",', 'gzip;q=1,'];
const PUMPED = 128 * 1024;
/** One token repeated, then a character no pattern expects: a backtracking pattern fails only at the end. */
const pump = (token: string) => `${token.repeat(Math.ceil(PUMPED / token.length))}!`;
/** What a header's parser looks for first, so that the pumped run reaches the pattern behind it. */
const PREFIX: Record<string, string> = { authorization: 'Bearer a', 'if-none-match': 'W/"', 'a-im': 'feed, ', 'last-event-id': '1' };
/** A linear answer takes milliseconds; a quadratic pattern over 128 KiB takes seconds (64x the 16 KB cost: 5 s for the Bearer pattern). */
const ANSWER_BOUND_MS = 2000;

/** Every header pingd or Fastify reads off a request, with the requests that read it. */
const HEADER_TARGETS: Record<string, { method: 'GET' | 'POST'; url: string; body?: string; type?: string }[]> = {};
const rpcBody =
  '<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName><params><param><value>n</value></param><param><value>http://pump.example.com/</value></param></params></methodCall>';
const ROUTES = [
  { method: 'GET', url: '/changes.xml' },
  { method: 'GET', url: '/shortChanges.xml' },
  { method: 'GET', url: '/updates.xml' },
  { method: 'GET', url: '/stream?since=0&until=live' },
  { method: 'GET', url: '/stream/info' },
  { method: 'POST', url: '/RPC2', body: rpcBody, type: 'text/xml' },
  { method: 'GET', url: '/pingSiteForm?name=n&url=http%3A%2F%2Fpump-form.example.com%2F' },
  {
    method: 'POST',
    url: '/websub',
    body: 'hub.mode=publish&hub.url=http%3A%2F%2Fpump-websub.example.com%2F',
    type: 'application/x-www-form-urlencoded',
  },
  {
    method: 'POST',
    url: '/rsscloud/ping',
    body: 'url=http%3A%2F%2Fpump-cloud.example.com%2Ffeed',
    type: 'application/x-www-form-urlencoded',
  },
  { method: 'GET', url: '/' },
  { method: 'GET', url: '/weblog?url=http%3A%2F%2Fpump.example.com%2F' },
  { method: 'GET', url: '/api/weblogs?url=http%3A%2F%2Fpump.example.com%2F' },
  { method: 'GET', url: '/api/admin/websub/subscriptions' },
  { method: 'GET', url: '/metrics' },
] as const;
for (const h of [
  'authorization',
  'accept',
  'accept-encoding',
  'if-none-match',
  'if-modified-since',
  'a-im',
  'last-event-id',
  'user-agent',
  'x-forwarded-for',
  'x-request-id',
  'cookie',
  'content-type',
]) {
  HEADER_TARGETS[h] = [...ROUTES];
}

test('every header pumped to 128 KiB of one token, on every route: each answered, none with a 5xx', { timeout: 120_000 }, async () => {
  let answered = 0;
  for (const [name, targets] of Object.entries(HEADER_TARGETS)) {
    for (const token of TOKENS) {
      const value = (PREFIX[name] ?? '') + pump(token);
      for (const r of targets) {
        const headers: Record<string, string> = { [name]: value };
        if (r.type && name !== 'content-type') headers['content-type'] = r.type;
        const started = performance.now();
        const res = await t.app.inject({ method: r.method, url: r.url, headers, payload: r.body });
        const ms = performance.now() - started;
        const what = `${r.method} ${r.url} with ${name}: ${JSON.stringify(token)}…`;
        assert.ok(res.statusCode < 500, `${what} answered ${res.statusCode}: ${res.body.slice(0, 200)}`);
        assert.ok(ms < ANSWER_BOUND_MS, `${what} took ${Math.round(ms)} ms`);
        answered++;
      }
    }
  }
  assert.equal(answered, Object.values(HEADER_TARGETS).reduce((n, ts) => n + ts.length, 0) * TOKENS.length);
});

test('every query parameter pumped to 128 KiB of one token: each answered, none with a 5xx', { timeout: 120_000 }, async () => {
  const params: Record<string, string[]> = {
    '/changes.xml': ['since'],
    '/shortChanges.xml': ['since'],
    '/stream': ['since', 'host', 'tag', 'types', 'method', 'outcome', 'until', 'mode'],
    '/pingSiteForm': ['name', 'url', 'changesURL', 'rssURL'],
    '/weblog': ['url'],
    '/api/weblogs': ['url'],
  };
  let answered = 0;
  for (const [path, names] of Object.entries(params)) {
    for (const name of names) {
      for (const token of TOKENS) {
        const query = new URLSearchParams({ [name]: pump(token) });
        if (path === '/stream' && name !== 'since') query.set('since', '0');
        if (path === '/stream') query.set('until', name === 'until' ? query.get('until')! : 'live');
        if (path === '/pingSiteForm' && name !== 'url') query.set('url', 'http://pump-query.example.com/');
        if (path === '/pingSiteForm' && name !== 'name') query.set('name', 'n');
        const started = performance.now();
        const res = await t.app.inject({ method: 'GET', url: `${path}?${query}` });
        const ms = performance.now() - started;
        const what = `${path} with ${name}=${JSON.stringify(token)}…`;
        assert.ok(res.statusCode < 500, `${what} answered ${res.statusCode}: ${res.body.slice(0, 200)}`);
        assert.ok(ms < ANSWER_BOUND_MS, `${what} took ${Math.round(ms)} ms`);
        answered++;
      }
    }
  }
  assert.equal(answered, Object.values(params).reduce((n, ps) => n + ps.length, 0) * TOKENS.length);
});
