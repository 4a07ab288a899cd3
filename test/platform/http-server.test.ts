// The HTTP server under Fastify: a poll of a published document naming its current ETag is answered before
// Fastify, with exactly the head Fastify's route answers (validators, Cache-Control, Vary, Link), its own
// request id, and the same metrics; everything else (another ETag, a query string, POST, a request without
// Host, every request while requests are logged) still reaches Fastify. The server keeps Fastify's timeouts.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startApp, type TestApp } from '../helpers/app.js';
import { EarlyAnswers } from '../../src/platform/http-server.js';

const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Headers the HTTP server itself adds to every answer, or that differ per request by design. */
const PER_REQUEST = new Set(['date', 'connection', 'keep-alive', 'x-request-id']);

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A real HTTP request on loopback (Node's client, raw header values). */
function request(base: string, path: string, headers: Record<string, string>, method = 'GET'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const stable = (h: http.IncomingHttpHeaders | Record<string, unknown>) =>
  Object.fromEntries(
    Object.entries(h)
      .filter(([k]) => !PER_REQUEST.has(k))
      .sort(([a], [b]) => a.localeCompare(b)),
  );

async function count304(t: TestApp, route: string, method = 'GET'): Promise<number> {
  const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
  const series = `pingd_http_request_duration_seconds_count{route="${route}",method="${method}",status_code="304"}`;
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

describe('early answers', () => {
  let t: TestApp;
  let base: string;
  let etag: string;
  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 60_000 });
    await t.app.renderer.tick({});
    base = await t.listen();
    etag = String((await request(base, '/shortChanges.xml', { 'accept-encoding': 'gzip' })).headers.etag);
  });
  after(() => t.close());

  test("a poll naming the current ETag: the route's 304 head, its own request id, counted once", async () => {
    const headers = { 'accept-encoding': 'gzip', 'if-none-match': etag, host: 'polls.example.net:8080' };
    const before = await count304(t, '/shortChanges.xml');
    const written = t.app.earlyAnswers.written;
    const early = await request(base, '/shortChanges.xml', headers);
    assert.equal(t.app.earlyAnswers.written, written + 1, 'answered before Fastify');
    // The same request through Fastify's route (inject does not go through the HTTP server).
    const routed = await t.app.inject({ method: 'GET', url: '/shortChanges.xml', headers });
    assert.equal(early.status, 304);
    assert.equal(routed.statusCode, 304);
    assert.equal(early.body, '');
    assert.deepEqual(stable(early.headers), stable(routed.headers));
    assert.equal(
      early.headers.link,
      '<http://polls.example.net:8080/websub>; rel="hub", <http://polls.example.net:8080/shortChanges.xml>; rel="self"',
    );
    assert.match(String(early.headers['x-request-id']), ID);
    assert.notEqual(early.headers['x-request-id'], routed.headers['x-request-id']);
    assert.equal(await count304(t, '/shortChanges.xml'), before + 2, 'the early 304 and the routed one');
    const head = await request(base, '/shortChanges.xml', headers, 'HEAD');
    assert.equal(head.status, 304);
    assert.deepEqual(stable(head.headers), stable(early.headers));
    assert.equal(await count304(t, '/shortChanges.xml', 'HEAD'), 1);
  });

  test('what is not such a poll reaches Fastify, which answers as before', async () => {
    const written = t.app.earlyAnswers.written;
    const other = await request(base, '/shortChanges.xml', { 'accept-encoding': 'gzip', 'if-none-match': '"1.1-gz"' });
    assert.equal(other.status, 200);
    // A query string: ?since= is the route's (a bad cursor is its plain-text 400).
    const since = await request(base, '/shortChanges.xml?since=not-a-cursor', { 'accept-encoding': 'gzip', 'if-none-match': etag });
    assert.equal(since.status, 400);
    assert.match(since.body, /^since must be a cursor/);
    const post = await request(base, '/shortChanges.xml', { 'if-none-match': etag }, 'POST');
    assert.equal(post.status, 404);
    assert.match(String(post.headers['x-request-id']), ID);
    assert.equal(t.app.earlyAnswers.written, written);
  });

  test('the server keeps the timeouts Fastify would have set', () => {
    const s = t.app.server as http.Server;
    assert.equal(s.keepAliveTimeout, 65_000);
    assert.equal(s.requestTimeout, t.config.REQUEST_TIMEOUT_MS);
    assert.equal(s.headersTimeout, Math.min(60_000, t.config.REQUEST_TIMEOUT_MS));
    assert.equal(s.timeout, 0);
  });
});

test('while every request is logged (LOG_LEVEL=debug) no early answer is written', async () => {
  const t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 60_000, LOG_LEVEL: 'debug' });
  try {
    assert.equal(t.app.earlyAnswers.enabled, false);
  } finally {
    await t.close();
  }
});

test('EarlyAnswers: exact URL, GET and HEAD only, one answer per URL', () => {
  const early = new EarlyAnswers(() => 'id');
  const written: number[] = [];
  early.add('/a.xml', { decide: () => ({ status: 304, head: { etag: '"x"' } }), answered: (_r, s) => written.push(s) });
  assert.throws(() => early.add('/a.xml', { decide: () => null }), /exists/);
  const res = () => {
    const r = { headers: {} as Record<string, unknown>, status: 0, ended: false };
    return Object.assign(r, {
      setHeader: (k: string, v: unknown) => void (r.headers[k] = v),
      writeHead: (s: number, h: Record<string, string>) => void ((r.status = s), Object.assign(r.headers, h)),
      end: () => void (r.ended = true),
    });
  };
  const req = (method: string, url: string) => ({ method, url, headers: {} }) as unknown as http.IncomingMessage;
  for (const [m, u, want] of [
    ['GET', '/a.xml', true],
    ['HEAD', '/a.xml', true],
    ['POST', '/a.xml', false],
    ['GET', '/a.xml?x=1', false],
    ['GET', '/b.xml', false],
  ] as const) {
    const r = res();
    assert.equal(early.answer(req(m, u), r as unknown as http.ServerResponse), want, `${m} ${u}`);
    if (want) assert.deepEqual([r.status, r.headers, r.ended], [304, { 'x-request-id': 'id', etag: '"x"' }, true]);
  }
  assert.deepEqual(written, [304, 304]);
});
