import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig, ConfigError, describeConfig } from '../../src/platform/config.js';
import { readFileSync } from 'node:fs';

test('defaults', () => {
  const c = loadConfig({});
  assert.equal(c.PORT, 8080);
  assert.equal(c.HOST, '0.0.0.0');
  assert.equal(c.DATABASE_URL, undefined);
  assert.equal(c.DATA_DIR, './data');
  assert.equal(c.LOG_LEVEL, 'info');
  assert.equal(c.PING_MIN_INTERVAL, 300);
  assert.equal(c.TRUST_PROXY, false);
  assert.ok(Object.isFrozen(c));
});

test('bad values fail fast naming the variable', () => {
  const bad: [Record<string, string>, string][] = [
    [{ PORT: 'eighty' }, 'PORT must be an integer, got "eighty"'],
    [{ PORT: '70000' }, 'PORT must be between 0 and 65535, got 70000'],
    [{ PING_MIN_INTERVAL: '-1' }, 'PING_MIN_INTERVAL must be between 0 and 604800, got -1'],
    [
      { TRUST_PROXY: 'maybe' },
      'TRUST_PROXY must be false, a number of proxy hops (1-10), or proxy addresses/CIDR ranges; "maybe" is none of these',
    ],
    [{ TRUST_PROXY: '11' }, 'TRUST_PROXY must be between 1 and 10, got 11'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL must be a postgres:// URL, got scheme mysql:'],
    [{ DATABASE_URL: 'not a url' }, 'DATABASE_URL must be a postgres:// URL'],
    [{ RENDER_CRON: '* *' }, 'RENDER_CRON must be a cron expression of 5 or 6 fields, got "* *"'],
    [{ ADMIN_TOKEN: 'letmein' }, 'ADMIN_TOKEN must be at least 16 characters (e.g. `openssl rand -hex 32`), got 7'],
  ];
  for (const [env, msg] of bad)
    assert.throws(
      () => loadConfig(env),
      (e: unknown) => e instanceof ConfigError && e.message === msg,
      msg,
    );
});

test('booleans and URLs parse', () => {
  const c = loadConfig({ TRUST_PROXY: 'yes', DATABASE_URL: 'postgres://u@h/db', PING_MIN_INTERVAL: '0' });
  assert.equal(c.TRUST_PROXY, 1, 'true trusts one hop, the nearest proxy');
  assert.deepEqual(loadConfig({ TRUST_PROXY: '10.0.0.0/8, loopback' }).TRUST_PROXY, ['10.0.0.0/8', 'loopback']);
  assert.equal(loadConfig({ TRUST_PROXY: '2' }).TRUST_PROXY, 2);
  assert.equal(c.DATABASE_URL, 'postgres://u@h/db');
  assert.equal(c.PING_MIN_INTERVAL, 0);
});

test('every variable is documented in the configuration reference and .env.example', () => {
  const reference = readFileSync(new URL('../../docs/reference/configuration.md', import.meta.url), 'utf8');
  const example = readFileSync(new URL('../../.env.example', import.meta.url), 'utf8');
  for (const v of describeConfig()) {
    assert.ok(reference.includes(`| \`${v.name}\``), `docs/reference/configuration.md documents ${v.name}`);
    assert.match(example, new RegExp(`^#? ?${v.name}=`, 'm'), `.env.example lists ${v.name}`);
  }
});
