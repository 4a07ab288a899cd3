import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import zlib from 'node:zlib';
import net, { type AddressInfo } from 'node:net';
import { SafeFetcher, FetchError, type LookupFn } from '../../../src/platform/fetch/safe-fetch.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';
import { userAgent, PINGD_VERSION } from '../../../src/platform/fetch/user-agent.js';
import { waitFor } from '../../helpers/wait.js';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

interface TestServer {
  url: string;
  port: number;
  requests: http.IncomingMessage[];
  close(): Promise<void>;
}

const servers: TestServer[] = [];

async function serve(handler: Handler, host = '127.0.0.1'): Promise<TestServer> {
  const requests: http.IncomingMessage[] = [];
  const server = http.createServer((req, res) => {
    requests.push(req);
    handler(req, res);
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as AddressInfo).port;
  const s: TestServer = {
    url: `http://${host}:${port}`,
    port,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  servers.push(s);
  return s;
}

after(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

const UA = userAgent('https://ops.example.org/pingd');
const open = (extra: Partial<ConstructorParameters<typeof SafeFetcher>[0]> = {}) =>
  new SafeFetcher({ policy: { allowPrivate: true, allow: [] }, userAgent: UA, timeoutMs: 5000, ...extra });
const strict = (extra: Partial<ConstructorParameters<typeof SafeFetcher>[0]> = {}) =>
  new SafeFetcher({ userAgent: UA, timeoutMs: 5000, ...extra });
const onlyLoopback1 = { allowPrivate: false, allow: parseCidrList('127.0.0.1') };

async function refusal(p: Promise<unknown>, code: string, message?: RegExp): Promise<FetchError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof FetchError, `expected a FetchError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    if (message) assert.match(err.message, message);
    return err;
  }
  assert.fail(`expected ${code}, but the fetch succeeded`);
}

test('the User-Agent names the product, its version and a page', () => {
  assert.equal(UA, `pingd/${PINGD_VERSION} (+https://ops.example.org/pingd)`);
  assert.match(PINGD_VERSION, /^\d+\.\d+\.\d+/);
  assert.match(userAgent(), /^pingd\/\d+\.\d+\.\d+( \(\+https?:\/\/\S+\))?$/);
});

test('a GET sends the User-Agent, accepts gzip and returns status, body and the address used', async () => {
  const s = await serve((_req, res) => res.end('hello'));
  const r = await open().get(`${s.url}/x?y=1`);
  assert.equal(r.status, 200);
  assert.equal(r.body.toString(), 'hello');
  assert.equal(r.address, '127.0.0.1');
  assert.deepEqual(r.redirects, []);
  assert.equal(s.requests[0].url, '/x?y=1');
  assert.equal(s.requests[0].headers['user-agent'], UA);
  assert.equal(s.requests[0].headers['accept-encoding'], 'gzip, deflate, br');
});

test('gzip bodies are decompressed; a gzip bomb is stopped at the size cap', async () => {
  const text = 'da39a3ee5e6b4b0d3255bfef95601890afd80709\n'.repeat(100);
  const bomb = zlib.gzipSync(Buffer.alloc(8 * 1024 * 1024));
  assert.ok(bomb.length < 64 * 1024);
  const s = await serve((req, res) => {
    res.setHeader('content-encoding', 'gzip');
    res.end(req.url === '/bomb' ? bomb : zlib.gzipSync(text));
  });
  const r = await open().get(`${s.url}/ok`);
  assert.equal(r.body.toString(), text);
  await refusal(open().get(`${s.url}/bomb`, { maxBytes: 1024 * 1024 }), 'FETCH_TOO_LARGE', /larger than 1048576 bytes/);
});

test('bodies over the cap are refused, by Content-Length or while streaming', async () => {
  const s = await serve((req, res) => {
    if (req.url === '/declared') {
      res.setHeader('content-length', '5000');
      res.end('x'.repeat(5000));
    } else {
      res.write('x'.repeat(3000));
      res.end('x'.repeat(3000));
    }
  });
  await refusal(open().get(`${s.url}/declared`, { maxBytes: 4096 }), 'FETCH_TOO_LARGE');
  await refusal(open().get(`${s.url}/chunked`, { maxBytes: 4096 }), 'FETCH_TOO_LARGE');
  assert.equal((await open().get(`${s.url}/chunked`, { maxBytes: 6000 })).body.length, 6000);
});

test('error statuses are returned to the caller, not thrown', async () => {
  const s = await serve((_req, res) => {
    res.statusCode = 404;
    res.end('nope');
  });
  const r = await open().get(s.url);
  assert.equal(r.status, 404);
  assert.equal(r.body.toString(), 'nope');
});

test('redirects are followed (relative too) up to the limit', async () => {
  const s = await serve((req, res) => {
    const n = Number(req.url!.slice(1)) || 0;
    if (req.url === '/final') return void res.end('done');
    res.statusCode = n % 2 ? 301 : 307;
    res.setHeader('location', n >= 2 ? '/final' : `/${n + 1}`);
    res.end();
  });
  const r = await open().get(`${s.url}/0`);
  assert.equal(r.body.toString(), 'done');
  assert.deepEqual(r.redirects, [`${s.url}/1`, `${s.url}/2`, `${s.url}/final`]);
  assert.equal(r.url, `${s.url}/final`);
  await refusal(open().get(`${s.url}/0`, { maxRedirects: 2 }), 'FETCH_TOO_MANY_REDIRECTS', /more than 2 redirects/);
});

test('a server that never answers is given up at the deadline', async () => {
  const s = await serve(() => {
    /* never answers */
  });
  await refusal(open().get(s.url, { timeoutMs: 300 }), 'FETCH_TIMEOUT', /within 300 ms/);
  const slowDns: LookupFn = () => new Promise(() => {});
  await refusal(
    open({ lookup: slowDns }).get('http://slow-dns.test/', { timeoutMs: 200 }),
    'FETCH_TIMEOUT',
    /DNS lookup of slow-dns\.test/,
  );
});

test('fetches beyond the concurrency bound are refused at once, and the slot is given back', async () => {
  let release: () => void = () => undefined;
  const s = await serve((req, res) => {
    if (req.url === '/slow') release = () => res.end('slow');
    else res.end('fast');
  });
  const f = open({ maxConcurrent: 1 });
  const slow = f.get(`${s.url}/slow`);
  await waitFor(() => s.requests.length > 0, { what: 'the slow request at the server', intervalMs: 5 });
  await refusal(f.get(`${s.url}/fast`), 'FETCH_BUSY', /too many outbound requests/);
  release();
  assert.equal((await slow).body.toString(), 'slow');
  assert.equal((await f.get(`${s.url}/fast`)).body.toString(), 'fast');
});

test('only http(s) URLs without credentials are fetched, redirects included', async () => {
  await refusal(open().get('ftp://example.com/x'), 'FETCH_URL_INVALID', /not ftp/);
  await refusal(open().get('not a url'), 'FETCH_URL_INVALID');
  await refusal(open().get('http://user:pw@127.0.0.1/'), 'FETCH_URL_INVALID', /user name or password/);
  const s = await serve((_req, res) => {
    res.statusCode = 302;
    res.setHeader('location', 'file:///etc/passwd');
    res.end();
  });
  await refusal(open().get(s.url), 'FETCH_URL_INVALID', /not file/);
});

test('by default a private or loopback URL is refused before any connection is made', async () => {
  const s = await serve((_req, res) => res.end('secret'));
  const f = strict();
  await refusal(f.get(`${s.url}/`), 'FETCH_ADDRESS_BLOCKED', /^127\.0\.0\.1 is a loopback address, which this server does not connect to$/);
  await refusal(f.get(`http://0x7f000001:${s.port}/`), 'FETCH_ADDRESS_BLOCKED', /loopback/);
  await refusal(f.get(`http://[::ffff:127.0.0.1]:${s.port}/`), 'FETCH_ADDRESS_BLOCKED', /IPv4-mapped loopback/);
  await refusal(f.get(`http://localhost:${s.port}/`), 'FETCH_ADDRESS_BLOCKED', /loopback/);
  await refusal(f.get('http://169.254.169.254/latest/meta-data/'), 'FETCH_ADDRESS_BLOCKED', /cloud metadata/);
  await refusal(f.get('http://[fd00:ec2::254]/'), 'FETCH_ADDRESS_BLOCKED', /cloud metadata/);
  assert.equal(s.requests.length, 0, 'the server was never contacted');
});

test('every resolved address is checked: one private record refuses the host', async () => {
  const s = await serve((_req, res) => res.end('secret'));
  const lookup: LookupFn = async (h) => (h === 'mixed.test' ? ['93.184.216.34', '10.0.0.5'] : ['127.0.0.1']);
  await refusal(strict({ lookup }).get('http://mixed.test/'), 'FETCH_ADDRESS_BLOCKED', /10\.0\.0\.5 \(private\)/);
  assert.equal(s.requests.length, 0);
});

test('the connection goes to the checked address: one DNS lookup per hop, no second resolution', async () => {
  const s = await serve((req, res) => res.end(`host=${req.headers.host}`));
  let calls = 0;
  // A rebinding resolver: the first answer is allowed, any later one would be private.
  const lookup: LookupFn = async () => (++calls === 1 ? ['127.0.0.1'] : ['10.9.9.9']);
  const r = await strict({ policy: onlyLoopback1, lookup }).get(`http://rebind.test:${s.port}/`);
  assert.equal(calls, 1);
  assert.equal(r.address, '127.0.0.1');
  assert.equal(r.body.toString(), `host=rebind.test:${s.port}`, 'the Host header keeps the name');
});

test('an allowed first hop that redirects to a private address is refused at the redirect', async () => {
  // Another loopback address, listening, to prove it is never contacted.
  const target = await serve((_req, res) => res.end('internal'), '127.0.0.2');
  const locations: Record<string, string> = {
    '/to-127.0.0.2': `${target.url}/admin`,
    '/to-10': 'http://10.1.2.3/',
    '/to-mapped': `http://[::ffff:127.0.0.2]:${target.port}/`,
    '/to-metadata-name': 'http://metadata.test/latest/meta-data/',
    '/to-localhost': `http://localhost:${target.port}/`,
  };
  const first = await serve((req, res) => {
    res.statusCode = 302;
    res.setHeader('location', locations[req.url!]);
    res.end();
  });
  const lookup: LookupFn = async (h) => (h === 'metadata.test' ? ['169.254.169.254'] : h === 'localhost' ? ['127.0.0.2'] : ['203.0.113.1']);
  const f = strict({ policy: onlyLoopback1, lookup });
  const e1 = await refusal(f.get(`${first.url}/to-127.0.0.2`), 'FETCH_ADDRESS_BLOCKED', /^127\.0\.0\.2 is a loopback address/);
  assert.equal(e1.url, `${target.url}/admin`, 'the error names the refused hop');
  await refusal(f.get(`${first.url}/to-10`), 'FETCH_ADDRESS_BLOCKED', /^10\.1\.2\.3 is a private address/);
  await refusal(f.get(`${first.url}/to-mapped`), 'FETCH_ADDRESS_BLOCKED', /IPv4-mapped loopback/);
  await refusal(
    f.get(`${first.url}/to-metadata-name`),
    'FETCH_ADDRESS_BLOCKED',
    /^metadata\.test resolves to 169\.254\.169\.254 \(cloud metadata\), which this server does not connect to$/,
  );
  await refusal(f.get(`${first.url}/to-localhost`), 'FETCH_ADDRESS_BLOCKED', /loopback/);
  assert.equal(first.requests.length, 5, 'every first hop was allowed');
  assert.equal(target.requests.length, 0, 'no redirect target was contacted');
});

test('DNS failures are reported as such', async () => {
  const lookup: LookupFn = async () => {
    throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
  };
  await refusal(strict({ lookup }).get('http://nowhere.invalid/'), 'FETCH_DNS_FAILED', /cannot resolve nowhere\.invalid \(ENOTFOUND\)/);
});

test('connection errors are FETCH_NETWORK, and outcomes are reported', async () => {
  const s = await serve((_req, res) => res.end());
  await s.close();
  const outcomes: string[] = [];
  await refusal(open({ onOutcome: (o) => outcomes.push(o) }).get(s.url), 'FETCH_NETWORK', /ECONNREFUSED/);
  assert.deepEqual(outcomes, ['FETCH_NETWORK']);
});

/** A raw HTTP/1.1 server whose body has no length and no chunking (it ends with the connection), dripping a byte every 100 ms. */
async function closeDelimitedDrip(status = 200): Promise<{ url: string; close(): void }> {
  const server = net.createServer((sock) => {
    sock.on('error', () => undefined);
    sock.once('data', () => {
      sock.write(`HTTP/1.1 ${status} OK\r\nContent-Type: text/xml\r\n\r\n<rss`);
      const timer = setInterval(() => sock.write('x'), 100);
      sock.on('close', () => clearInterval(timer));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, close: () => server.close() };
}

test('a body cut off by the deadline is FETCH_TIMEOUT, also one that ends with the connection (it came back as a complete 200)', async () => {
  const drip = await closeDelimitedDrip();
  try {
    await refusal(open({ timeoutMs: 600 }).get(drip.url), 'FETCH_TIMEOUT', /^the answer was cut off: not complete within 600 ms$/);
    await refusal(
      open({ timeoutMs: 600 }).post(drip.url, { body: Buffer.from('x'), contentType: 'text/plain', maxBytes: 1_000_000 }),
      'FETCH_TIMEOUT',
      /^the answer was cut off: not complete within 600 ms$/,
    );
  } finally {
    drip.close();
  }
});

test('a body that ends with the connection before the deadline is the whole body', async () => {
  const server = net.createServer((sock) => {
    sock.on('error', () => undefined);
    sock.once('data', () => sock.end('HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\n\r\n<rss/>'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const r = await open().get(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    assert.equal(r.status, 200);
    assert.equal(r.body.toString(), '<rss/>');
  } finally {
    server.close();
  }
});
