// The polled documents run no app-wide hook (operations/metrics/plugin.ts everyRoute; serve.ts answers the
// common 304 from a pre-built head): what those hooks did must still happen. Every answer carries its
// X-Request-Id, the latency histogram and the response counters still count a 304, a 304 from the
// pre-built head carries what the general path's 304 carries, and a list of tags or a weak tag still
// matches (RFC 9110 §13.1.2) through the general path.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, methodCall, uniqueUrl, type TestApp } from '../../helpers/app.js';

let t: TestApp;
before(async () => {
  t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 60_000 });
  await t.app.renderer.tick({});
});
after(() => t?.close());

const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

async function get(url: string, headers: Record<string, string> = {}) {
  return t.app.inject({ method: 'GET', url, headers });
}

async function metrics(): Promise<string> {
  return (await get('/metrics')).body;
}

function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

test('a 304 from the pre-built head carries the same headers as the general 304, and its own request id', async () => {
  const full = await get('/shortChanges.xml', { 'accept-encoding': 'gzip' });
  assert.equal(full.statusCode, 200);
  const etag = String(full.headers.etag);
  // Exact tag: the pre-built head. A list naming it: decided by conditional.ts. Both are 304s with the
  // validators, Cache-Control, Vary and Link a 200 carries (RFC 9110 §15.4.5).
  const fast = await get('/shortChanges.xml', { 'accept-encoding': 'gzip', 'if-none-match': etag });
  const general = await get('/shortChanges.xml', { 'accept-encoding': 'gzip', 'if-none-match': `"zz.zz", ${etag}` });
  for (const r of [fast, general]) {
    assert.equal(r.statusCode, 304);
    assert.equal(r.body, '');
    for (const h of ['etag', 'last-modified', 'cache-control', 'vary', 'link']) assert.equal(r.headers[h], full.headers[h], h);
    assert.match(String(r.headers['x-request-id']), ID);
    assert.equal(r.headers['content-encoding'], undefined);
  }
  assert.notEqual(fast.headers['x-request-id'], general.headers['x-request-id']);
});

test("a 304 with a list of tags, a weak tag, another coding's tag or * still matches", async () => {
  const full = await get('/changes.xml', { 'accept-encoding': 'gzip' });
  const gz = String(full.headers.etag);
  const identity = String((await get('/changes.xml')).headers.etag);
  for (const inm of [`W/${gz}`, `"a.b", ${gz}`, `${gz}, "a.b"`, identity, `W/${identity}`, '*', ` ${gz} `]) {
    const r = await get('/changes.xml', { 'accept-encoding': 'gzip', 'if-none-match': inm });
    assert.equal(r.statusCode, 304, inm);
    assert.equal(r.headers.etag, gz, `${inm}: the 304 names the coding it would have sent`);
  }
  // Not ours, or another rendering: the document itself.
  for (const inm of ['"a.b"', '"1.1-gz"', 'W/"zz"'])
    assert.equal((await get('/changes.xml', { 'accept-encoding': 'gzip', 'if-none-match': inm })).statusCode, 200, inm);
});

test('a 304 is still counted: latency per route and status, responses per document', async () => {
  const etag = String((await get('/shortChanges.xml')).headers.etag);
  const before = await metrics();
  const hist = 'pingd_http_request_duration_seconds_count{route="/shortChanges.xml",method="GET",status_code="304"}';
  const resp = 'pingd_publish_responses_total{document="shortChanges.xml",status="304"}';
  for (let i = 0; i < 3; i++) assert.equal((await get('/shortChanges.xml', { 'if-none-match': etag })).statusCode, 304);
  const text = await metrics();
  assert.equal(sample(text, hist), sample(before, hist) + 3);
  assert.equal(sample(text, resp), sample(before, resp) + 3);
  // The histogram's buckets are cumulative and end at the count.
  const inf = sample(
    text,
    'pingd_http_request_duration_seconds_bucket{le="+Inf",route="/shortChanges.xml",method="GET",status_code="304"}',
  );
  assert.equal(inf, sample(text, hist));
  assert.ok(sample(text, 'pingd_http_request_duration_seconds_sum{route="/shortChanges.xml",method="GET",status_code="304"}') > 0);
});

test('X-Request-Id on every kind of answer: documents (200, 304, 400, archive 404), pings, 404s, /metrics; all distinct', async () => {
  const etag = String((await get('/changes.xml')).headers.etag);
  const answers = [
    await get('/changes.xml'),
    await get('/changes.xml', { 'if-none-match': etag }),
    await get('/changes.xml?since=nope'),
    await get(`/changes.xml?since=${'a'.repeat(100)}`),
    await get('/2001/02/30/10.xml'),
    await get('/no/such/path'),
    await get('/metrics'),
    await get('/healthz'),
    await t.app.inject({
      method: 'POST',
      url: '/RPC2',
      headers: { 'content-type': 'text/xml' },
      payload: methodCall('weblogUpdates.ping', ['Ids', uniqueUrl('ids')]),
    }),
  ];
  assert.deepEqual(
    answers.map((r) => r.statusCode),
    [200, 304, 400, 400, 404, 404, 200, 200, 200],
  );
  const ids = answers.map((r) => String(r.headers['x-request-id']));
  for (const id of ids) assert.match(id, ID);
  assert.equal(new Set(ids).size, ids.length);
});

test('an over-long or over-repeated ?since= is refused with 400 and counted, as the schema did before', async () => {
  const before = sample(await metrics(), 'pingd_publish_responses_total{document="changes.xml",status="400"}');
  const long = await get(`/changes.xml?since=${'a'.repeat(65)}`);
  assert.equal(long.statusCode, 400);
  assert.match(long.body, /since must be a cursor/);
  const repeated = await get(`/changes.xml?${Array.from({ length: 21 }, () => 'since=1.1').join('&')}`);
  assert.equal(repeated.statusCode, 400);
  assert.equal(sample(await metrics(), 'pingd_publish_responses_total{document="changes.xml",status="400"}'), before + 2);
  // A document without deltas refuses an over-long one too (every live document had the schema).
  assert.equal((await get(`/shortChanges.xml?since=${'a'.repeat(65)}`)).statusCode, 400);
});
