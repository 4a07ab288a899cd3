// Stream positions never go back: the pings' sequence is raised past the highest position an instance has
// seen when a server is behind it (raisePositions, run on every new PostgreSQL connection by the stream
// plugin). A promoted asynchronous standby is such a server: its sequence resumes below ids already sent
// for pings it never received. Here the same state is made on one server (the sequence set back, the last
// pings deleted, pingd's connections cut); test/faults/failover-stream.test.ts does it with a real failover.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { BACKEND, startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { openStream, type SseConnection } from '../../helpers/sse-client.js';
import { waitFor } from '../../helpers/wait.js';
import { latestPosition, raisePositions } from '../../../src/push/stream/event-repository.js';

const apps: TestApp[] = [];
const conns: SseConnection[] = [];
after(async () => {
  for (const c of conns) c.close();
  for (const a of apps) await a.close();
});

async function ping(base: string, url: string): Promise<Response> {
  return fetch(`${base}/pingSiteForm?name=${encodeURIComponent(`Blog ${url}`)}&url=${encodeURIComponent(url)}`);
}

const idOf = async (t: TestApp, url: string) =>
  Number((await t.app.db.query<{ id: number }>('select max(id) as id from pings where url = $1', [url]))[0].id);

test('raisePositions: raised to the value asked only when the sequence is below what was seen; never taken back', async () => {
  const t = await startApp({ RENDER_SCHEDULER: false });
  apps.push(t);
  const base = await t.listen();
  for (let i = 0; i < 3; i++) assert.equal((await ping(base, uniqueUrl('positions'))).status, 200);
  const last = await latestPosition(t.app.db);
  assert.equal(await raisePositions(t.app.db, 0, 1000), null, 'nothing seen: nothing read');
  assert.equal(await raisePositions(t.app.db, last, last + 1000), null, 'the sequence is at what was seen: its next value is past it');
  assert.equal(await raisePositions(t.app.db, last + 5, last + 1000), last, 'behind what was seen: raised, and says from where');
  assert.equal(await raisePositions(t.app.db, last + 5, last + 50), null, 'already past: a lower raise does nothing');
  const url = uniqueUrl('positions');
  assert.equal((await ping(base, url)).status, 200);
  assert.equal(await idOf(t, url), last + 1001);
});

test(
  "a server whose positions went back (a promoted standby without the last pings) is raised by pingd's next connection: a live client gets the next ping",
  { skip: BACKEND !== 'postgres' && 'the embedded database has one session, which never moves to another server' },
  async () => {
    // PING_MIN_INTERVAL 0: a ping refused on a cut connection may have been stored all the same; its repeat must not be throttled.
    const t = await startApp({ RENDER_SCHEDULER: false, PING_MIN_INTERVAL: 0 });
    apps.push(t);
    const base = await t.listen();
    const c = await openStream(`${base}/stream?types=ping`);
    conns.push(c);
    await c.waitUntil(() => c.retry !== null);
    for (let i = 0; i < 5; i++) assert.equal((await ping(base, uniqueUrl('positions'))).status, 200);
    await c.waitFor(5);
    const sent = Number(c.events[4].id);

    // The server goes back: its last three pings gone and its sequence below their ids, as on a standby
    // promoted before it received them; pingd's connections cut, as by the old primary's crash.
    const admin = new pg.Client({ connectionString: t.config.DATABASE_URL });
    await admin.connect();
    try {
      await admin.query('delete from pings where id > $1', [sent - 3]);
      await admin.query(`select setval(pg_get_serial_sequence('pings', 'id'), $1)`, [sent - 3]);
      await admin.query(
        `select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`,
      );
    } finally {
      await admin.end();
    }

    // A ping sent on a connection the server cut is refused; the next one takes a new connection.
    const url = uniqueUrl('positions-after');
    await waitFor(async () => (await ping(base, url)).status === 200, { what: 'a ping stored after the connections were cut' });
    const id = await idOf(t, url);
    assert.ok(id > sent, `the ping stored after took id ${id}, past ${sent}, the last the client was sent`);
    await c.waitUntil((x) => x.events.some((e) => JSON.parse(e.data).url === url), 15_000, 'the live client to get the ping stored after');
  },
);
