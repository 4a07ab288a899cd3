// A subscriber's bug stays the subscriber's: an outcome listener that throws after the commit is logged,
// and the ping it was told of is still answered as stored (REGRESSION: the throw turned a committed ping
// into an error reply, so the client would ping again for a ping already kept).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { createTestDatabase, testConfig, methodCall, rpc, uniqueUrl, type TestDatabase } from '../../helpers/app.js';
import { findPingsByUrl } from '../../helpers/rows.js';
import { buildApp } from '../../../src/app.js';

let db: TestDatabase;
let app: FastifyInstance;
const logs: string[] = [];
const told: string[] = [];

before(async () => {
  db = await createTestDatabase({ migrated: true });
  app = await buildApp({ config: testConfig(db, { LOG_LEVEL: 'error' }), logStream: { write: (l: string) => void logs.push(l) } });
  await app.ready();
  app.pings.onOutcome(() => {
    throw new Error('listener bug');
  });
  // A listener after the throwing one is still told.
  app.pings.onOutcome((_m, r) => void (r.ok && told.push(r.ping.url)));
  app.pings.onAnswered(() => {
    throw new Error('answered listener bug');
  });
});
after(async () => {
  await app.close();
  await db.drop();
});

test('a listener that throws after the commit: the ping is still answered flerror 0 and stored', async () => {
  const url = uniqueUrl('listener');
  const r = await rpc(app, methodCall('weblogUpdates.ping', ['Listener', url]));
  assert.equal(r.status, 200, r.body);
  assert.equal(r.flerror, false, r.body);
  assert.equal((await findPingsByUrl(app.db, url)).length, 1, 'stored once');
  assert.deepEqual(told, [url], 'the listeners after the throwing one were told');
  const logged = logs.map((l) => JSON.parse(l) as { msg: string; err?: { message: string } }).filter((l) => l.msg === 'listener failed');
  assert.ok(
    logged.some((l) => l.err?.message === 'listener bug'),
    `the throw is logged: ${logs.join('')}`,
  );
});

test('a refusal reported to a throwing listener is still answered as that refusal', async () => {
  const r = await rpc(app, methodCall('weblogUpdates.ping', ['Listener', 'not a url']));
  assert.equal(r.status, 200, r.body);
  assert.equal(r.flerror, true, r.body);
  assert.doesNotMatch(r.message ?? '', /listener bug/);
});
