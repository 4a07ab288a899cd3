// Graceful shutdown of the real process: `pingd serve` is spawned, a burst of XML-RPC pings is fired
// over keep-alive connections, SIGTERM arrives mid-burst; the process must exit 0 within its bound, and
// every ping it acknowledged (flerror 0) must be in the database afterwards, which reopens cleanly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import http from 'node:http';
import { openDatabase } from '../../src/platform/db/database.js';
import { BACKEND, createTestDatabase, methodCall, uniqueUrl } from '../helpers/app.js';
import { CLI } from '../helpers/cli.js';

const PASSWORD = 'shutdown-test-password';
const TOTAL = 400;
const CONCURRENCY = 16;
const SIGNAL_AFTER = 100;
const SHUTDOWN_TIMEOUT_MS = 10_000;

type Outcome = { url: string; result: 'accepted' | 'refused' | 'transport-error'; message?: string };

function post(agent: http.Agent, port: number, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/RPC2', method: 'POST', agent, headers: { 'content-type': 'text/xml' } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

test(
  'SIGTERM during a burst of pings: exit 0 in bounded time, no acknowledged ping lost, database reopens',
  { timeout: 60_000 },
  async () => {
    const tdb = await createTestDatabase();
    const databaseUrl = (() => {
      if (!tdb.config.DATABASE_URL) return '';
      const u = new URL(tdb.config.DATABASE_URL);
      u.username = u.username || 'postgres';
      u.password = PASSWORD; // trust authentication: accepted and ignored, but it must never reach the log
      return u.href;
    })();
    const child = spawn(process.execPath, [...CLI, 'serve'], {
      env: {
        ...process.env,
        LOG_LEVEL: 'info',
        HOST: '127.0.0.1',
        PORT: '0',
        DATABASE_URL: databaseUrl,
        DATA_DIR: tdb.config.DATA_DIR ?? '',
        PING_MIN_INTERVAL: '300',
        SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('exit', (code, signal) => resolve({ code, signal })),
    );
    let stderr = '';
    child.stderr.on('data', (c) => (stderr += c));
    const logs: Record<string, unknown>[] = [];
    let rawLog = '';
    const port = await new Promise<number>((resolve, reject) => {
      createInterface({ input: child.stdout }).on('line', (line) => {
        rawLog += line + '\n';
        const l = JSON.parse(line) as Record<string, unknown>; // every line is JSON
        logs.push(l);
        const m = /^Server listening at http:\/\/127\.0\.0\.1:(\d+)$/.exec(String(l.msg));
        if (m) resolve(Number(m[1]));
      });
      void exited.then(() => reject(new Error(`server exited before listening: ${stderr}`)));
    });

    try {
      const starting = logs.find((l) => l.msg === 'starting') as { config: Record<string, unknown> } | undefined;
      assert.ok(starting, 'the startup line lists the configuration');
      // The user is masked too: a URL's user is as often a key as a name (RELAY_TARGETS' https://KEY@host/).
      if (BACKEND === 'postgres') {
        const shown = new URL(databaseUrl);
        shown.username = 'redacted';
        shown.password = 'redacted';
        assert.equal(starting.config.DATABASE_URL, shown.href);
      }

      const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
      const outcomes: Outcome[] = [];
      let next = 0;
      let acknowledged = 0;
      let signalled = false;
      const worker = async () => {
        while (next < TOTAL) {
          const url = uniqueUrl('burst');
          next++;
          try {
            const r = await post(agent, port, methodCall('weblogUpdates.ping', ['Burst blog', url]));
            assert.equal(r.status, 200);
            const accepted = r.body.includes('<name>flerror</name><value><boolean>0</boolean>');
            const refused = r.body.includes('<name>flerror</name><value><boolean>1</boolean>');
            assert.ok(accepted || refused, r.body);
            outcomes.push({ url, result: accepted ? 'accepted' : 'refused', message: /<string>([^<]*)<\/string>/.exec(r.body)?.[1] });
            if (accepted && ++acknowledged === SIGNAL_AFTER && !signalled) {
              signalled = true;
              child.kill('SIGTERM');
            }
          } catch (err) {
            if (err instanceof assert.AssertionError) throw err;
            // After SIGTERM the port closes: connections are refused or reset. Such a ping was not acknowledged.
            outcomes.push({ url, result: 'transport-error', message: (err as Error).message });
          }
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      agent.destroy();
      assert.ok(signalled, 'SIGTERM was sent mid-burst');

      // Bounded: the process gives itself SHUTDOWN_TIMEOUT_MS and exits 1 past it; we only wait a little more.
      let bound: NodeJS.Timeout | undefined;
      const exit = await Promise.race([
        exited,
        new Promise<never>(
          (_r, reject) => (bound = setTimeout(() => reject(new Error('no exit within the bound')), SHUTDOWN_TIMEOUT_MS + 10_000)),
        ),
      ]);
      clearTimeout(bound);
      assert.deepEqual(exit, { code: 0, signal: null }, stderr);
      const msgs = logs.map((l) => l.msg);
      assert.ok(msgs.includes('shutting down') && msgs.includes('stopped'), JSON.stringify(msgs));
      assert.ok(!rawLog.includes(PASSWORD) && !stderr.includes(PASSWORD), 'the password never reaches the log');

      const accepted = outcomes.filter((o) => o.result === 'accepted').map((o) => o.url);
      const refused = outcomes.filter((o) => o.result === 'refused').map((o) => o.url);
      assert.ok(accepted.length >= SIGNAL_AFTER);
      for (const o of outcomes.filter((x) => x.result === 'refused'))
        assert.match(o.message ?? '', /shutting down|please ping again/, 'refused only for the shutdown');

      // Reopen: on the embedded database this also proves the lock file was released and the files are sound.
      if (BACKEND === 'pglite') assert.equal(existsSync(join(tdb.config.DATA_DIR!, 'pingd.lock')), false, 'lock released');
      const db = await openDatabase({
        databaseUrl: tdb.config.DATABASE_URL,
        dataDir: tdb.config.DATA_DIR ?? '',
        poolMax: 1,
        timeoutMs: 5000,
      });
      try {
        const stored = new Set(
          (await db.query<{ url: string }>('select url from pings where url = any($1::text[])', [[...accepted, ...refused]])).map(
            (r) => r.url,
          ),
        );
        const lost = accepted.filter((u) => !stored.has(u));
        assert.deepEqual(lost, [], `${lost.length} acknowledged pings are missing`);
        assert.deepEqual(
          refused.filter((u) => stored.has(u)),
          [],
          'a refused ping is not stored',
        );
        const [w] = await db.query<{ n: number }>('select count(*)::int as n from weblogs where url = any($1::text[])', [accepted]);
        assert.equal(Number(w.n), accepted.length);
      } finally {
        await db.close();
      }
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
      await tdb.drop();
    }
  },
);
