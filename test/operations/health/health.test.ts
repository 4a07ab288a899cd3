// Liveness and readiness: /healthz answers while the process runs; /readyz answers 200 only when the
// database answers and the schema is current, 503 with the reason otherwise (database gone, migrations
// pending), and recovers when the database comes back.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket, connect } from 'node:net';
import { BACKEND, createTestDatabase, startApp, testConfig, type TestApp } from '../../helpers/app.js';
import { buildApp } from '../../../src/app.js';
import { listMigrations } from '../../../src/platform/db/migrate.js';

const apps: TestApp[] = [];
after(async () => {
  for (const a of apps) await a.close().catch(() => undefined);
});

test('GET /healthz and GET /readyz answer 200 on a migrated database, through a real HTTP client', async () => {
  const t = await startApp();
  apps.push(t);
  const base = await t.listen();
  const h = await fetch(`${base}/healthz`);
  assert.equal(h.status, 200);
  assert.equal(h.headers.get('cache-control'), 'no-store');
  const hb = await h.json();
  assert.equal(hb.status, 'ok');
  assert.equal(typeof hb.uptimeSeconds, 'number');
  const r = await fetch(`${base}/readyz`);
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), { status: 'ok', database: BACKEND });
  assert.match(r.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/, 'every answer carries its request id');
});

test('GET /readyz is 503 while migrations are pending, and lists them', async () => {
  // A database that never ran its migrations (what `serve --no-migrate` meets on a new database).
  const empty = await createTestDatabase();
  const app = await buildApp({ config: testConfig(empty), logger: false, skipMigrations: true });
  try {
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(res.statusCode, 503);
    assert.deepEqual(res.json(), { status: 'unavailable', reason: 'migrations pending', pending: listMigrations().map((m) => m.name) });
    assert.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'alive all the same');
  } finally {
    await app.close();
    await empty.drop();
  }
});

/** A TCP forwarder we can cut: the app's database "goes away" without touching the shared server. */
async function tcpProxy(target: { host: string; port: number }, listenPort = 0) {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => server.listen(listenPort, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    async cut() {
      await new Promise<void>((r) => {
        server.close(() => r());
        for (const s of sockets) s.destroy();
      });
    },
  };
}

test('GET /readyz is 503 when the database is unreachable, and 200 again when it is back', async () => {
  if (BACKEND === 'postgres') {
    const tdb = await createTestDatabase();
    const real = new URL(tdb.config.DATABASE_URL!);
    const proxy = await tcpProxy({ host: real.hostname, port: Number(real.port || 5432) });
    const viaProxy = new URL(real.href);
    viaProxy.port = String(proxy.port);
    const t = await startApp(
      { DATABASE_URL: viaProxy.href, DB_TIMEOUT_MS: 2000 },
      { config: { DATABASE_URL: viaProxy.href }, drop: () => tdb.drop() },
    );
    apps.push(t);
    assert.equal((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
    // A transaction holding a connection, idle between two statements, when the server goes away: pg
    // emits 'error' on that connection, which must fail the transaction, not crash the process.
    let resume!: () => void;
    let began!: () => void;
    const begun = new Promise<void>((r) => (began = r));
    const held = t.app.db.transaction(async (tx) => {
      await tx.query('select 1');
      began();
      await new Promise<void>((r) => (resume = r));
      await tx.query('select 1');
    });
    await begun;

    await proxy.cut();
    resume();
    await assert.rejects(held, /Connection terminated|connection/i);
    const down = await t.app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(down.statusCode, 503);
    assert.deepEqual(down.json(), { status: 'unavailable', reason: 'database unreachable' });
    assert.equal(
      (await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode,
      200,
      'the process is alive: do not restart it for a database outage',
    );
    // A ping meanwhile is refused, not lost or hung.
    const ping = await t.app.inject({ method: 'GET', url: '/pingSiteForm?name=x&url=http%3A%2F%2Fdown.example.com%2F' });
    assert.equal(ping.statusCode, 503);

    const back = await tcpProxy({ host: real.hostname, port: Number(real.port || 5432) }, proxy.port);
    try {
      const up = await t.app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(up.statusCode, 200, up.body);
    } finally {
      await t.close();
      apps.splice(apps.indexOf(t), 1);
      await back.cut();
    }
  } else {
    const t = await startApp();
    apps.push(t);
    assert.equal((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
    await t.app.db.close(); // the embedded database is gone (closed under the app)
    const down = await t.app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(down.statusCode, 503);
    assert.deepEqual(down.json(), { status: 'unavailable', reason: 'database unreachable' });
    assert.equal((await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
    const ping = await t.app.inject({ method: 'GET', url: '/pingSiteForm?name=x&url=http%3A%2F%2Fdown.example.com%2F' });
    assert.equal(ping.statusCode, 503);
  }
});

test('GET /readyz is 503 once shutdown has begun', async () => {
  const t = await startApp();
  let during: unknown;
  // Runs during close, after the listener stopped and before the database closes.
  t.app.addHook('onClose', async (instance) => {
    during = await instance.readiness();
  });
  await t.listen();
  assert.deepEqual(await t.app.readiness(), { ready: true, database: BACKEND });
  await t.close();
  assert.deepEqual(during, { ready: false, reason: 'shutting down' });
});

test(
  'GET /readyz is 503 "database read-only" on a server that answers reads but refuses writes',
  { skip: BACKEND !== 'postgres' && 'a PostgreSQL session setting (the embedded database has no standby)' },
  async () => {
    // What a standby looks like to a pool that reached it (target_session_attrs=any, a proxy routing to
    // the wrong node): the migrations' check passes, every ping fails with SQLSTATE 25006.
    const tdb = await createTestDatabase({ migrated: true });
    const u = new URL(tdb.config.DATABASE_URL!);
    u.searchParams.set('options', '-c default_transaction_read_only=on');
    const app = await buildApp({ config: testConfig({ ...tdb, config: { DATABASE_URL: u.href } }), logger: false, skipMigrations: true });
    try {
      const res = await app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(res.statusCode, 503);
      assert.deepEqual(res.json(), { status: 'unavailable', reason: 'database read-only' });
    } finally {
      await app.close();
      await tdb.drop();
    }
  },
);
