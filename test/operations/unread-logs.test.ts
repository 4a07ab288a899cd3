// Regression: when nobody read stdout (a full pipe, a stalled log shipper), every log line waited for the
// reader with the event loop held, so pings hung and, after a flood at LOG_LEVEL=debug, a SIGTERM'd process
// ran for minutes past SHUTDOWN_TIMEOUT_MS. Here `pingd serve` logs at debug into a pipe this test never
// reads: pings must still be answered, the dropped lines counted, and SIGTERM must end the process in time.
// REGRESSION (compiled server): with stdout left a blocking pipe, a write parked in libuv's pool held
// process.exit for ever; under tsx (whose loader opens stdout non-blocking) this test never saw it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import { freePort } from '../faults/private-postgres.js';
import { createTestDatabase } from '../helpers/app.js';
import { waitFor } from '../helpers/wait.js';
import { CLI } from '../helpers/cli.js';

const SHUTDOWN_TIMEOUT_MS = 3000;
const PINGS = 800;
const CONCURRENCY = 8;

function get(agent: http.Agent, port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    // A request the server cannot answer within 10 s is the bug itself: fail, don't wait on.
    req.on('timeout', () => req.destroy(new Error(`no answer to ${path} within 10 s`)));
    req.on('error', reject);
  });
}

test(
  'a log reader that stops reading holds neither pings nor the shutdown bound (lines are dropped and counted)',
  { timeout: 90_000 },
  async (t) => {
    const tdb = await createTestDatabase();
    const port = await freePort();
    const child = spawn(process.execPath, [...CLI, 'serve'], {
      env: {
        ...process.env,
        LOG_LEVEL: 'debug',
        HOST: '127.0.0.1',
        PORT: String(port),
        DATABASE_URL: tdb.config.DATABASE_URL ?? '',
        DATA_DIR: tdb.config.DATA_DIR ?? '',
        RENDER_CRON: '0 0 1 1 *',
        LOG_BUFFER_BYTES: String(64 * 1024),
        SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // Never read: once the kernel's pipe buffer is full, every write to stdout would wait for us.
    child.stdout.pause();
    let stderr = '';
    child.stderr.on('data', (c) => (stderr += c));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('exit', (code, signal) => resolve({ code, signal })),
    );
    try {
      const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
      await waitFor(
        async () => {
          if (child.exitCode !== null) assert.fail(`the server exited: ${stderr}`);
          return get(agent, port, '/healthz').then(
            (r) => r.status === 200,
            () => false,
          );
        },
        { what: () => `the server to start: ${stderr}`, timeoutMs: 30_000, intervalMs: 100 },
      );

      // Each ping writes request lines at debug: far more than the pipe and the 64 KiB buffer hold.
      let next = 0;
      let accepted = 0;
      const worker = async () => {
        while (next < PINGS) {
          const n = next++;
          const r = await get(
            agent,
            port,
            `/pingSiteForm?name=Unread&url=${encodeURIComponent(`http://b${n}-${process.pid}.unread-logs.example/`)}`,
          );
          assert.equal(r.status, 200, r.body);
          accepted++;
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      assert.equal(accepted, PINGS);

      const metrics = await get(agent, port, '/metrics');
      const dropped = Number(/^pingd_log_lines_dropped_total (\d+)/m.exec(metrics.body)?.[1]);
      assert.ok(dropped > 0, `dropped lines are counted: ${dropped}`);
      agent.destroy();

      const signalled = performance.now();
      child.kill('SIGTERM');
      let bound: NodeJS.Timeout | undefined;
      const exit = await Promise.race([
        exited,
        new Promise<never>(
          (_r, reject) => (bound = setTimeout(() => reject(new Error('no exit within the bound')), SHUTDOWN_TIMEOUT_MS + 5000)),
        ),
      ]);
      clearTimeout(bound);
      const took = performance.now() - signalled;
      assert.equal(exit.signal, null, stderr);
      assert.ok(exit.code === 0 || exit.code === 1, `exit code ${exit.code}`);
      assert.ok(took < SHUTDOWN_TIMEOUT_MS + 5000, `exited after ${Math.round(took)} ms`);
      t.diagnostic(`${PINGS} pings answered with ${dropped} log lines dropped; exit ${exit.code} ${Math.round(took)} ms after SIGTERM`);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      child.stdout.destroy();
      await exited;
      await tdb.drop();
    }
  },
);
