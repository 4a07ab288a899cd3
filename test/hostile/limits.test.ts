// Limits at the socket, with raw TCP clients: slow clients are cut off by REQUEST_TIMEOUT_MS while others
// are served, oversized request lines get 431, chunked bodies over BODY_LIMIT get 413, and none of it
// stops the server answering a valid ping.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { startApp, methodCall, readReply, uniqueUrl, type TestApp } from '../helpers/app.js';

let t: TestApp;
let port: number;
before(async () => {
  t = await startApp({ REQUEST_TIMEOUT_MS: 1000, BODY_LIMIT: 4096 });
  await t.listen();
  port = Number(new URL(t.url).port);
});
after(async () => {
  await t.close();
});

interface Conn {
  socket: Socket;
  /** Everything the server sent. */
  received(): string;
  /** Resolves when the server closes the connection. */
  closed: Promise<void>;
}

function open(): Promise<Conn> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let data = '';
    socket.on('data', (d) => (data += d.toString('latin1')));
    const closed = new Promise<void>((r) => socket.on('close', () => r()));
    socket.on('error', () => {});
    socket.once('connect', () => resolve({ socket, received: () => data, closed }));
    socket.once('error', reject);
  });
}

/** Writes `text` a few bytes at a time until the server closes the socket or `maxMs` passes. */
async function trickle(c: Conn, text: string, everyMs: number, maxMs: number): Promise<boolean> {
  let i = 0;
  let closed = false;
  void c.closed.then(() => (closed = true));
  const end = Date.now() + maxMs;
  while (!closed && Date.now() < end) {
    if (i < text.length && !c.socket.destroyed) c.socket.write(text.slice(i, i + 2));
    i += 2;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return closed;
}

async function ping(): Promise<boolean> {
  const res = await fetch(`${t.url}/RPC2`, {
    method: 'POST',
    headers: { 'content-type': 'text/xml' },
    body: methodCall('weblogUpdates.ping', ['Fine', uniqueUrl('limits')]),
  });
  return readReply(res.status, await res.text()).flerror === false;
}

test('a client trickling its headers is cut off with 408, and others are served meanwhile', async () => {
  const c = await open();
  const slow = trickle(c, `POST /RPC2 HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(2000)}\r\n\r\n`, 100, 15_000);
  assert.equal(await ping(), true, 'a valid ping is answered while the slow client hangs on');
  assert.equal(await slow, true, 'the server closed the slow connection');
  assert.match(c.received(), /^HTTP\/1\.1 408 /);
});

test('a client trickling its body is cut off too', async () => {
  const body = methodCall('weblogUpdates.ping', ['Slow body', uniqueUrl('slow')]);
  const c = await open();
  c.socket.write(`POST /RPC2 HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`);
  assert.equal(await trickle(c, body, 150, 15_000), true, 'the server closed the slow connection');
  assert.doesNotMatch(c.received(), /Thanks for the ping/);
});

test('a client that promises more body than it sends is cut off', async () => {
  const c = await open();
  c.socket.write('POST /RPC2 HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: 1000\r\n\r\n<?xml');
  await c.closed; // bounded by the test's own timeout if the server never closes it
  assert.doesNotMatch(c.received(), /^HTTP\/1\.1 [25]/);
});

test('a request line over the header limit gets 431', async () => {
  const c = await open();
  c.socket.write(`GET /ping?name=x&url=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
  await c.closed;
  assert.match(c.received(), /^HTTP\/1\.1 431 /);
});

test('a chunked body over BODY_LIMIT gets 413 with a fault, without Content-Length to go by', async () => {
  const c = await open();
  c.socket.write('POST /RPC2 HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n');
  const chunk = 'x'.repeat(1000);
  for (let i = 0; i < 10 && !c.socket.destroyed; i++) c.socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
  if (!c.socket.destroyed) c.socket.end('0\r\n\r\n');
  await c.closed;
  assert.match(c.received(), /^HTTP\/1\.1 413 /);
  assert.match(c.received(), /<name>faultString<\/name><value><string>Request body larger than 4096 bytes\.<\/string>/);
});

test('after all of it, a valid ping still succeeds', async () => {
  assert.equal(await ping(), true);
});
