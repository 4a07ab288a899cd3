// One relay request's bounds: a target that answers without end is cut off after MAX_ANSWER_BYTES (the
// npm xmlrpc client alone would read until the deadline), and a normal answer still comes through the
// same capped connection.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { RelaySender, MAX_ANSWER_BYTES } from '../../../src/push/relay/sender.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';

const PING = { name: 'Bounded', url: 'http://bounded.example.com/', changesUrl: null, rssUrl: null, tags: null };
const OK =
  '<?xml version="1.0"?><methodResponse><params><param><value><struct><member><name>flerror</name><value><boolean>0</boolean></value></member><member><name>message</name><value>Thanks</value></member></struct></value></param></params></methodResponse>';

async function serve(handler: http.RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.41', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.41:${port}/RPC2`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const sender = new RelaySender({
  policy: { allowPrivate: false, allow: parseCidrList('127.0.0.0/8') },
  userAgent: 'pingd-relay/1 (test)',
  timeoutMs: 20_000,
});

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
    assert.match(r.outcome === 'failed' ? r.error : '', new RegExp(`larger than ${MAX_ANSWER_BYTES} bytes`));
    assert.ok(written < 20 * 1024 * 1024, `${written} bytes were written before the cut`);
  } finally {
    await endless.close();
  }
});

test('a normal answer comes through the capped connection', async () => {
  let ua = '';
  const target = await serve((req, res) => {
    ua = req.headers['user-agent'] ?? '';
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'text/xml' }).end(OK));
  });
  try {
    const r = await sender.send(target.url, PING, true);
    assert.deepEqual(r, { outcome: 'delivered', method: 'weblogUpdates.ping', fellBack: false, message: 'Thanks' });
    assert.equal(ua, 'pingd-relay/1 (test)');
  } finally {
    await target.close();
  }
});
