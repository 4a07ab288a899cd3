import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { BACKEND, createTestDatabase } from './helpers/app.js';
import { CLI } from './helpers/cli.js';
import { waitFor } from './helpers/wait.js';
import { freePort } from './faults/private-postgres.js';
import { describeDatabase } from '../src/platform/db/which-database.js';

const cli = (args: string[], env: Record<string, string | undefined> = {}) =>
  spawnSync(process.execPath, [...CLI, ...args], {
    env: { ...process.env, LOG_LEVEL: 'silent', ...env },
    encoding: 'utf8',
  });

test('pingd migrate applies the schema, then reports it up to date (exit 0)', async () => {
  const tdb = await createTestDatabase();
  try {
    const env = { DATABASE_URL: tdb.config.DATABASE_URL ?? '', DATA_DIR: tdb.config.DATA_DIR ?? './data' };
    const first = cli(['migrate'], env);
    assert.equal(first.status, 0, first.stderr);
    assert.match(first.stdout, /^applied: 001_init\.sql/);
    const second = cli(['migrate'], env);
    assert.equal(second.status, 0, second.stderr);
    assert.equal(second.stdout.trim(), 'schema is up to date');
  } finally {
    await tdb.drop();
  }
});

test('usage errors exit 2, configuration errors 78, --help 0', () => {
  const none = cli([]);
  assert.equal(none.status, 2);
  assert.match(none.stdout, /^Usage: pingd <command>/);
  const unknown = cli(['frobnicate']);
  assert.equal(unknown.status, 2);
  assert.match(unknown.stderr, /unknown command "frobnicate"/);
  const badFlag = cli(['migrate', '--bogus']);
  assert.equal(badFlag.status, 2);
  assert.match(badFlag.stderr, /Unknown option '--bogus'/);
  const badEnv = cli(['migrate'], { PORT: 'x' });
  assert.equal(badEnv.status, 78);
  assert.match(badEnv.stderr, /configuration error: PORT must be an integer/);
  const help = cli(['migrate', '--help']);
  assert.equal(help.status, 0);
  assert.match(help.stdout, /Usage: pingd migrate/);
});

// What broke: `npm start` (bin/pingd.js) and the CLI ignored `.env`, which only Compose read.
test('.env in the working directory configures the CLI and bin/pingd.js; the environment wins over it', async () => {
  const root = new URL('../', import.meta.url).pathname;
  const cwd = mkdtempSync(join(tmpdir(), 'pingd-dotenv-'));
  const tdb = await createTestDatabase({ migrated: true });
  const env: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: 'silent', PORT: '8080' };
  for (const name of ['DATABASE_URL', 'DATA_DIR', 'RETENTION_DAYS']) delete env[name];
  const run = (entry: string[], args: string[]) =>
    spawnSync(process.execPath, [...entry, ...args], { cwd, env, encoding: 'utf8', timeout: 60_000 });
  const src = [...CLI];
  try {
    const where = tdb.config.DATABASE_URL ? `DATABASE_URL=${tdb.config.DATABASE_URL}` : `DATA_DIR=${tdb.config.DATA_DIR}`;
    // PORT is set in the environment: the file's bad value is never read.
    writeFileSync(join(cwd, '.env'), `# pingd settings\n${where}\nPORT=eighty\n`);
    const stats = run(src, ['stats', '--json']);
    assert.equal(stats.status, 0, stats.stderr);
    assert.equal(JSON.parse(stats.stdout).totals.weblogs, 0);

    writeFileSync(join(cwd, '.env'), `${where}\nRETENTION_DAYS=soon\n`);
    assert.ok(existsSync(join(root, 'dist/cli.js')), 'bin/pingd.js runs the build: `npm run build` (npm install makes it)');
    for (const entry of [src, [join(root, 'bin/pingd.js')]]) {
      const bad = run(entry, ['migrate']);
      assert.equal(bad.status, 78, `${entry.join(' ')}: ${bad.stderr}`);
      assert.equal(bad.stderr, 'pingd: configuration error: RETENTION_DAYS must be an integer, got "soon"\n');
    }
  } finally {
    rmSync(cwd, { recursive: true, force: true });
    await tdb.drop();
  }
});

// What the issue asked: the start-up log said nothing of the .env it read, so an operator could not tell
// whether the file in the working directory was the one that configured the server.
test('serve names the .env it read and what it took in the start-up log', async () => {
  const root = new URL('../', import.meta.url).pathname;
  const cwd = mkdtempSync(join(tmpdir(), 'pingd-dotenv-serve-'));
  const tdb = await createTestDatabase({ migrated: true });
  const port = await freePort();
  const env: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: 'info', PORT: String(port), HOST: '127.0.0.1' };
  for (const name of ['DATABASE_URL', 'DATA_DIR', 'RETENTION_DAYS']) delete env[name];
  const where = tdb.config.DATABASE_URL ? `DATABASE_URL=${tdb.config.DATABASE_URL}` : `DATA_DIR=${tdb.config.DATA_DIR}`;
  // Two settings taken; PORT is set in the environment, which wins.
  writeFileSync(join(cwd, '.env'), `# pingd settings\n${where}\nRETENTION_DAYS=7\nPORT=1\n`);
  const child = spawn(process.execPath, [join(root, 'bin/pingd.js'), 'serve'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const exited = new Promise((r) => child.once('exit', r));
  try {
    const line = await waitFor(
      () => {
        if (child.exitCode !== null) throw new Error(`serve exited with ${child.exitCode}: ${out}`);
        return out.split('\n').find((l) => l.includes('"envFile"'));
      },
      { what: () => `the .env line in the log: ${out}`, timeoutMs: 60_000 },
    );
    const entry = JSON.parse(line);
    assert.equal(entry.msg, `read 2 settings from ${join(cwd, '.env')} (1 more it names were set in the environment, which wins)`);
    assert.deepEqual(
      [entry.envFile, entry.taken, entry.overridden],
      [join(cwd, '.env'), [where.split('=')[0], 'RETENTION_DAYS'], ['PORT']],
    );
  } finally {
    child.kill('SIGTERM');
    await exited;
    rmSync(cwd, { recursive: true, force: true });
    await tdb.drop();
  }
});

// What broke: with the server on PostgreSQL, `npx pingd stats` in a shell without DATABASE_URL opened the
// checkout's embedded ./data and printed its numbers, exit 0. Every command now names its database on
// stderr (stdout stays the script's), and warns about an embedded directory no server has run on.
test('a command says which database it opened on stderr, and warns about an embedded directory no server ran on', async () => {
  const tdb = await createTestDatabase({ migrated: true });
  try {
    const env = { DATABASE_URL: tdb.config.DATABASE_URL ?? '', DATA_DIR: tdb.config.DATA_DIR ?? './data' };
    const r = cli(['stats', '--json'], env);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).totals.pingsAccepted, 0, 'stdout is the JSON alone');
    if (BACKEND === 'pglite') {
      const dir = tdb.config.DATA_DIR!;
      assert.equal(
        r.stderr,
        `pingd: database: embedded ${dir}\npingd: warning: no pingd server has ever run on the embedded database in ${dir}; if your server uses PostgreSQL or another directory, set DATABASE_URL or DATA_DIR as it has them\n`,
      );
    } else {
      const u = new URL(tdb.config.DATABASE_URL!);
      assert.equal(r.stderr, `pingd: database: postgres ${u.hostname}:${u.port || 5432}${u.pathname}\n`);
    }
  } finally {
    await tdb.drop();
  }
  // Never the user, the password or the options.
  assert.equal(
    describeDatabase({ DATABASE_URL: 'postgres://pingd:hunter2@db.internal:6432/pings?sslpassword=x', DATA_DIR: '' }),
    'postgres db.internal:6432/pings',
  );
  assert.equal(
    describeDatabase({ DATABASE_URL: 'postgresql:///pingd?host=/var/run/postgresql', DATA_DIR: '' }),
    'postgres /var/run/postgresql:5432/pingd',
  );
  assert.equal(describeDatabase({ DATABASE_URL: undefined, DATA_DIR: 'data' }), `embedded ${process.cwd()}/data`);
});
