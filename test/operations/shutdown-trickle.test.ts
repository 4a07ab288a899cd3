// Graceful shutdown with a client trickling a request body: REQUEST_TIMEOUT_MS (30 s) is longer than
// SHUTDOWN_TIMEOUT_MS, so a request still arriving must be cut off at shutdown, not waited for.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { createTestDatabase, testConfig } from '../helpers/app.js';
import { startServer } from '../faults/serve-process.js';

test('a body trickling at shutdown no longer holds the process past SHUTDOWN_TIMEOUT_MS (exit 0, not 1)', { timeout: 90_000 }, async () => {
  const tdb = await createTestDatabase();
  const cfg = testConfig(tdb);
  const env: Record<string, string> = {
    ...(cfg.DATABASE_URL ? { DATABASE_URL: cfg.DATABASE_URL } : { DATABASE_URL: '', DATA_DIR: cfg.DATA_DIR }),
    REQUEST_TIMEOUT_MS: '30000',
    SHUTDOWN_TIMEOUT_MS: '8000',
  };
  try {
    const server = await startServer(env);
    // The trickler: headers and a promise of 2,000 bytes, then 8 bytes every 250 ms.
    const sock = net.connect({ host: '127.0.0.1', port: server.port });
    await new Promise<void>((r) => sock.once('connect', () => r()));
    let answer = '';
    sock.on('data', (d) => (answer += d));
    sock.on('error', () => undefined);
    const closed = new Promise<void>((r) => sock.once('close', () => r()));
    sock.write('POST /RPC2 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/xml\r\nContent-Length: 2000\r\n\r\n<?xml version="1.0"?>');
    const drip = setInterval(() => sock.writable && sock.write('<!-- -->'), 250);
    try {
      // Barrier: the server is serving (another connection is answered) while the trickle is open.
      const health = await fetch(`http://127.0.0.1:${server.port}/healthz`);
      assert.equal(health.status, 200);
      const started = Date.now();
      server.child.kill('SIGTERM');
      const code = await server.exited;
      const ms = Date.now() - started;
      assert.equal(code, 0, `the shutdown ended with ${code} after ${ms} ms: ${server.stderr().slice(-500)}`);
      await closed;
      assert.equal(answer, '', 'the trickling request got no answer: nothing was acknowledged');
    } finally {
      clearInterval(drip);
      sock.destroy();
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
    }
  } finally {
    await tdb.drop();
  }
});
