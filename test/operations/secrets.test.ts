// Credentials in settings that are lists (RELAY_TARGETS) stay out of everything pingd shows: the log
// lines of a start (the refused-target warning names each target), /metrics labels, the operator API's
// `relay status`, the /status page. Redaction follows the config table's `secret` mark.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { buildApp } from '../../src/app.js';
import { createTestDatabase, testConfig, type TestDatabase } from '../helpers/app.js';
import { waitFor } from '../helpers/wait.js';

const dbs: TestDatabase[] = [];
after(async () => {
  for (const d of dbs) await d.drop();
});

const SECRETS = ['relayuser', 'relaypass', 'relaytoken', 'apikey123', 'urlsecret'];
const TARGETS = Object.freeze([
  'http://relayuser:relaypass@127.0.0.1:9/RPC2',
  'http://127.0.0.1:9/ping?token=relaytoken',
  'http://apikey123@127.0.0.1:9/',
  'http://127.0.0.1:9/x?auth=urlsecret',
]);
const ADMIN = 'admin-token-for-secrets-test-0123';

function leaked(text: string): string[] {
  return SECRETS.filter((s) => text.includes(s));
}

test('a user, password or query token in RELAY_TARGETS never reaches the logs, /metrics, relay status or /status', async () => {
  const tdb = await createTestDatabase({ migrated: true });
  dbs.push(tdb);
  let raw = '';
  const config = testConfig(tdb, { LOG_LEVEL: 'info', RELAY_TARGETS: TARGETS, ADMIN_TOKEN: ADMIN, RENDER_SCHEDULER: false });
  const app = await buildApp({ config, logStream: { write: (c: string) => void (raw += c) } });
  try {
    await app.ready();
    // The start's warning about targets the address policy refuses is written once the policy has looked.
    await waitFor(() => raw.includes('address policy refuses'), {
      what: 'the refused-target warning in the log',
      timeoutMs: 5000,
      intervalMs: 50,
    });
    assert.deepEqual(leaked(raw), [], `the log leaked: ${raw.slice(0, 2000)}`);

    const metrics = await app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(metrics.statusCode, 200);
    assert.match(metrics.body, /pingd_relay/, 'the relay metrics are there');
    assert.deepEqual(leaked(metrics.body), [], 'the /metrics labels leaked');

    const status = await app.inject({
      method: 'POST',
      url: '/api/admin/cli',
      headers: { authorization: `Bearer ${ADMIN}` },
      payload: { argv: ['relay', 'status'] },
    });
    assert.equal(status.statusCode, 200, status.body);
    assert.match(status.body, /127\.0\.0\.1:9/, 'relay status names the targets');
    assert.deepEqual(leaked(status.body), [], 'relay status leaked');
    const json = await app.inject({
      method: 'POST',
      url: '/api/admin/cli',
      headers: { authorization: `Bearer ${ADMIN}` },
      payload: { argv: ['relay', 'status', '--json'] },
    });
    assert.equal(json.statusCode, 200, json.body);
    assert.deepEqual(leaked(json.body), [], 'relay status --json leaked');

    const page = await app.inject({ method: 'GET', url: '/status' });
    assert.equal(page.statusCode, 200);
    assert.deepEqual(leaked(page.body), [], '/status leaked');
  } finally {
    await app.close();
  }
  assert.deepEqual(leaked(raw), [], 'the log leaked at shutdown');
});
