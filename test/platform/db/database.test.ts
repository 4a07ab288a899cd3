import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { spawn } from 'node:child_process';
import { openDatabase, DatabaseError, inBackground } from '../../../src/platform/db/database.js';
import { BACKGROUND_MAX_WAIT_MS } from '../../../src/platform/db/pglite-thread.js';
import { migrate, listMigrations, pendingMigrations } from '../../../src/platform/db/migrate.js';
import { BACKEND, createTestDatabase, testConfig } from '../../helpers/app.js';
import { CLI } from '../../helpers/cli.js';
import { waitFor } from '../../helpers/wait.js';

async function open(cfg: ReturnType<typeof testConfig>) {
  return openDatabase({ databaseUrl: cfg.DATABASE_URL, dataDir: cfg.DATA_DIR, poolMax: 4, timeoutMs: 5000 });
}

test('migrations apply once, record their versions, and a second run applies nothing', async () => {
  const tdb = await createTestDatabase();
  const db = await open(testConfig(tdb));
  try {
    const all = listMigrations().map((m) => m.name);
    assert.deepEqual(await pendingMigrations(db), all);
    assert.deepEqual(await migrate(db), all);
    assert.deepEqual(await migrate(db), []);
    assert.deepEqual(await pendingMigrations(db), []);
    const rows = await db.query<{ version: number }>('select version from schema_migrations order by version');
    assert.deepEqual(
      rows.map((r) => Number(r.version)),
      listMigrations().map((m) => m.version),
    );
  } finally {
    await db.close();
    await tdb.drop();
  }
});

test('a failing migration rolls back with its version row and names the file', async () => {
  const tdb = await createTestDatabase();
  const db = await open(testConfig(tdb));
  const dir = mkdtempSync(join(tmpdir(), 'pingd-mig-'));
  try {
    writeFileSync(join(dir, '001_ok.sql'), 'create table ok_t (id int);');
    writeFileSync(join(dir, '002_bad.sql'), 'create table bad_t (id int); select * from no_such_table;');
    await assert.rejects(migrate(db, dir), /migration 002_bad\.sql failed: .*no_such_table/);
    const versions = (await db.query<{ version: number }>('select version from schema_migrations')).map((r) => Number(r.version));
    assert.deepEqual(versions, [1]);
    const bad = await db.query(`select 1 from information_schema.tables where table_name = 'bad_t'`);
    assert.equal(bad.length, 0, 'the failed migration left nothing behind');
  } finally {
    await db.close();
    await tdb.drop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('instances starting together do not race their migrations', async () => {
  const tdb = await createTestDatabase();
  const cfg = testConfig(tdb);
  if (BACKEND === 'postgres') {
    const dbs = await Promise.all([open(cfg), open(cfg), open(cfg)]);
    try {
      const results = await Promise.all(dbs.map((d) => migrate(d)));
      const applied = results.flat();
      assert.deepEqual(
        applied.sort(),
        listMigrations()
          .map((m) => m.name)
          .sort(),
        'each migration applied exactly once overall',
      );
    } finally {
      await Promise.all(dbs.map((d) => d.close()));
      await tdb.drop();
    }
  } else {
    // Embedded: the data directory has one owner; a second opener is refused instead of racing.
    const a = await open(cfg);
    try {
      await assert.rejects(
        open(cfg),
        (e: unknown) => e instanceof DatabaseError && e.code === 'DB_LOCKED' && /already open in this process/.test(e.message),
      );
      assert.equal((await migrate(a)).length, listMigrations().length);
    } finally {
      await a.close();
      await tdb.drop();
    }
  }
});

test(
  'onConnect runs on every new connection before anything else does; one that fails closes the connection and fails what waited for it',
  { skip: BACKEND !== 'postgres' && 'the embedded database has one session, which never moves to another server: it has no onConnect' },
  async () => {
    const tdb = await createTestDatabase();
    const db = await open(testConfig(tdb));
    try {
      const hooked = new Set<number>();
      let fail = false;
      db.onConnect!(async (q) => {
        if (fail) throw new Error('the hook refused this connection');
        const [r] = await q.query<{ pid: number }>('select pg_backend_pid() as pid');
        hooked.add(r.pid);
      });
      // Four statements at once need four connections (poolMax 4), each new.
      const pids = await Promise.all(
        [0, 1, 2, 3].map(async () => (await db.query<{ pid: number }>('select pg_backend_pid() as pid, pg_sleep(0.2)'))[0].pid),
      );
      const inTx = await db.transaction(async (tx) => (await tx.query<{ pid: number }>('select pg_backend_pid() as pid'))[0].pid);
      for (const pid of [...pids, inTx]) assert.ok(hooked.has(pid), `connection ${pid} ran the hook first`);
      assert.equal(hooked.size, 4);

      // Cut every connection: the next statement needs a new one, whose hook fails.
      const admin = await open(testConfig(tdb));
      await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where pid = any($1::int[])', [[...hooked]]);
      await admin.close();
      fail = true;
      await waitFor(() => db.poolStats().total === 0, {
        what: () => `the cut connections to leave the pool (${db.poolStats().total} left)`,
      });
      await assert.rejects(db.query('select 1'), /the hook refused this connection/);
      assert.equal(db.poolStats().total, 0, 'the connection whose hook failed is not kept');
      fail = false;
      assert.deepEqual(await db.query('select 1 as one'), [{ one: 1 }]);
      assert.equal(hooked.size, 5);
    } finally {
      await db.close();
      await tdb.drop();
    }
  },
);

// The lock file guards the embedded database only; a server backend has no data directory of ours.
if (BACKEND === 'pglite')
  test('embedded: a second process on the same data directory is refused with a clear message; a stale lock is taken over', async () => {
    const tdb = await createTestDatabase();
    const cfg = testConfig(tdb);
    const db = await open(cfg);
    try {
      const lock = join(cfg.DATA_DIR, 'pingd.lock');
      assert.equal(readFileSync(lock, 'utf8').split(' ')[0], String(process.pid));
      // Asynchronously: the lock's holder is this process, and its heartbeat must go on meanwhile (a
      // spawnSync blocked it, and the other process took the lock over as stale after 10 s).
      const r = await new Promise<{ status: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [...CLI, 'migrate'], {
          env: { ...process.env, DATABASE_URL: '', DATA_DIR: cfg.DATA_DIR },
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let stderr = '';
        child.stderr?.on('data', (d) => (stderr += d));
        child.once('exit', (status) => resolve({ status, stderr }));
      });
      // 75 (busy: try again later), as docs/reference/cli.md promises; it was 1.
      assert.equal(r.status, 75);
      assert.match(r.stderr, new RegExp(`in use by another pingd process \\(pid ${process.pid} on .+, alive \\d+ ms ago\\)`));
    } finally {
      await db.close();
    }
    assert.equal(existsSync(join(cfg.DATA_DIR, 'pingd.lock')), false, 'closing releases the lock');
    // A lock left by a process that no longer exists (crash, SIGKILL) does not block the next start.
    writeFileSync(join(cfg.DATA_DIR, 'pingd.lock'), '999999');
    const again = await open(cfg);
    assert.equal((await again.query<{ one: number }>('select 1 as one'))[0].one, 1);
    await again.close();
    await tdb.drop();
  });

if (BACKEND === 'pglite')
  test('embedded: a new data directory is created, then opened with EMBEDDED_CACHE_MB as its shared_buffers; without it, PGlite keeps its own 128MB', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pingd-cache-'));
    try {
      const db = await openDatabase({ dataDir: dir, poolMax: 1, timeoutMs: 5000, embeddedCacheMb: 16 });
      try {
        assert.equal(existsSync(join(dir, 'pgdata', 'PG_VERSION')), true, 'the database was created');
        assert.deepEqual(await db.query('show shared_buffers'), [{ shared_buffers: '16MB' }]);
        await db.exec('create table kept (n int); insert into kept values (7)');
      } finally {
        await db.close();
      }
      const again = await openDatabase({ dataDir: dir, poolMax: 1, timeoutMs: 5000 });
      try {
        assert.deepEqual(await again.query('show shared_buffers'), [{ shared_buffers: '128MB' }]);
        assert.deepEqual(await again.query('select n from kept'), [{ n: 7 }], 'what the first open wrote is there');
      } finally {
        await again.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

if (BACKEND === 'pglite')
  test('embedded: background statements (a render) wait for the foreground ones (intake) and go one at a time; under constant foreground work they still go', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pingd-prio-'));
    const db = await openDatabase({ dataDir: dir, poolMax: 1, timeoutMs: 10_000 });
    try {
      const order: string[] = [];
      const heavy = 'select count(*) as n from generate_series(1, 100000)';
      const bg = inBackground(() => Promise.all(Array.from({ length: 6 }, (_, i) => db.query(heavy).then(() => order.push(`b${i}`)))));
      await new Promise((r) => setImmediate(r));
      // Issued after the six: they pass all but the one already in the engine.
      const fg = Promise.all(Array.from({ length: 3 }, (_, i) => db.query('select 1 as one').then(() => order.push(`f${i}`))));
      await Promise.all([bg, fg]);
      assert.equal(order.length, 9);
      const before = order.slice(0, order.indexOf('f2')).filter((x) => x.startsWith('b'));
      assert.ok(before.length <= 1, `background statements ahead of the foreground: ${order.join(' ')}`);

      // Once foreground work has stopped (a transaction ended, nothing since for longer than the pace), a
      // background statement goes at once.
      assert.equal(await db.transaction(async (q) => (await q.query<{ one: number }>('select 1 as one'))[0].one), 1);
      await new Promise((r) => setTimeout(r, 3 * BACKGROUND_MAX_WAIT_MS));
      const after: string[] = [];
      const b = inBackground(() => db.query(heavy)).then(() => after.push('background'));
      await new Promise((r) => setImmediate(r));
      const f = db.query('select 1 as one').then(() => after.push('foreground'));
      await Promise.all([b, f]);
      assert.deepEqual(after, ['background', 'foreground'], 'the background statement was not held after the transaction ended');

      // A background transaction with foreground statements queued meanwhile: both finish (no deadlock).
      const tx = inBackground(() =>
        db.transaction(async (q) => {
          await q.query(heavy);
          await q.query(heavy);
          return 'tx done';
        }),
      );
      const during = Promise.all([db.query('select 2 as two'), db.query('select 3 as three')]);
      assert.deepEqual(await Promise.all([tx, during]), ['tx done', [[{ two: 2 }], [{ three: 3 }]]]);

      // Foreground work that never pauses (four chains of statements): a background statement still runs.
      let bgDone = false;
      const deadline = Date.now() + 20_000;
      const chain = async () => {
        let n = 0;
        while (!bgDone && Date.now() < deadline) {
          await db.query('select 1 as one');
          n++;
        }
        return n;
      };
      const chains = Promise.all([chain(), chain(), chain(), chain()]);
      await new Promise((r) => setTimeout(r, 20));
      const starved = inBackground(() => db.query<{ n: number }>(heavy)).then((r) => {
        bgDone = true;
        return r;
      });
      assert.deepEqual(await starved, [{ n: 100000 }]);
      await chains;
      assert.ok(Date.now() < deadline, 'the background statement ran while the foreground kept the session busy');
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

if (BACKEND === 'pglite')
  test('embedded: closing the database while a transaction is open rolls it back and closes (it used to wait for it forever)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pingd-close-tx-'));
    const db = await openDatabase({ dataDir: dir, poolMax: 1, timeoutMs: 10_000 });
    try {
      await db.exec('create table t (n int)');
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let entered!: () => void;
      const inside = new Promise<void>((r) => (entered = r));
      // A transaction whose owner is still busy elsewhere when the database is closed.
      const tx = db.transaction(async (q) => {
        await q.query('insert into t values (1)');
        entered();
        await held;
        await q.query('insert into t values (2)');
      });
      await inside;
      const closed = await Promise.race([
        db.close().then(() => 'closed'),
        new Promise((r) => setTimeout(() => r('still waiting after 10 s'), 10_000)),
      ]);
      assert.equal(closed, 'closed');
      release();
      await assert.rejects(tx, 'the transaction cannot go on once the database is closed');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
