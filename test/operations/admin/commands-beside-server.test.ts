// What broke: with `pingd serve` running on the embedded database, every other command (stats, relay
// status, feeds show, publisher add, render…) exited 1, "the embedded database … is in use by another pingd
// process": the data directory has one owner. Now the command runs in the server, through its admin socket
// (DATA_DIR/pingd.sock); on PostgreSQL it connects to the database itself, as before. With no server the
// commands open the database themselves, and a socket a crashed server left behind is passed over.
// Every command says on stderr which database it used: through the socket, the server's.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { BACKEND, createTestDatabase, testConfig, uniqueUrl, type TestDatabase } from '../../helpers/app.js';
import { resolve } from 'node:path';
import { adminSocketPath } from '../../../src/operations/admin/socket.js';
import { startServer, type Server } from '../../faults/serve-process.js';
import { CLI } from '../../helpers/cli.js';

const ROOT = new URL('../../../', import.meta.url).pathname;
const SECRET = randomBytes(32).toString('hex');
const blog = uniqueUrl('beside');
const publisher = `http://publisher-${randomBytes(3).toString('hex')}.example.com/`;

let tdb: TestDatabase;
let server: Server | undefined;
let env: Record<string, string>;
let socket: string;
/** The line every command prints first on stderr: this test's database. */
let dbLine: string;

/** `pingd <args>` as an operator types it, in a process of its own (async: the server may be this test's child). */
function cli(args: string[], extra: Record<string, string> = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...CLI, ...args], {
      cwd: ROOT,
      env: { ...process.env, LOG_LEVEL: 'silent', ...env, ...extra },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** A socket file nobody listens on, as a server killed with SIGKILL leaves it. */
function staleSocket(path: string): void {
  const r = spawnSync(process.execPath, [
    '-e',
    `require('net').createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, 'SIGKILL'))`,
  ]);
  assert.equal(r.signal, 'SIGKILL', r.stderr?.toString());
  assert.ok(statSync(path).isSocket(), 'the stale socket is there');
}

before(async () => {
  tdb = await createTestDatabase({ migrated: true });
  const cfg = testConfig(tdb);
  env = cfg.DATABASE_URL ? { DATABASE_URL: cfg.DATABASE_URL } : { DATABASE_URL: '', DATA_DIR: cfg.DATA_DIR };
  socket = adminSocketPath(cfg.DATA_DIR);
  const u = cfg.DATABASE_URL ? new URL(cfg.DATABASE_URL) : undefined;
  dbLine = u
    ? `pingd: database: postgres ${u.hostname}:${u.port || 5432}${u.pathname}\n`
    : `pingd: database: embedded ${resolve(cfg.DATA_DIR)}\n`;
  // A crash left its socket: the server replaces it at start.
  if (BACKEND === 'pglite') staleSocket(socket);
  server = await startServer({ ...env, RSSPING_SECRET: SECRET, VERIFY_PINGS: 'off' });
  const ping = await fetch(`http://127.0.0.1:${server.port}/pingSiteForm?name=Beside&url=${encodeURIComponent(blog)}`);
  assert.equal(ping.status, 200, await ping.text());
});

after(async () => {
  if (server && server.child.exitCode === null) {
    server.child.kill('SIGKILL');
    await server.exited;
  }
  await tdb?.drop();
});

test(
  'beside a running server, stats, relay status, feeds show, publisher add and render exit 0 (they exited 1: the database was in use)',
  { timeout: 120_000 },
  async () => {
    if (BACKEND === 'pglite') {
      const st = statSync(socket);
      assert.ok(st.isSocket());
      assert.equal(st.mode & 0o777, 0o600, "only the server's user may connect");
    } else {
      assert.equal(existsSync(socket), false, 'on PostgreSQL the command line connects to the database itself');
    }

    const stats = await cli(['stats', '--json']);
    assert.equal(stats.status, 0, stats.stderr);
    const s = JSON.parse(stats.stdout);
    assert.deepEqual([s.totals.weblogs, s.totals.pingsAccepted, s.top[0].url], [1, 1, blog]);

    // Through the socket the line is the server's; no warning: a server runs on it.
    const relay = await cli(['relay', 'status']);
    assert.deepEqual(relay, { status: 0, stdout: 'no relay targets yet (set RELAY_TARGETS or RELAY_FILE)\n', stderr: dbLine });
    assert.equal(stats.stderr, dbLine);

    const feeds = await cli(['feeds', 'show', blog]);
    assert.equal(feeds.status, 0, feeds.stderr);
    assert.match(feeds.stdout, new RegExp(`^url: ${blog.replace(/[.]/g, '\\.')}\nname: Beside\n`));

    // Through the socket the server's configuration holds the key; on PostgreSQL the CLI needs its own.
    const add = await cli(['publisher', 'add', publisher, '--json'], BACKEND === 'postgres' ? { RSSPING_SECRET: SECRET } : {});
    assert.equal(add.status, 0, add.stderr);
    const added = JSON.parse(add.stdout);
    assert.deepEqual([added.site_uri, added.replaced, added.password.length], [publisher, false, 24]);

    const render = await cli(['render']);
    assert.equal(render.status, 0, render.stderr);
    assert.match(render.stdout, /^rendered \/changes\.xml: 1 entries, \d+ bytes/m);

    // Refusals keep their exit codes through the socket: a usage error is 2, with its message.
    const usage = await cli(['stats', '--top', '0']);
    assert.equal(usage.status, 2);
    assert.match(usage.stderr, /^pingd stats: --top must be a whole number between 1 and 1000, got "0"\nUsage: pingd stats/);
  },
);

test(
  'with no server running the commands open the database themselves; a stale socket file is passed over',
  { timeout: 120_000 },
  async () => {
    server!.child.kill('SIGTERM');
    assert.equal(await server!.exited, 0);
    assert.equal(existsSync(socket), false, 'the server removes its socket when it stops');

    const list = await cli(['publisher', 'list', '--json']);
    assert.equal(list.status, 0, list.stderr);
    assert.deepEqual(
      JSON.parse(list.stdout).map((p: { site_uri: string }) => p.site_uri),
      [publisher],
    );

    if (BACKEND === 'pglite') staleSocket(socket);
    const stats = await cli(['stats', '--json']);
    assert.equal(stats.status, 0, stats.stderr);
    assert.equal(JSON.parse(stats.stdout).totals.pingsAccepted, 1);
    // Opened here, on a directory a server ran on (it left its mark): the line, and no warning.
    const relay = await cli(['relay', 'status']);
    assert.deepEqual(relay, { status: 0, stdout: 'no relay targets yet (set RELAY_TARGETS or RELAY_FILE)\n', stderr: dbLine });
  },
);
