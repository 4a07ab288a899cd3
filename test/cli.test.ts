import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createTestDatabase } from './helpers/app.js';

const cli = (args: string[], env: Record<string, string | undefined> = {}) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], { env: { ...process.env, LOG_LEVEL: 'silent', ...env }, encoding: 'utf8' });

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
