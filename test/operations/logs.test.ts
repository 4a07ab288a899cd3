// Logs: one JSON object per line from Fastify's own pino logger, each request's lines carrying its
// request id (returned as X-Request-Id), LOG_LEVEL honoured, and no secret (database password, tokens)
// ever written, whether the app runs in-process or as the real CLI process.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { buildApp } from '../../src/app.js';
import { redactUrl, safeConfig } from '../../src/server.js';
import { describeConfig } from '../../src/platform/config.js';
import { createTestDatabase, methodCall, testConfig, uniqueUrl, type TestDatabase } from '../helpers/app.js';
import { CLI } from '../helpers/cli.js';

const dbs: TestDatabase[] = [];
after(async () => {
  for (const d of dbs) await d.drop();
});

function capture() {
  const lines: Record<string, unknown>[] = [];
  let raw = '';
  return {
    lines,
    get raw() {
      return raw;
    },
    stream: {
      write(chunk: string) {
        raw += chunk;
        for (const l of chunk.split('\n')) if (l.trim()) lines.push(JSON.parse(l)); // throws if not JSON
      },
    },
  };
}

const PASSWORD = 'Pa55-w0rd-never-logged';
const TOKEN = 'metrics-token-never-logged';

/** On the real server the test database takes a password it does not check (trust authentication). */
function withPassword(url: string | undefined): string | undefined {
  if (!url) return undefined;
  const u = new URL(url);
  u.username = u.username || 'postgres';
  u.password = PASSWORD;
  return u.href;
}

test('at LOG_LEVEL=debug every request logs JSON lines with its reqId, echoed as X-Request-Id; secrets stay out', async () => {
  const tdb = await createTestDatabase();
  dbs.push(tdb);
  const cap = capture();
  const config = testConfig(tdb, { LOG_LEVEL: 'debug', METRICS_TOKEN: TOKEN, DATABASE_URL: withPassword(tdb.config.DATABASE_URL) });
  const app = await buildApp({ config, logStream: cap.stream });
  try {
    const ping = await app.inject({
      method: 'POST',
      url: '/RPC2',
      headers: { 'content-type': 'text/xml' },
      payload: methodCall('weblogUpdates.ping', ['Log blog', uniqueUrl('log')]),
    });
    assert.match(ping.body, /<boolean>0<\/boolean>/);
    const id = ping.headers['x-request-id'] as string;
    assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const mine = cap.lines.filter((l) => l.reqId === id);
    assert.ok(
      mine.some((l) => l.msg === 'incoming request'),
      JSON.stringify(cap.lines.slice(-3)),
    );
    assert.ok(mine.some((l) => l.msg === 'request completed' && (l.res as { statusCode: number }).statusCode === 200));
    for (const l of mine) assert.equal(typeof l.time, 'number');

    const metrics = await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(metrics.statusCode, 200);
    const ids = new Set(cap.lines.map((l) => l.reqId).filter(Boolean));
    assert.ok(ids.size >= 2, 'one id per request');
  } finally {
    await app.close();
  }
  assert.ok(cap.lines.length > 0);
  assert.ok(!cap.raw.includes(PASSWORD), 'the database password is never logged');
  assert.ok(!cap.raw.includes(TOKEN), 'the metrics token is never logged');
});

test('LOG_LEVEL is honoured: at warn, info lines are not written', async () => {
  const tdb = await createTestDatabase();
  dbs.push(tdb);
  for (const [level, expectInfo] of [
    ['warn', false],
    ['info', true],
  ] as const) {
    const cap = capture();
    const app = await buildApp({ config: testConfig(tdb, { LOG_LEVEL: level }), logStream: cap.stream });
    await app.ready();
    await app.inject({ method: 'GET', url: '/readyz' }); // the first probe logs "ready" at info
    await app.close();
    const infos = cap.lines.filter((l) => l.level === 30);
    assert.equal(infos.length > 0, expectInfo, `${level}: ${JSON.stringify(cap.lines)}`);
    assert.ok(cap.lines.every((l) => (l.level as number) >= (level === 'warn' ? 40 : 30)));
  }
});

test('a proxy X-Request-Id is kept only behind a trusted proxy, and only when it looks like an id', async () => {
  const tdb = await createTestDatabase();
  dbs.push(tdb);
  for (const trust of [true, false]) {
    const app = await buildApp({ config: testConfig(tdb, { TRUST_PROXY: trust ? 1 : false }), logger: false });
    try {
      const kept = await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'lb-7f3a9c' } });
      assert.equal(kept.headers['x-request-id'] === 'lb-7f3a9c', trust);
      const junk = await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'a b\u0001<script>' } });
      assert.match(junk.headers['x-request-id'] as string, /^[0-9a-f-]{36}$/);
    } finally {
      await app.close();
    }
  }
});

test('safeConfig and redactUrl mask passwords and tokens', () => {
  assert.equal(
    redactUrl('postgres://pingd:hunter2@db:5432/pingd?sslpassword=x&application_name=a'),
    'postgres://redacted:redacted@db:5432/pingd?sslpassword=redacted&application_name=a',
  );
  const tdb = { config: { DATABASE_URL: 'postgres://u:hunter2@h/d' }, drop: async () => undefined };
  const c = safeConfig(testConfig(tdb, { METRICS_TOKEN: 'tok-123' }));
  const text = JSON.stringify(c);
  assert.ok(!text.includes('hunter2') && !text.includes('tok-123'), text);
  assert.equal(c.METRICS_TOKEN, '[redacted]');
  assert.equal(c.DATABASE_URL, 'postgres://redacted:redacted@h/d');
  assert.equal(c.PORT, 8080);
});

test("credentials in a list setting (RELAY_TARGETS) are masked in the logged configuration, by the table's secret mark", () => {
  const tdb = { config: {}, drop: async () => undefined };
  const targets = [
    'http://relayuser:relaypass@127.0.0.1:9/RPC2',
    'http://127.0.0.1:9/ping?token=relaytoken',
    'http://apikey123@127.0.0.1:9/',
  ];
  const c = safeConfig(testConfig(tdb, { RELAY_TARGETS: Object.freeze(targets) }));
  const text = JSON.stringify(c);
  for (const secret of ['relayuser', 'relaypass', 'relaytoken', 'apikey123'])
    assert.ok(!text.includes(secret), `${secret} leaked: ${text}`);
  assert.deepEqual(c.RELAY_TARGETS, [
    'http://redacted:redacted@127.0.0.1:9/RPC2',
    'http://127.0.0.1:9/ping?token=redacted',
    'http://redacted@127.0.0.1:9/',
  ]);
  // Every secret-looking name in the table carries the mark (a new token without it fails here).
  for (const row of describeConfig())
    if (/TOKEN|SECRET|PASSWORD|DATABASE_URL|TARGETS/.test(row.name)) assert.ok(row.secret, `${row.name} is not marked secret`);
});

test('the real process: a start against an unreachable database fails with exit 1 and never prints the password', async () => {
  // (The startup line of a process that does start is checked in shutdown.test.ts.)
  const r = spawnSync(process.execPath, [...CLI, 'serve'], {
    env: {
      ...process.env,
      LOG_LEVEL: 'info',
      PORT: '0',
      DATABASE_URL: `postgres://pingd:${PASSWORD}@127.0.0.1:1/pingd`,
      DB_TIMEOUT_MS: '1000',
      METRICS_TOKEN: TOKEN,
    },
    encoding: 'utf8',
    timeout: 20_000,
  });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /pingd serve: .*ECONNREFUSED 127\.0\.0\.1:1/);
  assert.ok(!(r.stdout + r.stderr).includes(PASSWORD), r.stdout + r.stderr);
  assert.ok(!(r.stdout + r.stderr).includes(TOKEN));
});
