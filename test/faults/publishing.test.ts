// Publishing under faults: a render that fails (a query error, a full disk under PUBLISH_DIR) is logged
// and counted, the previous documents stay served, and the next run retries; with the database gone, the
// documents keep being served from the last rendering.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, readFileSync, readdirSync, openSync, writeSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { execFileSync } from 'node:child_process';
import zlib from 'node:zlib';
import { XMLValidator } from 'fast-xml-parser';
import type { FastifyInstance } from 'fastify';
import { BACKEND, createTestDatabase, testConfig, methodCall, readReply, uniqueUrl, type TestDatabase } from '../helpers/app.js';
import { buildApp } from '../../src/app.js';
import type { Config } from '../../src/platform/config.js';
import { privatePostgresAvailable, startPrivatePostgres } from './private-postgres.js';
import { waitFor } from '../helpers/wait.js';

interface Harness {
  app: FastifyInstance;
  logs: string[];
  /** Lookups of `path`'s current rendering sent to the database so far (answered or not). */
  lookups(path: string): number;
  close(): Promise<void>;
}

/** The app with the scheduler off (the test renders when it wants) and its error log captured. */
async function harness(db: TestDatabase, overrides: Partial<Config> = {}): Promise<Harness> {
  const logs: string[] = [];
  const config = testConfig(db, {
    RENDER_SCHEDULER: false,
    PUBLISH_POINTER_TTL_MS: 100,
    DB_TIMEOUT_MS: 1000,
    LOG_LEVEL: 'error',
    ...overrides,
  });
  const app = await buildApp({ config, logStream: { write: (l: string) => void logs.push(l) } });
  await app.ready();
  const lookups = new Map<string, number>();
  const counted = app.db as unknown as { query: (sql: string, params?: unknown[], ...rest: unknown[]) => Promise<unknown> };
  const query = counted.query;
  counted.query = (sql, params, ...rest) => {
    if (/from published_documents p join renderings r/.test(sql) && params)
      lookups.set(String(params[0]), (lookups.get(String(params[0])) ?? 0) + 1);
    return query.call(app.db, sql, params, ...rest);
  };
  return { app, logs, lookups: (path) => lookups.get(path) ?? 0, close: () => app.close() };
}

async function ping(app: FastifyInstance, name: string): Promise<string> {
  const url = uniqueUrl('pub');
  const res = await app.inject({
    method: 'POST',
    url: '/RPC2',
    headers: { 'content-type': 'text/xml' },
    payload: methodCall('weblogUpdates.ping', [name, url]),
  });
  assert.equal(readReply(res.statusCode, res.body).flerror, false, res.body);
  return url;
}

async function get(app: FastifyInstance, path: string, headers: Record<string, string> = {}) {
  const res = await app.inject({ method: 'GET', url: path, headers });
  return { status: res.statusCode, etag: res.headers.etag as string | undefined, body: res.body, raw: res.rawPayload };
}

/**
 * GETs `path` until an answer came after a lookup of its current rendering in the database (the one the
 * reader remembered was older than PUBLISH_POINTER_TTL_MS): what is served is then what the reader made of
 * the database's answer, or of its failure, not the pointer it remembered.
 */
async function getAfterLookup(h: Harness, path: string) {
  return waitFor(
    async () => {
      const n = h.lookups(path);
      const d = await get(h.app, path);
      return h.lookups(path) > n && d;
    },
    { what: `a lookup of ${path}'s current rendering in the database`, intervalMs: 10 },
  );
}

async function failedRenders(app: FastifyInstance): Promise<number> {
  const res = await app.inject({ method: 'GET', url: '/metrics' });
  return res.body
    .split('\n')
    .filter((l) => l.startsWith('pingd_publish_renders_total{') && l.includes('outcome="failed"'))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
}

const DOCS = ['/changes.xml', '/shortChanges.xml'];

test(
  'a render whose queries fail: logged and counted, the previous documents stay served, the next run retries',
  { timeout: 60_000 },
  async () => {
    const db = await createTestDatabase();
    const h = await harness(db);
    try {
      const first = await ping(h.app, 'Before the failure');
      await h.app.renderer.tick({ force: true });
      const before = await Promise.all(DOCS.map((p) => get(h.app, p)));
      for (const d of before) {
        assert.equal(d.status, 200);
        assert.ok(d.body.includes(first));
      }
      // Break what the renderer reads.
      await h.app.db.exec('alter table weblogs rename to weblogs_away; alter table pings rename to pings_away');
      // Each document fails on its own (and the tick may end with the failure of closing hours).
      await h.app.renderer.tick({ force: true }).catch((err: Error) => assert.match(err.message, /does not exist/));
      assert.ok((await failedRenders(h.app)) >= DOCS.length, 'failures are counted');
      assert.ok(
        h.logs.some((l) => /"msg":"rendering failed"/.test(l) && /weblogs/.test(l)),
        'failures are logged with the reason',
      );
      for (let i = 0; i < DOCS.length; i++) {
        const d = await getAfterLookup(h, DOCS[i]);
        assert.equal(d.status, 200);
        assert.equal(d.etag, before[i].etag, 'the previous rendering');
        assert.equal(d.body, before[i].body);
      }
      await h.app.db.exec('alter table weblogs_away rename to weblogs; alter table pings_away rename to pings');
      const second = await ping(h.app, 'After the repair');
      const again = await h.app.renderer.tick({ force: true });
      assert.deepEqual(again?.failed, []);
      // No wait: publishing a rendering makes this instance's reader forget the pointer it remembered.
      const after = await get(h.app, '/changes.xml');
      assert.notEqual(after.etag, before[0].etag);
      assert.ok(after.body.includes(second) && after.body.includes(first));
    } finally {
      await h.close();
      await db.drop();
    }
  },
);

// A full disk needs a small file system of our own: a tmpfs, which only root may mount.
let canMount = false;
if (process.getuid?.() === 0) {
  const probe = mkdtempSync(join(tmpdir(), 'pingd-mnt-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probe], { stdio: 'ignore' });
    execFileSync('umount', [probe], { stdio: 'ignore' });
    canMount = true;
  } catch {
    canMount = false;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

test(
  'a full disk under PUBLISH_DIR: logged and counted, the previous documents and files stay, the next run retries',
  { timeout: 60_000, skip: canMount ? false : 'needs root to mount a small tmpfs' },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pingd-full-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', dir]);
    const db = await createTestDatabase();
    const h = await harness(db, { PUBLISH_DIR: dir });
    try {
      const first = await ping(h.app, 'Before the disk filled');
      await h.app.renderer.tick({ force: true });
      const fileBefore = readFileSync(join(dir, 'changes.xml'), 'utf8');
      assert.ok(fileBefore.includes(first));
      const served = await get(h.app, '/changes.xml');
      // Fill the file system to the last byte.
      const fd = openSync(join(dir, 'filler'), 'w');
      try {
        const block = Buffer.alloc(4096, 0x61);
        for (;;) writeSync(fd, block);
      } catch (err) {
        assert.equal((err as NodeJS.ErrnoException).code, 'ENOSPC');
      } finally {
        closeSync(fd);
      }
      const second = await ping(h.app, 'While the disk is full');
      const failedBefore = await failedRenders(h.app);
      const report = await h.app.renderer.tick({ force: true });
      assert.ok(report && report.failed.some((f) => /ENOSPC/.test(f.error)), JSON.stringify(report?.failed));
      assert.ok((await failedRenders(h.app)) > failedBefore, 'counted');
      assert.ok(
        h.logs.some((l) => /"msg":"rendering failed"/.test(l) && /ENOSPC/.test(l)),
        'logged',
      );
      // What was published stays: the file is the previous complete document, no temporary file is left,
      // and HTTP serves the previous rendering.
      assert.equal(readFileSync(join(dir, 'changes.xml'), 'utf8'), fileBefore);
      assert.equal(XMLValidator.validate(fileBefore), true);
      assert.deepEqual(
        readdirSync(dir).filter((f) => f.includes('.tmp-')),
        [],
      );
      const during = await getAfterLookup(h, '/changes.xml');
      assert.equal(during.status, 200);
      assert.equal(during.etag, served.etag);
      // Space again: the next run writes everything, the new ping included.
      rmSync(join(dir, 'filler'));
      const again = await h.app.renderer.tick({ force: true });
      assert.deepEqual(again?.failed, []);
      const fileAfter = readFileSync(join(dir, 'changes.xml'), 'utf8');
      assert.ok(fileAfter.includes(second) && fileAfter.includes(first));
      assert.equal(XMLValidator.validate(fileAfter), true);
    } finally {
      await h.close();
      await db.drop();
      execFileSync('umount', [dir]);
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test(
  'with the database gone, the documents keep being served from the last rendering; rendering resumes when it is back',
  { timeout: 120_000 },
  async (ctx) => {
    const pg = BACKEND === 'postgres' && privatePostgresAvailable() ? await startPrivatePostgres() : null;
    if (BACKEND === 'postgres' && !pg) {
      ctx.skip('needs a private PostgreSQL cluster (PostgreSQL 15 binaries and root)');
      return;
    }
    const db: TestDatabase = pg ? { config: { DATABASE_URL: pg.url }, drop: async () => {} } : await createTestDatabase();
    let h = await harness(db);
    try {
      const first = await ping(h.app, 'Published before the outage');
      await h.app.renderer.tick({ force: true });
      const hour = `/${new Date().toISOString().slice(0, 13).replace(/-/g, '/').replace('T', '/')}.xml`;
      const paths = [...DOCS, hour];
      const before = new Map<string, Awaited<ReturnType<typeof get>>>();
      for (const p of paths) {
        const d = await get(h.app, p);
        if (p === hour && d.status !== 200) continue; // the hour may have turned between the ping and now
        assert.equal(d.status, 200, `${p}: ${d.body}`);
        before.set(p, d);
      }
      assert.ok(before.get('/changes.xml')!.body.includes(first));

      if (pg) await pg.stop();
      else await h.app.db.close();

      for (const [p, b] of before) {
        const d = await getAfterLookup(h, p);
        assert.equal(d.status, 200, `${p} while the database is down: ${d.body.slice(0, 200)}`);
        assert.equal(d.etag, b.etag);
        assert.equal(d.body, b.body);
        assert.equal((await get(h.app, p, { 'if-none-match': b.etag! })).status, 304, `${p}: conditional GET`);
      }
      // A coding this instance never served has no bytes in memory: a clear 503, never a 500 or a hang.
      const gzRes = await h.app.inject({ method: 'GET', url: '/changes.xml', headers: { 'accept-encoding': 'gzip' } });
      if (gzRes.statusCode === 200) assert.equal(zlib.gunzipSync(gzRes.rawPayload).toString('utf8'), before.get('/changes.xml')!.body);
      else {
        assert.equal(gzRes.statusCode, 503);
        assert.match(String(gzRes.headers['retry-after']), /^\d+$/);
        assert.match(gzRes.body, /^The document cannot be read right now \(database unavailable\)/);
        assert.equal(gzRes.headers.etag, undefined);
      }
      // A render while down fails and says so; what is served does not change.
      const tick = await h.app.renderer.tick({ force: true }).then(
        (r) => r?.failed.length ?? 0,
        () => 1,
      );
      assert.ok(tick > 0, 'the render while down failed');
      assert.equal((await get(h.app, '/changes.xml')).etag, before.get('/changes.xml')!.etag);
      // Pings are refused meanwhile (never acknowledged).
      const refused = await h.app.inject({
        method: 'POST',
        url: '/RPC2',
        payload: methodCall('weblogUpdates.ping', ['Down', uniqueUrl('pub-down')]),
      });
      assert.equal(readReply(refused.statusCode, refused.body).flerror, true);

      if (pg) {
        await pg.start();
      } else {
        // Embedded: the database comes back with a new process on the same directory.
        await h.close();
        h = await harness(db);
      }
      const second = await waitFor(() => ping(h.app, 'Published after the outage'), {
        what: 'pings to be accepted again',
        timeoutMs: 10_000,
        intervalMs: 200,
        retryErrors: true,
      });
      await h.app.renderer.tick({ force: true });
      const after = await get(h.app, '/changes.xml');
      assert.equal(after.status, 200);
      assert.ok(after.body.includes(second) && after.body.includes(first));
    } finally {
      await h.close();
      if (pg) await pg.destroy();
      else await db.drop();
    }
  },
);
