// Error codes: every error pingd raises on purpose carries a code and the HTTP status from the one table.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ERROR_STATUS, PingdError, withContext } from '../../src/platform/errors.js';
import { ConfigError } from '../../src/platform/config.js';
import { DatabaseError } from '../../src/platform/db/database.js';
import { FetchError } from '../../src/platform/fetch/safe-fetch.js';
import { CharsetError } from '../../src/platform/xml/decode.js';
import { PingValidationError } from '../../src/intake/ping/validate.js';
import { StorageUnavailableError } from '../../src/intake/ping/ping-batcher.js';
import { RssPingError } from '../../src/intake/rss-ping/parse.js';
import { SecretBoxError } from '../../src/intake/rss-ping/secret-box.js';
import { XmlRpcFault } from '../../src/intake/xmlrpc/parse.js';
import { BlocklistFileError } from '../../src/intake/abuse/blocklist-file.js';

test('each error class carries its code and the status the table gives it', () => {
  const cases: [PingdError, string, number][] = [
    [new ConfigError('x'), 'CONFIG_INVALID', 500],
    [new DatabaseError('x', 'DB_LOCKED'), 'DB_LOCKED', 503],
    [new FetchError('FETCH_TIMEOUT', 'x', 'http://a/'), 'FETCH_TIMEOUT', 504],
    [new CharsetError('x'), 'CHARSET_UNSUPPORTED', 400],
    [new PingValidationError('x', 'url'), 'PING_INVALID', 400],
    [new StorageUnavailableError('x'), 'STORAGE_UNAVAILABLE', 503],
    [new RssPingError('x'), 'RSSPING_INVALID', 400],
    [new SecretBoxError('x'), 'RSSPING_SECRET_MISMATCH', 503],
    [new XmlRpcFault(-32602, 'x'), 'XMLRPC_FAULT', 200],
    [new BlocklistFileError('x'), 'BLOCKLIST_UNREADABLE', 500],
  ];
  for (const [err, code, status] of cases) {
    assert.ok(err instanceof PingdError, code);
    assert.ok(err instanceof Error, code);
    assert.equal(err.code, code);
    assert.equal(err.statusCode, status, code);
    assert.equal(ERROR_STATUS[err.code], status, code);
    assert.equal(err.message, 'x');
  }
});

test('no two error classes share a name, and every code in the table is an UPPER_SNAKE name', () => {
  for (const code of Object.keys(ERROR_STATUS)) assert.match(code, /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$/);
  const names = [
    ConfigError,
    DatabaseError,
    FetchError,
    CharsetError,
    PingValidationError,
    StorageUnavailableError,
    RssPingError,
    SecretBoxError,
    XmlRpcFault,
    BlocklistFileError,
  ].map((c) => c.name);
  assert.equal(new Set(names).size, names.length);
});

test('withContext wraps a failure with what was being done, keeping the cause', async () => {
  const cause = new Error('connection refused');
  await assert.rejects(
    withContext('reading the clock', async () => {
      throw cause;
    }),
    (err: unknown) =>
      err instanceof PingdError &&
      err.code === 'DB_QUERY_FAILED' &&
      err.statusCode === 503 &&
      err.message === 'reading the clock: connection refused' &&
      err.cause === cause,
  );
  assert.equal(await withContext('fine', async () => 42), 42);
});
