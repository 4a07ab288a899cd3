// A target taken out of RELAY_TARGETS left its waiting jobs pending for ever: `relay status` listed them,
// the queue's depth and oldest age (/metrics, /api/stats) counted them, and neither `relay retry` nor
// retention cleared them. A start without the target now makes them dead letters, and only its own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, createTestDatabase, startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { notConfiguredRefusal } from '../../../src/push/relay/relay-command.js';
import { NOT_CONFIGURED_ERROR } from '../../../src/push/relay/target-repository.js';
import { derivedAll, httpPing, relayCli } from './helpers.js';
import { waitFor } from '../../helpers/wait.js';

// Nothing listens on either, and the address policy refuses loopback (FETCH_ALLOW_ADDRESSES unset): every
// attempt fails before a connection and is retried 30 s later, so the jobs wait, and no traffic leaves.
const A = 'http://127.0.0.46:9/RPC2';
const B = 'http://127.0.0.47:9/RPC2';

const cli = relayCli;

type Jobs = { target: string; state: string; last_error: string | null }[];
const jobs = (t: TestApp) =>
  t.app.db.query<Jobs[number]>('select target, state, last_error from relay_jobs order by target, id') as Promise<Jobs>;

test('a start without a target makes its waiting jobs dead letters, and leaves the others waiting', async () => {
  const tdb = await createTestDatabase({ migrated: true });
  let both: TestApp | undefined;
  let onlyA: TestApp | undefined;
  try {
    both = await startApp({ RELAY_TARGETS: [A, B] }, tdb);
    const base = await both.listen();
    for (const name of ['one', 'two']) assert.equal(await httpPing(base, name, uniqueUrl(`removed-${name}`)), 200);
    await derivedAll(both.app.db);
    await waitFor(async () => (await jobs(both!)).length === 4, { timeoutMs: 5000, what: 'four jobs' });
    // On PostgreSQL the first instance keeps running (two instances, two configurations, one database);
    // the embedded database has one process: it is restarted.
    if (BACKEND === 'pglite') {
      await both.close();
      both = undefined;
    }
    onlyA = await startApp({ RELAY_TARGETS: [A] }, tdb);
    await onlyA.app.ready();

    const after = await jobs(onlyA);
    assert.deepEqual(
      after.map((j) => [j.target, j.state]),
      [
        [A, 'pending'],
        [A, 'pending'],
        [B, 'dead'],
        [B, 'dead'],
      ],
    );
    assert.deepEqual([...new Set(after.filter((j) => j.target === B).map((j) => j.last_error))], [NOT_CONFIGURED_ERROR]);

    const stats = (await onlyA.app.inject('/api/stats')).json() as { health: { queues: { name: string; depth: number }[] } };
    assert.equal(stats.health.queues.find((q) => q.name === 'relay')?.depth, 2, "A's two jobs only");
    assert.match((await onlyA.app.inject('/metrics')).body, /^pingd_relay_queue\{measure="depth"\} 2$/m);

    const status = await cli(onlyA, 'status');
    assert.equal(status.code, 0);
    const [, bPart] = status.out.split(`${B}\n`);
    assert.match(
      bPart,
      /^ {2}not configured since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: not relayed to; its waiting jobs were made dead letters/,
    );
    assert.match(bPart, /dead letters 2\n {2}waiting {3}0 /);
    assert.doesNotMatch(status.out.split(`${B}\n`)[0], /not configured/, 'A is configured');

    const [{ since }] = await onlyA.app.db.query<{ since: Date }>('select unconfigured_at as since from relay_targets where url = $1', [B]);
    assert.deepEqual(await cli(onlyA, 'retry', B), { code: 1, out: notConfiguredRefusal(B, new Date(since)) });
    assert.equal(
      notConfiguredRefusal(B, new Date('2026-11-28T05:00:00.123Z')),
      `pingd relay retry: ${B} is not configured: a server started without it in RELAY_TARGETS / RELAY_FILE at 2026-11-28T05:00:00Z and made its waiting jobs dead letters; add it back, restart the server, then retry`,
    );
    assert.equal((await jobs(onlyA)).filter((j) => j.state === 'dead').length, 2, 'the refused retry queued nothing');
  } finally {
    await onlyA?.close();
    await both?.close();
    await tdb.drop();
  }
});

test('a target configured again loses its mark, and its dead letters can be retried', async () => {
  const tdb = await createTestDatabase({ migrated: true });
  const apps: TestApp[] = [];
  try {
    const first = await startApp({ RELAY_TARGETS: [B] }, tdb);
    apps.push(first);
    assert.equal(await httpPing(await first.listen(), 'Back', uniqueUrl('back')), 200);
    await derivedAll(first.app.db);
    await waitFor(async () => (await jobs(first)).length === 1, { timeoutMs: 5000, what: 'a job' });
    await first.close();
    apps.pop();
    // No target at all: the relay is off, and B's job is settled as well.
    const none = await startApp({}, tdb);
    apps.push(none);
    await none.app.ready();
    assert.deepEqual(
      (await jobs(none)).map((j) => j.state),
      ['dead'],
    );
    await none.close();
    apps.pop();
    const again = await startApp({ RELAY_TARGETS: [B] }, tdb);
    apps.push(again);
    await again.app.ready();
    const status = await cli(again, 'status');
    assert.doesNotMatch(status.out, /not configured/);
    assert.equal((await cli(again, 'retry', B)).out, `1 dead letters of ${B} queued again`);
  } finally {
    for (const t of apps) await t.close();
    await tdb.drop();
  }
});
