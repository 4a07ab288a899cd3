// The FETCH_* and RSSPING_* variables: defaults that keep production safe, and refusals naming the variable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig, ConfigError } from '../../../src/platform/config.js';
import { checkAddress } from '../../../src/platform/fetch/address-policy.js';

const refused = (env: Record<string, string>, message: string) =>
  assert.throws(
    () => loadConfig(env),
    (e: unknown) => e instanceof ConfigError && e.message === message,
  );

test('defaults: no private addresses, 5 s deadline, auth optional, hash URIs verified, publisher-side off', () => {
  const c = loadConfig({});
  assert.equal(c.FETCH_ALLOW_PRIVATE, false);
  assert.deepEqual(c.FETCH_ALLOW_ADDRESSES, []);
  assert.equal(c.FETCH_TIMEOUT_MS, 5000);
  assert.equal(c.FETCH_CONTACT_URL, undefined);
  assert.equal(c.RSSPING_REQUIRE_AUTH, false);
  assert.equal(c.RSSPING_VERIFY_HASH_URI, true);
  assert.equal(c.RSSPING_BODY_LIMIT, 262144);
  assert.equal(c.RSSPING_SECRET, undefined);
});

test('FETCH_ALLOW_ADDRESSES takes addresses and CIDR ranges, and only those', () => {
  const c = loadConfig({ FETCH_ALLOW_ADDRESSES: '10.20.0.0/16, fd00::1 192.168.1.5' });
  const policy = { allowPrivate: c.FETCH_ALLOW_PRIVATE, allow: c.FETCH_ALLOW_ADDRESSES };
  assert.deepEqual(checkAddress('10.20.3.4', policy), { allowed: true });
  assert.deepEqual(checkAddress('192.168.1.5', policy), { allowed: true });
  assert.deepEqual(checkAddress('192.168.1.6', policy), { allowed: false, range: 'private' });
  assert.deepEqual(checkAddress('fd00::1', policy), { allowed: true });
  refused({ FETCH_ALLOW_ADDRESSES: 'intranet.local' }, 'FETCH_ALLOW_ADDRESSES: "intranet.local" is not an IP address or CIDR range');
  refused({ FETCH_ALLOW_ADDRESSES: '10.0.0.0/40' }, 'FETCH_ALLOW_ADDRESSES: "10.0.0.0/40" has an invalid prefix length');
});

test('bad values are refused with the variable named', () => {
  refused({ RSSPING_SECRET: 'short' }, 'RSSPING_SECRET must be at least 32 characters (e.g. `openssl rand -hex 32`), got 5');
  refused({ FETCH_CONTACT_URL: 'mailto:ops@example.com' }, 'FETCH_CONTACT_URL must be an http(s) URL, got "mailto:ops@example.com"');
  refused({ FETCH_TIMEOUT_MS: '50' }, 'FETCH_TIMEOUT_MS must be between 100 and 60000, got 50');
  refused({ FETCH_ALLOW_PRIVATE: 'maybe' }, 'FETCH_ALLOW_PRIVATE must be true or false, got "maybe"');
  refused({ RSSPING_BODY_LIMIT: '10' }, 'RSSPING_BODY_LIMIT must be between 1024 and 10485760, got 10');
  assert.equal(loadConfig({ FETCH_CONTACT_URL: 'https://ops.example.org/pingd' }).FETCH_CONTACT_URL, 'https://ops.example.org/pingd');
});
