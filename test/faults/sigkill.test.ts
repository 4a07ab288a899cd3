// The server process is killed (SIGKILL: no shutdown, no flush) in the middle of a burst of pings over
// many connections. After a restart on the same database, every ping that had been answered flerror 0
// must be there. On the embedded database this also proves that a crash leaves a data directory that
// opens again (its stale lock is taken over).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, request } from 'node:http';
import { BACKEND, createTestDatabase, testConfig, methodCall, readReply, uniqueUrl } from '../helpers/app.js';
import { openDatabase } from '../../src/platform/db/database.js';
import { startServer } from './serve-process.js';
import { waitFor } from '../helpers/wait.js';

function post(agent: Agent, port: number, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/RPC2',
        method: 'POST',
        agent,
        headers: { 'content-type': 'text/xml', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

test(
  'SIGKILL in the middle of a burst: after a restart, every ping answered flerror 0 is in the database',
  { timeout: 120_000 },
  async (ctx) => {
    const tdb = await createTestDatabase();
    const cfg = testConfig(tdb);
    const env: Record<string, string> = cfg.DATABASE_URL
      ? { DATABASE_URL: cfg.DATABASE_URL }
      : { DATABASE_URL: '', DATA_DIR: cfg.DATA_DIR };
    try {
      const server = await startServer(env);
      const agent = new Agent({ keepAlive: true, maxSockets: 64 });
      const acked: string[] = [];
      let refused = 0;
      let noAnswer = 0;
      let killed = false;
      const worker = async () => {
        while (!killed) {
          const url = uniqueUrl('kill');
          try {
            const res = await post(agent, server.port, methodCall('weblogUpdates.ping', ['Kill', url]));
            const r = readReply(res.status, res.body);
            if (r.flerror === false) acked.push(url);
            else refused++;
          } catch {
            noAnswer++; // the connection died with the process: not acknowledged
          }
        }
      };
      const workers = Array.from({ length: 64 }, worker);
      // Kill once the burst is well under way, while batches are being committed.
      await waitFor(() => acked.length >= 400, {
        what: () => `the burst to get going (${acked.length} acknowledged)`,
        timeoutMs: 30_000,
        intervalMs: 25,
      });
      server.child.kill('SIGKILL');
      await server.exited;
      killed = true;
      await Promise.all(workers);
      agent.destroy();
      ctx.diagnostic(`${acked.length} acknowledged, ${refused} refused, ${noAnswer} without an answer when the process died`);
      assert.ok(noAnswer > 0, 'the kill landed while requests were in flight');

      if (BACKEND === 'pglite') {
        // The lock file of the dead process is still there; the restart must take it over.
        const lock = join(cfg.DATA_DIR, 'pingd.lock');
        assert.ok(existsSync(lock));
        assert.equal(Number(readFileSync(lock, 'utf8').split(' ')[0]), server.child.pid);
      }
      const again = await startServer(env);
      const after = await post(new Agent(), again.port, methodCall('weblogUpdates.ping', ['After', uniqueUrl('after-kill')]));
      assert.equal(readReply(after.status, after.body).flerror, false, 'the restarted server takes pings');
      again.child.kill('SIGTERM');
      assert.equal(await again.exited, 0, again.stderr());

      const db = await openDatabase({ databaseUrl: cfg.DATABASE_URL, dataDir: cfg.DATA_DIR, poolMax: 1, timeoutMs: 5000 });
      try {
        const rows = await db.query<{ url: string }>('select url from pings where url = any($1::text[])', [acked]);
        const stored = new Set(rows.map((r) => r.url));
        const missing = acked.filter((u) => !stored.has(u));
        assert.deepEqual(missing, [], `${missing.length} acknowledged pings are missing`);
        assert.equal(rows.length, acked.length, 'each exactly once');
      } finally {
        await db.close();
      }
    } finally {
      await tdb.drop();
    }
  },
);
