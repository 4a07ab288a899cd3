// SafeFetcher.post (WebSub content distribution) against a real server on loopback: the same address
// checks as get() (names resolving to private addresses, literal addresses), the exact bytes and headers
// arrive, no redirect is followed, and a long answer is cut short instead of failing the request.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SafeFetcher, FetchError } from '../../../src/platform/fetch/safe-fetch.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';
import { userAgent } from '../../../src/platform/fetch/user-agent.js';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

const HOST = '127.0.0.30';
const seen: Seen[] = [];
let routes: Record<string, (res: http.ServerResponse) => void> = {};
const server = http.createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(parts) });
    (routes[req.url ?? ''] ?? ((r: http.ServerResponse) => r.writeHead(204).end()))(res);
  });
});
await new Promise<void>((r) => server.listen(0, HOST, r));
const origin = `http://${HOST}:${(server.address() as AddressInfo).port}`;
after(() => new Promise<void>((r) => server.close(() => r())));

const UA = userAgent('https://ops.example.org/pingd');
const allowed = new SafeFetcher({ policy: { allowPrivate: false, allow: parseCidrList('127.0.0.30/32') }, userAgent: UA, timeoutMs: 5000 });
const strict = new SafeFetcher({ userAgent: UA, timeoutMs: 5000, lookup: async () => ['10.1.2.3'] });

async function refused(p: Promise<unknown>, code: string, message: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof FetchError, String(err));
    assert.equal(err.code, code);
    assert.match(err.message, message);
    return true;
  });
}

test("a POST carries the exact bytes, the content type, the caller's headers and the User-Agent", async () => {
  seen.length = 0;
  const body = Buffer.from('<?xml version="1.0"?>\n<weblogUpdates version="1" count="1">é</weblogUpdates>\n', 'utf8');
  const r = await allowed.post(`${origin}/cb?x=1`, {
    body,
    contentType: 'text/xml; charset=utf-8',
    headers: { link: '<http://h/websub>; rel="hub"', 'x-hub-signature': 'sha256=ab' },
  });
  assert.equal(r.status, 204);
  assert.equal(r.address, HOST);
  assert.equal(seen.length, 1);
  const s = seen[0];
  assert.equal(s.method, 'POST');
  assert.equal(s.url, '/cb?x=1');
  assert.deepEqual(s.body, body);
  assert.equal(s.headers['content-type'], 'text/xml; charset=utf-8');
  assert.equal(s.headers['content-length'], String(body.length));
  assert.equal(s.headers['user-agent'], UA);
  assert.equal(s.headers.link, '<http://h/websub>; rel="hub"');
  assert.equal(s.headers['x-hub-signature'], 'sha256=ab');
});

test('a name that resolves to a private address is refused before any connection', async () => {
  seen.length = 0;
  await refused(
    strict.post('http://callback.example/cb', { body: Buffer.from('x'), contentType: 'text/plain' }),
    'FETCH_ADDRESS_BLOCKED',
    /callback\.example resolves to 10\.1\.2\.3/,
  );
  assert.equal(seen.length, 0);
});

test('a literal loopback address is refused (undici-style clients skip the lookup hook for literals; we do not)', async () => {
  seen.length = 0;
  await refused(
    strict.post(`${origin}/cb`, { body: Buffer.from('x'), contentType: 'text/plain' }),
    'FETCH_ADDRESS_BLOCKED',
    /127\.0\.0\.30 is an? .*address/,
  );
  assert.equal(seen.length, 0);
});

test('no redirect is followed: the 3xx comes back as the answer and its target is never asked', async () => {
  seen.length = 0;
  routes = { '/moved': (res) => res.writeHead(307, { location: `${origin}/elsewhere` }).end() };
  const r = await allowed.post(`${origin}/moved`, { body: Buffer.from('x'), contentType: 'text/plain' });
  assert.equal(r.status, 307);
  assert.deepEqual(r.redirects, []);
  assert.deepEqual(
    seen.map((s) => s.url),
    ['/moved'],
  );
});

test('a long answer is read only up to maxBytes, and the request still succeeds', async () => {
  routes = { '/chatty': (res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(Buffer.alloc(200_000, 97)) };
  const r = await allowed.post(`${origin}/chatty`, { body: Buffer.from('x'), contentType: 'text/plain', maxBytes: 100 });
  assert.equal(r.status, 200);
  assert.equal(r.body.length, 100);
  assert.equal(r.body.toString(), 'a'.repeat(100));
});

test('a URL with credentials is refused like a GET', async () => {
  await refused(
    allowed.post(`http://u:p@${HOST}/cb`, { body: Buffer.from('x'), contentType: 'text/plain' }),
    'FETCH_URL_INVALID',
    /user name or password/,
  );
});

/** A server on its own address that counts connections and can hang up on a connection's nth request. */
async function countingServer(address: string, hangUpOnRequest?: number) {
  let connections = 0;
  let requests = 0;
  const perSocket = new WeakMap<object, number>();
  const s = http.createServer((req, res) => {
    requests++;
    const nth = (perSocket.get(req.socket) ?? 0) + 1;
    perSocket.set(req.socket, nth);
    req.resume();
    req.on('end', () => {
      if (nth === hangUpOnRequest) req.socket.destroy();
      else res.writeHead(204).end();
    });
  });
  s.on('connection', () => connections++);
  await new Promise<void>((r) => s.listen(0, address, r));
  return {
    origin: `http://${address}:${(s.address() as AddressInfo).port}`,
    counts: () => ({ connections, requests }),
    close: () => new Promise<void>((r) => (s.closeAllConnections(), s.close(() => r()))),
  };
}

test('pushes to one host reuse its connection: three POSTs, one TCP connection', async () => {
  const s = await countingServer('127.0.0.31');
  const f = new SafeFetcher({ policy: { allowPrivate: false, allow: parseCidrList('127.0.0.31/32') }, userAgent: UA, timeoutMs: 5000 });
  try {
    for (let i = 0; i < 3; i++)
      assert.equal((await f.post(`${s.origin}/cb${i}`, { body: Buffer.from('x'), contentType: 'text/plain' })).status, 204);
    assert.deepEqual(s.counts(), { connections: 1, requests: 3 });
  } finally {
    f.close();
    await s.close();
  }
});

test('a kept connection the host hangs up on is not a failed push: the POST goes again on a new connection', async () => {
  const s = await countingServer('127.0.0.32', 2);
  const f = new SafeFetcher({ policy: { allowPrivate: false, allow: parseCidrList('127.0.0.32/32') }, userAgent: UA, timeoutMs: 5000 });
  try {
    assert.equal((await f.post(`${s.origin}/a`, { body: Buffer.from('x'), contentType: 'text/plain' })).status, 204);
    assert.equal((await f.post(`${s.origin}/b`, { body: Buffer.from('y'), contentType: 'text/plain' })).status, 204);
    assert.deepEqual(s.counts(), { connections: 2, requests: 3 });
  } finally {
    f.close();
    await s.close();
  }
});

test('a kept connection is no pass: a host that now resolves to a refused address is refused before the pool is asked', async () => {
  const s = await countingServer('127.0.0.33');
  const port = new URL(s.origin).port;
  let answer = ['127.0.0.33'];
  const f = new SafeFetcher({
    policy: { allowPrivate: false, allow: parseCidrList('127.0.0.33/32') },
    userAgent: UA,
    timeoutMs: 5000,
    lookup: async () => answer,
  });
  try {
    assert.equal((await f.post(`http://callback.example:${port}/cb`, { body: Buffer.from('x'), contentType: 'text/plain' })).status, 204);
    answer = ['10.1.2.3'];
    await refused(
      f.post(`http://callback.example:${port}/cb`, { body: Buffer.from('x'), contentType: 'text/plain' }),
      'FETCH_ADDRESS_BLOCKED',
      /callback\.example resolves to 10\.1\.2\.3/,
    );
    assert.deepEqual(s.counts(), { connections: 1, requests: 1 });
  } finally {
    f.close();
    await s.close();
  }
});
