// One relay request through the app's SafeFetcher: a target that answers without end (or says it will) is
// cut off after MAX_ANSWER_BYTES, a redirect is not followed, an address the policy refuses is never
// connected to (a literal or a name the fetcher's lookup resolves), the relay's User-Agent replaces the
// fetcher's, and a fault answered with a 500 still makes extendedPing fall back to ping. Loopback
// 127.0.0.41–42 only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { RelaySender, MAX_ANSWER_BYTES } from '../../../src/push/relay/sender.js';
import { SafeFetcher } from '../../../src/platform/fetch/safe-fetch.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';

const PING = { name: 'Bounded', url: 'http://bounded.example.com/', changesUrl: null, rssUrl: null, tags: null };
const FEED = { ...PING, rssUrl: 'http://bounded.example.com/feed' };
const OK =
  '<?xml version="1.0"?><methodResponse><params><param><value><struct><member><name>flerror</name><value><boolean>0</boolean></value></member><member><name>message</name><value>Thanks</value></member></struct></value></param></params></methodResponse>';
const FAULT =
  '<?xml version="1.0"?><methodResponse><fault><value><struct><member><name>faultCode</name><value><int>-32601</int></value></member><member><name>faultString</name><value>no such method</value></member></struct></value></fault></methodResponse>';

async function serve(handler: http.RequestListener, host = '127.0.0.41'): Promise<{ url: string; port: number; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, host, r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}/RPC2`,
    port,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function senderFor(allow: string, lookup?: (host: string) => Promise<string[]>): RelaySender {
  const fetcher = new SafeFetcher({
    policy: { allowPrivate: false, allow: parseCidrList(allow) },
    userAgent: 'pingd/test (the fetcher)',
    timeoutMs: 20_000,
    ...(lookup ? { lookup } : {}),
  });
  return new RelaySender({ fetcher, userAgent: 'pingd-relay/1 (test)' });
}

const sender = senderFor('127.0.0.0/8');

test('a target answering without end is cut off at MAX_ANSWER_BYTES, not read until the deadline (REGRESSION: the xmlrpc client read whatever came)', async () => {
  let written = 0;
  const endless = await serve((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/xml' });
    res.write('<?xml version="1.0"?><methodResponse><params><param><value><string>');
    const chunk = Buffer.alloc(16 * 1024, 'x');
    const more = () => {
      while (!res.destroyed && res.write(chunk)) written += chunk.length;
      if (!res.destroyed) res.once('drain', more);
    };
    res.on('close', () => undefined);
    more();
  });
  try {
    const r = await sender.send(endless.url, PING, true);
    assert.equal(r.outcome, 'failed');
    assert.ok(r.outcome === 'failed' && r.code === 'FETCH_TOO_LARGE', JSON.stringify(r));
    assert.equal(r.outcome === 'failed' ? r.error : '', `the answer is larger than ${MAX_ANSWER_BYTES} bytes`);
    assert.ok(written < 20 * 1024 * 1024, `${written} bytes were written before the cut`);
  } finally {
    await endless.close();
  }
});

test('an answer whose Content-Length is over MAX_ANSWER_BYTES fails at once with the same error', async () => {
  const big = await serve((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/xml', 'content-length': String(MAX_ANSWER_BYTES + 1) });
    res.write('<?xml version="1.0"?>');
  });
  try {
    const r = await sender.send(big.url, PING, true);
    assert.deepEqual(r.outcome === 'failed' ? { code: r.code, error: r.error } : r, {
      code: 'FETCH_TOO_LARGE',
      error: `the answer is larger than ${MAX_ANSWER_BYTES} bytes`,
    });
  } finally {
    await big.close();
  }
});

test("a normal answer comes through, sent with the relay's User-Agent, not the fetcher's", async () => {
  let ua = '';
  let type = '';
  const target = await serve((req, res) => {
    ua = req.headers['user-agent'] ?? '';
    type = req.headers['content-type'] ?? '';
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'text/xml' }).end(OK));
  });
  try {
    const r = await sender.send(target.url, PING, true);
    assert.deepEqual(r, { outcome: 'delivered', method: 'weblogUpdates.ping', fellBack: false, message: 'Thanks' });
    assert.equal(ua, 'pingd-relay/1 (test)');
    assert.equal(type, 'text/xml');
  } finally {
    await target.close();
  }
});

test('a redirect is not followed: the status is the error, and the place it names is never asked', async () => {
  let elsewhere = 0;
  const other = await serve((req, res) => {
    elsewhere++;
    req.resume();
    res.writeHead(200, { 'content-type': 'text/xml' }).end(OK);
  }, '127.0.0.42');
  const moved = await serve((req, res) => {
    req.resume();
    res.writeHead(302, { location: other.url, 'content-type': 'text/html' }).end('<html>moved</html>');
  });
  try {
    const r = await sender.send(moved.url, PING, true);
    assert.deepEqual(r.outcome === 'failed' ? { code: r.code, error: r.error } : r, { code: 'FETCH_BAD_RESPONSE', error: 'HTTP 302' });
    assert.equal(elsewhere, 0);
  } finally {
    await moved.close();
    await other.close();
  }
});

test('a target at an address the policy refuses is never connected to, named or literal; a name resolves through the fetcher', async () => {
  let hits = 0;
  const target = await serve((req, res) => {
    hits++;
    req.resume();
    res.writeHead(200, { 'content-type': 'text/xml' }).end(OK);
  });
  const lookup = async (host: string) => (host === 'relay-target.test' ? ['127.0.0.41'] : Promise.reject(new Error('ENOTFOUND')));
  const named = `http://relay-target.test:${target.port}/RPC2`;
  try {
    // FETCH_ALLOW_ADDRESSES names another loopback address: 127.0.0.41 stays refused.
    const refusing = senderFor('127.0.0.42/32', lookup);
    const literal = await refusing.send(target.url, PING, true);
    assert.deepEqual(literal.outcome === 'failed' ? { code: literal.code, error: literal.error } : literal, {
      code: 'FETCH_ADDRESS_BLOCKED',
      error: '127.0.0.41 is a loopback address, which this server does not connect to',
    });
    const byName = await refusing.send(named, PING, true);
    assert.deepEqual(byName.outcome === 'failed' ? { code: byName.code, error: byName.error } : byName, {
      code: 'FETCH_ADDRESS_BLOCKED',
      error: 'relay-target.test resolves to 127.0.0.41 (loopback), which this server does not connect to',
    });
    assert.equal(hits, 0);
    // Allowed, the same name reaches the target through the injected lookup.
    const r = await senderFor('127.0.0.41/32', lookup).send(named, PING, true);
    assert.equal(r.outcome, 'delivered');
    assert.equal(hits, 1);
  } finally {
    await target.close();
  }
});

test('a fault to extendedPing answered with HTTP 500 still falls back to ping, as the xmlrpc client did', async () => {
  const methods: string[] = [];
  const target = await serve((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const method = /<methodName>([^<]*)<\/methodName>/.exec(body)?.[1] ?? '';
      methods.push(method);
      if (method === 'weblogUpdates.extendedPing') res.writeHead(500, { 'content-type': 'text/xml' }).end(FAULT);
      else res.writeHead(200, { 'content-type': 'text/xml' }).end(OK);
    });
  });
  try {
    const r = await sender.send(target.url, FEED, false);
    assert.deepEqual(r, { outcome: 'delivered', method: 'weblogUpdates.ping', fellBack: true, message: 'Thanks' });
    assert.deepEqual(methods, ['weblogUpdates.extendedPing', 'weblogUpdates.ping']);
  } finally {
    await target.close();
  }
});

test('an answer whose struct names __proto__ is read through own properties: no flerror comes from it', async () => {
  const hostile = OK.replace(
    '<member><name>flerror</name><value><boolean>0</boolean></value></member>',
    '<member><name>__proto__</name><value><struct><member><name>flerror</name><value><boolean>1</boolean></value></member></struct></value></member>',
  );
  const target = await serve((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'text/xml' }).end(hostile));
  });
  try {
    const r = await sender.send(target.url, PING, true);
    assert.deepEqual(r, { outcome: 'delivered', method: 'weblogUpdates.ping', fellBack: false, message: 'Thanks' });
  } finally {
    await target.close();
  }
});

test('a 200 that is not an XML-RPC answer fails as such, and an empty one too', async () => {
  const bodies = ['<html><body>hello</body></html>', '', 'not xml at all <<<'];
  let i = 0;
  const target = await serve((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'text/html' }).end(bodies[i++]));
  });
  try {
    for (const _ of bodies) {
      const r = await sender.send(target.url, PING, true);
      assert.equal(r.outcome === 'failed' ? r.code : r.outcome, 'FETCH_BAD_RESPONSE');
      assert.match(r.outcome === 'failed' ? r.error : '', /^not an XML-RPC answer \(/);
    }
  } finally {
    await target.close();
  }
});
