// The operator API: POST /api/admin/cli and the subscriptions list (GET /api/admin/websub/subscriptions,
// and GET /api/websub/subscriptions, open to anyone before) answer only over the admin socket or with
// `Authorization: Bearer <ADMIN_TOKEN>`; `serve` is refused; one command runs at a time.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { BACKEND, startApp, type TestApp } from '../../helpers/app.js';
import { adminSocketPath } from '../../../src/operations/admin/socket.js';
import { RENDER_LOCK } from '../../../src/publishing/render/renderer.js';
import { loadConfig } from '../../../src/platform/config.js';
import { safeConfig } from '../../../src/server.js';
import { databaseLine } from '../../../src/platform/db/which-database.js';
import { PUBLISHER_REFUSALS } from '../../../src/intake/rss-ping/publisher-command.js';

const TOKEN = 'admin-test-token-0123456789abcdef';
const NEEDS_TOKEN = 'This needs ADMIN_TOKEN: send "Authorization: Bearer <token>".';
const HTTP_OFF =
  'The operator API over HTTP is off: ADMIN_TOKEN is not set. Set it and send "Authorization: Bearer <token>", or use the socket pingd.sock in DATA_DIR.';

const ROUTES = [
  { method: 'POST', url: '/api/admin/cli', payload: { argv: ['relay', 'status'] } },
  { method: 'GET', url: '/api/admin/websub/subscriptions' },
  { method: 'GET', url: '/api/websub/subscriptions' },
] as const;

let t: TestApp;
before(async () => {
  t = await startApp({ ADMIN_TOKEN: TOKEN, RENDER_SCHEDULER: false });
});
after(async () => {
  await t?.close();
});

const cli = (app: TestApp, argv: unknown, headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` }) =>
  app.app.inject({ method: 'POST', url: '/api/admin/cli', headers, payload: { argv } });

test('the operator routes answer 401 without the token or with a wrong one, 200 with ADMIN_TOKEN', async () => {
  for (const r of ROUTES) {
    const inject = (headers: Record<string, string>) =>
      t.app.inject({ method: r.method, url: r.url, headers, ...('payload' in r ? { payload: r.payload } : {}) });
    const wrong: Record<string, string>[] = [
      {},
      { authorization: 'Bearer wrong-token-0123456789abcdef' },
      { authorization: TOKEN },
      { authorization: `Basic ${TOKEN}` },
    ];
    for (const headers of wrong) {
      const res = await inject(headers);
      assert.equal(res.statusCode, 401, `${r.method} ${r.url} ${JSON.stringify(headers)}`);
      assert.deepEqual(res.json(), { error: 'ADMIN_UNAUTHORIZED', message: NEEDS_TOKEN });
      assert.equal(res.headers['www-authenticate'], 'Bearer realm="pingd admin"');
    }
    const ok = await inject({ authorization: `Bearer ${TOKEN}` });
    assert.equal(ok.statusCode, 200, `${r.method} ${r.url}: ${ok.body}`);
    assert.equal(ok.headers['cache-control'], 'no-store');
    if (r.url === '/api/admin/cli')
      assert.deepEqual(ok.json(), {
        code: 0,
        stdout: 'no relay targets yet (set RELAY_TARGETS or RELAY_FILE)\n',
        stderr: `${databaseLine(t.config)}\n`,
      });
    else assert.deepEqual(ok.json(), { next: null, subscriptions: [] });
  }
  // Loopback is no authorization: a real connection from 127.0.0.1 needs the token too.
  const url = await t.listen();
  assert.equal((await fetch(`${url}/api/websub/subscriptions`)).status, 401);
  assert.equal((await fetch(`${url}/api/admin/websub/subscriptions`, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
});

test('without ADMIN_TOKEN the operator API over HTTP is off (401, saying so); the token never reaches the starting log line', async () => {
  const off = await startApp({ RENDER_SCHEDULER: false });
  try {
    for (const r of ROUTES) {
      const res = await off.app.inject({
        method: r.method,
        url: r.url,
        headers: { authorization: 'Bearer anything-at-all-0123456789' },
        ...('payload' in r ? { payload: r.payload } : {}),
      });
      assert.equal(res.statusCode, 401);
      assert.deepEqual(res.json(), { error: 'ADMIN_UNAUTHORIZED', message: HTTP_OFF });
    }
  } finally {
    await off.close();
  }
  assert.equal(safeConfig(loadConfig({ ADMIN_TOKEN: TOKEN })).ADMIN_TOKEN, '[redacted]');
});

test('POST /api/admin/cli runs a command in the server and answers its exit code and output; serve is refused (400)', async () => {
  const serve = await cli(t, ['serve']);
  assert.equal(serve.statusCode, 400);
  assert.deepEqual(serve.json(), {
    error: 'ADMIN_COMMAND_REFUSED',
    message: '`pingd serve` starts a server; it cannot run inside one. Start it as a process of its own.',
  });

  const stats = await cli(t, ['stats', '--json', '--hours', '2']);
  assert.equal(stats.statusCode, 200);
  const s = stats.json();
  assert.equal(s.code, 0, s.stderr);
  assert.equal(JSON.parse(s.stdout).perHour.length, 2);
  // Usage errors and unknown commands are exit codes in the answer, as the command line gives them.
  const usage = (await cli(t, ['stats', '--top', '0'])).json();
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /^pingd stats: --top must be a whole number between 1 and 1000, got "0"\nUsage: pingd stats/);
  const unknown = (await cli(t, ['frobnicate'])).json();
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /^pingd: unknown command "frobnicate"\n\nUsage: pingd <command>/);
  assert.doesNotMatch(unknown.stderr, /^ {2}serve /m, 'the server lists what it can run');
  const failed = (await cli(t, ['relay', 'retry', 'http://unknown.example/'])).json();
  assert.deepEqual(failed, {
    code: 1,
    stdout: '',
    stderr: `${databaseLine(t.config)}\npingd relay retry: no target "http://unknown.example/" (see pingd relay status for the URLs)\n`,
  });
  // What broke: run in a server without RSSPING_SECRET, `publisher add` said "RSSPING_SECRET is not set" to
  // an operator who had set it in the shell the command came from.
  assert.equal(t.config.RSSPING_SECRET, undefined);
  assert.deepEqual((await cli(t, ['publisher', 'add', 'http://publisher.example/'])).json(), {
    code: 78,
    stdout: '',
    stderr: `${PUBLISHER_REFUSALS.serverNoSecret}\n`,
  });
  assert.equal(
    PUBLISHER_REFUSALS.serverNoSecret,
    'pingd publisher: the running server has no RSSPING_SECRET: set it in its environment and restart it (publisher passwords are encrypted with it; see docs/reference/rss-ping.md). The command ran in the server, so the RSSPING_SECRET of this shell is not used.',
  );
  // The command closes the database it was given; the server's stays open.
  assert.equal((await cli(t, ['stats'])).json().code, 0);
  assert.equal((await t.app.inject({ url: '/readyz' })).statusCode, 200);
  // No command line: Fastify's schema answer.
  const none = await t.app.inject({ method: 'POST', url: '/api/admin/cli', headers: { authorization: `Bearer ${TOKEN}` }, payload: {} });
  assert.equal(none.statusCode, 400);
  assert.match(none.json().message, /must have required property 'argv'/);
});

test('a second command while one runs is refused (409 ADMIN_BUSY); the first still finishes', { timeout: 60_000 }, async () => {
  // A render waits for the render lock (up to 30 s) while something else holds it.
  let release!: () => void;
  let acquired!: () => void;
  const locked = new Promise<void>((r) => (acquired = r));
  const holding = t.app.db.withTryAdvisoryLock(RENDER_LOCK, async () => {
    acquired();
    await new Promise<void>((r) => (release = r));
  });
  await locked;
  const first = cli(t, ['render']);
  let busy;
  for (const deadline = Date.now() + 20_000; ;) {
    const r = await cli(t, ['--help']);
    if (r.statusCode === 409) {
      busy = r;
      break;
    }
    assert.equal(r.statusCode, 200, r.body);
    assert.ok(Date.now() < deadline, 'the render never showed as running');
  }
  assert.deepEqual(busy.json(), {
    error: 'ADMIN_BUSY',
    message: 'Another operator command is running in this server; try again when it is done.',
  });
  release();
  await holding;
  const done = (await first).json();
  assert.equal(done.code, 0, done.stderr);
  assert.match(done.stdout, /^rendered \/changes\.xml/m);
  assert.equal((await cli(t, ['--help'])).json().code, 0, 'the slot is free again');
});

test('closing the server waits for the command running in it: its database closes after', { timeout: 60_000 }, async () => {
  const s = await startApp({ ADMIN_TOKEN: TOKEN, RENDER_SCHEDULER: false });
  let release!: () => void;
  let acquired!: () => void;
  const locked = new Promise<void>((r) => (acquired = r));
  const holding = s.app.db.withTryAdvisoryLock(RENDER_LOCK, async () => {
    acquired();
    await new Promise<void>((r) => (release = r));
  });
  await locked;
  const render = cli(s, ['render']);
  while ((await cli(s, ['--help'])).statusCode !== 409);
  // The render retries the lock every 500 ms: a database closed under it would fail it.
  const closing = s.close();
  release();
  await holding;
  const done = (await render).json();
  assert.equal(done.code, 0, done.stderr);
  await closing;
});

test('over the admin socket no token is needed; it is 0600, and goes away with the server (embedded database only)', async () => {
  // On PostgreSQL DATA_DIR means nothing: a directory of the test's own shows that no socket is made there.
  const dir = BACKEND === 'postgres' ? mkdtempSync(join(tmpdir(), 'pingd-admin-')) : undefined;
  const s = await startApp({ RENDER_SCHEDULER: false, ...(dir ? { DATA_DIR: dir } : {}) });
  const path = adminSocketPath(s.config.DATA_DIR);
  try {
    assert.equal(existsSync(path), false, 'not before the server listens');
    await s.listen();
    if (BACKEND === 'postgres') {
      assert.equal(existsSync(path), false);
      return;
    }
    assert.equal(statSync(path).mode & 0o777, 0o600);
    for (const r of ROUTES) {
      const res = await overSocket(path, r.method, r.url, 'payload' in r ? JSON.stringify(r.payload) : undefined);
      assert.equal(res.status, 200, `${r.method} ${r.url}: ${res.body}`);
    }
    const ran = JSON.parse((await overSocket(path, 'POST', '/api/admin/cli', JSON.stringify({ argv: ['stats', '--json'] }))).body);
    assert.equal(ran.code, 0, ran.stderr);
    assert.equal(JSON.parse(ran.stdout).totals.weblogs, 0);
  } finally {
    await s.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
  assert.equal(existsSync(path), false, 'removed on close');
});

function overSocket(socketPath: string, method: string, path: string, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method, path, headers: body ? { 'content-type': 'application/json' } : {} }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
