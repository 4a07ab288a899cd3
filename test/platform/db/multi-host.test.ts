// libpq's multi-host DATABASE_URL (multi-host.ts): what the parser reads from each form, that the config
// accepts it and every place that prints it hides the password, and, on the PostgreSQL run, that the
// client skips a refusing host and a silent one (bounded by connect_timeout) to reach the database.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import {
  HostRing,
  describeHosts,
  multiHostClient,
  parseMultiHostUrl,
  sessionMismatch,
  MultiHostUrlError,
} from '../../../src/platform/db/multi-host.js';
import { loadConfig, ConfigError } from '../../../src/platform/config.js';
import { redactUrl } from '../../../src/platform/redact.js';
import { describeDatabase } from '../../../src/platform/db/which-database.js';
import { openDatabase } from '../../../src/platform/db/database.js';
import { BACKEND, createTestDatabase, type TestDatabase } from '../../helpers/app.js';
import { startProxy, type FaultyProxy } from '../../faults/private-postgres.js';
import { waitFor } from '../../helpers/wait.js';

const hostsOf = (url: string) => parseMultiHostUrl(url).hosts.map((h) => `${h.host}|${h.port}`);

test('host lists: each host with its port, in order; a host without one takes 5432', () => {
  assert.deepEqual(hostsOf('postgres://u:p@h1:5432,h2:5433/db'), ['h1|5432', 'h2|5433']);
  assert.deepEqual(hostsOf('postgresql://h1,h2:6000,h3/db'), ['h1|5432', 'h2|6000', 'h3|5432']);
  assert.deepEqual(hostsOf('postgres://db.example:5432/pingd'), ['db.example|5432']);
  assert.deepEqual(hostsOf('POSTGRES://H1/db'), ['H1|5432']);
  assert.deepEqual(hostsOf('postgres:///pingd'), ['localhost|5432'], 'no host: libpq default');
});

test('IPv6 addresses in brackets, with and without a port', () => {
  assert.deepEqual(hostsOf('postgres://[::1]:5433,[fe80::1%25eth0],127.0.0.1/db'), ['::1|5433', 'fe80::1%25eth0|5432', '127.0.0.1|5432']);
  assert.equal(describeHosts(parseMultiHostUrl('postgres://[::1]:5433,h2/db').hosts), '[::1]:5433,h2:5432');
  assert.throws(() => parseMultiHostUrl('postgres://[::1:5432/db'), MultiHostUrlError);
  assert.throws(() => parseMultiHostUrl('postgres://[::1]x/db'), MultiHostUrlError);
});

test("libpq's query forms: ?host= and ?port= lists, one port for all", () => {
  assert.deepEqual(hostsOf('postgres:///db?host=h1,h2&port=5433'), ['h1|5433', 'h2|5433']);
  assert.deepEqual(hostsOf('postgres:///db?host=h1,h2&port=5433,5434'), ['h1|5433', 'h2|5434']);
  assert.deepEqual(hostsOf('postgres:///db?host=%2Fvar%2Frun%2Fpostgresql'), ['/var/run/postgresql|5432'], 'a socket directory');
  assert.deepEqual(hostsOf('postgres://%2Ftmp%2Fpg/db'), ['/tmp/pg|5432']);
  assert.throws(() => parseMultiHostUrl('postgres:///db?host=h1,h2,h3&port=1,2'), /2 ports for 3 hosts/);
});

test('bad ports, empty hosts and foreign schemes are refused with the reason', () => {
  assert.throws(() => parseMultiHostUrl('postgres://h1:0,h2/db'), /invalid port "0"/);
  assert.throws(() => parseMultiHostUrl('postgres://h1:99999/db'), /invalid port/);
  assert.throws(() => parseMultiHostUrl('postgres://h1:x/db'), /invalid port "x"/);
  assert.throws(() => parseMultiHostUrl('postgres://h1,,h2/db'), /empty host/);
  assert.throws(() => parseMultiHostUrl('mysql://h1/db'), /not a postgres/);
  assert.throws(() => parseMultiHostUrl('postgres://h1/db?target_session_attrs=master'), /target_session_attrs must be one of/);
  assert.throws(() => parseMultiHostUrl('postgres://h1/db?connect_timeout=2.5'), /whole seconds/);
});

test('target_session_attrs and connect_timeout as libpq reads them', () => {
  const u = parseMultiHostUrl('postgres://h1,h2/db?target_session_attrs=read-write&connect_timeout=5');
  assert.equal(u.targetSessionAttrs, 'read-write');
  assert.equal(u.connectTimeoutMs, 5000);
  assert.equal(parseMultiHostUrl('postgres://h1/db').targetSessionAttrs, 'any', "libpq's default");
  assert.equal(parseMultiHostUrl('postgres://h1/db?connect_timeout=1').connectTimeoutMs, 2000, 'under 2 s counts as 2 s');
  assert.equal(parseMultiHostUrl('postgres://h1/db?connect_timeout=0').connectTimeoutMs, undefined, '0 waits forever');
  for (const v of ['any', 'read-write', 'read-only', 'primary', 'standby', 'prefer-standby'])
    assert.equal(parseMultiHostUrl(`postgres://h1/db?target_session_attrs=${v}`).targetSessionAttrs, v);
});

test('user, password and database percent-decoded; other options go to pg as its own parser reads them', () => {
  const u = parseMultiHostUrl(
    'postgres://us%40er:p%40ss%2Fw%3Ard@h1:5432,h2:5433/my%20db?sslmode=disable&application_name=pingd-a&target_session_attrs=primary&options=-c%20statement_timeout%3D5s',
  );
  assert.equal(u.base.user, 'us@er');
  assert.equal(u.base.password, 'p@ss/w:rd');
  assert.equal(u.base.database, 'my db');
  assert.equal(u.database, 'my db');
  assert.equal(u.base.ssl, false);
  assert.equal(u.base.application_name, 'pingd-a');
  assert.equal(u.base.options, '-c statement_timeout=5s');
  const base = u.base as Record<string, unknown>;
  for (const own of ['host', 'port', 'target_session_attrs', 'connect_timeout']) assert.equal(base[own], undefined, own);
});

test('one host, no session attrs, no connect_timeout: simple (pg reads the URL itself, as before)', () => {
  assert.equal(parseMultiHostUrl('postgres://u:p@h1:5432/db').simple, true);
  assert.equal(parseMultiHostUrl('postgres://u:p@h1:5432/db?sslmode=disable').simple, true);
  assert.equal(parseMultiHostUrl('postgres://h1/db?target_session_attrs=any').simple, true);
  assert.equal(parseMultiHostUrl('postgres://h1,h2/db').simple, false);
  assert.equal(parseMultiHostUrl('postgres://h1/db?target_session_attrs=read-write').simple, false);
  assert.equal(parseMultiHostUrl('postgres://h1/db?connect_timeout=3').simple, false);
});

test("read-write as libpq reads a server's start-up report: a PostgreSQL 15 standby says default_transaction_read_only off", async () => {
  // pg_auto_failover#970: a client that looked at default_transaction_read_only alone took a standby for a
  // primary (it reports off; in_hot_standby on is what says standby). No statement is sent when both are reported.
  const noQuery = { query: () => assert.fail('no statement when the server reported both') } as unknown as pg.Client;
  const standby = new Map([
    ['default_transaction_read_only', 'off'],
    ['in_hot_standby', 'on'],
  ]);
  const primary = new Map([
    ['default_transaction_read_only', 'off'],
    ['in_hot_standby', 'off'],
  ]);
  const readOnlyPrimary = new Map([
    ['default_transaction_read_only', 'on'],
    ['in_hot_standby', 'off'],
  ]);
  assert.match((await sessionMismatch(noQuery, standby, 'read-write')) ?? '', /read-only/);
  assert.equal(await sessionMismatch(noQuery, primary, 'read-write'), undefined);
  assert.match((await sessionMismatch(noQuery, readOnlyPrimary, 'read-write')) ?? '', /read-only/);
  assert.equal(await sessionMismatch(noQuery, readOnlyPrimary, 'primary'), undefined, 'primary: only in_hot_standby counts');
  assert.match((await sessionMismatch(noQuery, standby, 'primary')) ?? '', /standby/);
  assert.equal(await sessionMismatch(noQuery, standby, 'standby'), undefined);
  assert.equal(await sessionMismatch(noQuery, standby, 'read-only'), undefined);
  // A server before 14 reports neither: asked, as libpq does.
  const asked: string[] = [];
  const old = {
    query: async (sql: string) => {
      asked.push(sql);
      return { rows: [/transaction_read_only/.test(sql) ? { transaction_read_only: 'on' } : { r: true }] };
    },
  } as unknown as pg.Client;
  assert.match((await sessionMismatch(old, new Map(), 'read-write')) ?? '', /read-only/);
  assert.match((await sessionMismatch(old, new Map(), 'primary')) ?? '', /standby/);
  assert.deepEqual(asked, ['SHOW transaction_read_only', 'SELECT pg_catalog.pg_is_in_recovery() AS r']);
});

test('DATABASE_URL accepts the multi-host form, refuses a broken one naming the setting', () => {
  const url = 'postgres://pingd:s3cret@127.0.0.1:5432,127.0.0.2:5433/pingd?target_session_attrs=read-write&connect_timeout=5';
  assert.equal(loadConfig({ DATABASE_URL: url }).DATABASE_URL, url);
  assert.throws(
    () => loadConfig({ DATABASE_URL: 'postgres://h1:5432,h2:x/db' }),
    (e: Error) => e instanceof ConfigError && /DATABASE_URL.*invalid port/.test(e.message),
  );
  assert.throws(() => loadConfig({ DATABASE_URL: 'http://h1/db' }), /DATABASE_URL must be a postgres:\/\/ URL, got scheme http:/);
});

test('a multi-host URL is printed without user or password', () => {
  const url = 'postgres://pingd:s3cret@h1:5432,[::1]:5433/pingd?target_session_attrs=read-write&password=x';
  const redacted = redactUrl(url);
  assert.equal(redacted, 'postgres://redacted:redacted@h1:5432,[::1]:5433/pingd?target_session_attrs=read-write&password=redacted');
  assert.doesNotMatch(redacted, /s3cret|pingd:/);
  assert.equal(describeDatabase({ DATABASE_URL: url, DATA_DIR: '.' }), 'postgres h1:5432,[::1]:5433/pingd');
  assert.equal(describeDatabase({ DATABASE_URL: 'postgres://u:p@db:6543/x', DATA_DIR: '.' }), 'postgres db:6543/x');
  assert.equal(redactUrl('postgres://u:p@db:6543/x'), 'postgres://redacted:redacted@db:6543/x', 'one host as before');
});

// Against the real server: the shared one is only connected to (a test database of this file's own).
const onPostgres = { skip: BACKEND !== 'postgres' && 'needs a PostgreSQL server (TEST_DATABASE_URL): the embedded database has no hosts' };
let tdb: TestDatabase | undefined;
let proxy: FaultyProxy | undefined;
after(async () => {
  await proxy?.close();
  await tdb?.drop();
});

/** The test database's URL with `first` listed before its own host. */
async function listedAfter(first: string, query: string): Promise<string> {
  tdb ??= await createTestDatabase();
  const u = new URL(tdb.config.DATABASE_URL!);
  return `postgres://${u.username}@${first},${u.hostname}:${u.port || 5432}${u.pathname}?${query}`;
}

test('a refused first host is skipped; the pool remembers where the database is', onPostgres, async () => {
  const moves: string[] = [];
  const db = await openDatabase({
    databaseUrl: await listedAfter('127.0.0.1:1', 'target_session_attrs=read-write'),
    dataDir: '.',
    poolMax: 2,
    timeoutMs: 5000,
    onHostMove: (from, to) => moves.push(`${describeHosts([from])}->${describeHosts([to])}`),
  });
  try {
    const [row] = await db.query<{ transaction_read_only: string }>('show transaction_read_only');
    assert.equal(row.transaction_read_only, 'off');
    await Promise.all([db.transaction(async (tx) => tx.query('select 1')), db.query('select 2')]);
    assert.equal(moves.length, 1, `told once, not per connection: ${moves.join(', ')}`);
    assert.match(moves[0], /^127\.0\.0\.1:1->/);
  } finally {
    await db.close();
  }
});

test('a silent first host costs connect_timeout, then the next host answers; LISTEN too', onPostgres, async () => {
  const target = new URL((tdb ??= await createTestDatabase()).config.DATABASE_URL!);
  proxy = await startProxy(target.hostname, Number(target.port || 5432));
  proxy.blackhole();
  const url = await listedAfter(`127.0.0.1:${proxy.port}`, 'connect_timeout=2');
  const plan = parseMultiHostUrl(url);
  const Client = multiHostClient(new HostRing(plan));
  const c = new Client({});
  const t0 = performance.now();
  await c.connect();
  const ms = performance.now() - t0;
  try {
    assert.ok(ms >= 1900 && ms < 4500, `connected in ${Math.round(ms)} ms: one connect_timeout (2 s) on the silent host`);
    assert.equal((await c.query('select 1 as one')).rows[0].one, 1);
    assert.equal((c as unknown as { port: number }).port, Number(target.port || 5432), 'on the second host');
  } finally {
    await c.end();
  }
  // The pool's LISTEN connection picks its host the same way.
  const db = await openDatabase({ databaseUrl: url, dataDir: '.', poolMax: 2, timeoutMs: 5000 });
  try {
    const heard: string[] = [];
    const stop = await db.listen('pingd_multi_host', (p) => heard.push(p));
    await db.notify('pingd_multi_host', 'hello');
    await waitFor(() => heard.includes('hello'), { what: 'the notification', timeoutMs: 5000 });
    await stop();
  } finally {
    await db.close();
  }
});

test('no host answering: connect fails naming every host and why', async () => {
  const Client = multiHostClient(new HostRing(parseMultiHostUrl('postgres://postgres@127.0.0.1:1,127.0.0.1:2/x?connect_timeout=2')));
  const c: pg.Client = new Client({});
  await assert.rejects(
    c.connect(),
    /no host of 127\.0\.0\.1:1,127\.0\.0\.1:2 gave a session: 127\.0\.0\.1:1: .*ECONNREFUSED.*; 127\.0\.0\.1:2: .*ECONNREFUSED/,
  );
});

test('a connection whose server answers writes with 25006 (read-only) leaves the pool', onPostgres, async () => {
  // The server turned read-only under the connection (an old primary back as a standby, a proxy pointing
  // at a standby): here every session of the pool is read-only from the start.
  tdb ??= await createTestDatabase();
  const u = new URL(tdb.config.DATABASE_URL!);
  u.searchParams.set('options', '-c default_transaction_read_only=on');
  const db = await openDatabase({ databaseUrl: u.href, dataDir: '.', poolMax: 2, timeoutMs: 5000 });
  try {
    await assert.rejects(
      db.transaction((tx) => tx.exec('create table pingd_never (x int)')),
      (err: Error & { code?: string }) => err.code === '25006',
    );
    assert.equal(db.poolStats().total, 0, 'the connection was dropped, not returned to the pool');
  } finally {
    await db.close();
  }
});
