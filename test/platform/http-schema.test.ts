// Route schemas: every querystring, params and JSON reply has one, so input no handler could use is refused
// by Fastify with a 400 before any handler runs, and JSON replies have a documented shape.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, type TestApp } from '../helpers/app.js';
import { MAX_REPEATS, firstParam } from '../../src/platform/http-schema.js';

let t: TestApp;
before(async () => {
  t = await startApp({ RSSPING_SECRET: 'x'.repeat(40) });
});
after(async () => {
  await t.close();
});

const get = (url: string) => t.app.inject({ method: 'GET', url });

test('firstParam takes the first spelling present, and the first of a repeated parameter', () => {
  assert.equal(firstParam({ blogurl: 'b', url: ['a', 'c'] }, 'url', 'blogurl'), 'a');
  assert.equal(firstParam({ blogurl: 'b' }, 'url', 'blogurl'), 'b');
  assert.equal(firstParam({ url: [] }, 'url'), null);
  assert.equal(firstParam({}, 'url'), null);
});

test('GET /pingSiteForm: a field longer than any valid one is refused by the schema with a 400', async () => {
  const res = await get(`/pingSiteForm?name=x&url=${encodeURIComponent(`http://example.com/${'a'.repeat(8200)}`)}`);
  assert.equal(res.statusCode, 400);
  assert.equal(res.json().code, 'FST_ERR_VALIDATION');
  assert.match(res.json().message, /querystring\/url must NOT have more than 8192 characters/);
});

test('GET /pingSiteForm: a parameter repeated more than MAX_REPEATS times is refused with a 400', async () => {
  const url = uniqueUrl('repeat');
  const qs = Array.from({ length: MAX_REPEATS + 1 }, () => `url=${encodeURIComponent(url)}`).join('&');
  const res = await get(`/pingSiteForm?name=x&${qs}`);
  assert.equal(res.statusCode, 400);
  assert.equal(res.json().code, 'FST_ERR_VALIDATION');
  // Repeated within the bound, the first value is the one used, as before.
  const ok = await get(`/pingSiteForm?name=x&url=${encodeURIComponent(url)}&url=${encodeURIComponent('http://other.example/')}`);
  assert.equal(ok.statusCode, 200);
  assert.match(ok.body, new RegExp(url.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')));
});

// The documents' routes check ?since= in the handler (no querystring schema runs on every poll), with the same
// bounds, and refuse in their own plain-text form.
test("GET /changes.xml?since=: a value far longer than a cursor is refused with a 400 in the document's own text form", async () => {
  const res = await get(`/changes.xml?since=${'a'.repeat(65)}`);
  assert.equal(res.statusCode, 400);
  assert.match(res.headers['content-type'] as string, /^text\/plain/);
  assert.equal(
    res.body,
    'since must be a cursor taken from this document\'s ETag (the text between the quotes, without any "-gz"/"-br" suffix).\n',
  );
});

test("GET /rssping/token: an absurd site_uri is refused with a 400 in the route's own text form", async () => {
  const res = await get(`/rssping/token?site_uri=${'a'.repeat(8200)}`);
  assert.equal(res.statusCode, 400);
  assert.match(res.body, /querystring\/site_uri must NOT have more than 8192 characters/);
});

test('GET /healthz and /readyz answer the documented JSON shape, and nothing more', async () => {
  const h = await get('/healthz');
  assert.equal(h.statusCode, 200);
  assert.deepEqual(Object.keys(h.json()).sort(), ['status', 'uptimeSeconds']);
  assert.equal(h.json().status, 'ok');
  assert.ok(Number.isInteger(h.json().uptimeSeconds));
  const r = await get('/readyz');
  assert.equal(r.statusCode, 200);
  assert.deepEqual(r.json(), { status: 'ok', database: t.config.DATABASE_URL ? 'postgres' : 'pglite' });
});
