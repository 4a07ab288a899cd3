// Several instances on one database: exactly one renders at a time (advisory lock), the others serve what
// it stored — the same bytes and ETags. And the cursor never runs ahead of a ping still being committed.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { BACKEND, createTestDatabase, startApp, testConfig, uniqueUrl, type TestApp } from '../helpers/app.js';
import { buildApp } from '../../src/app.js';
import { RENDER_LOCK } from '../../src/publishing/render/renderer.js';
import { parseToken } from '../../src/publishing/read/conditional.js';
import { archivePath, hourStart } from '../../src/publishing/documents/archive.js';
import { strictParse } from './helpers.js';

/** A promise and its resolver: lets a test hold a render inside the lock for as long as it needs. */
function gate() {
  let open!: () => void;
  const p = new Promise<void>((r) => (open = r));
  return { p, open };
}

async function fetchAll(t: TestApp, path: string) {
  const out: Record<string, { etag: string; body: string }> = {};
  for (const ae of ['identity', 'gzip', 'br']) {
    const r = await t.app.inject({ url: path, headers: { 'accept-encoding': ae } });
    assert.equal(r.statusCode, 200, `${path} ${ae}`);
    out[ae] = { etag: String(r.headers.etag), body: r.rawPayload.toString('base64') };
  }
  return out;
}

describe('two instances on one database', () => {
  if (BACKEND === 'pglite') {
    test('embedded database: a second instance cannot open it, so there is only ever one renderer', async () => {
      const a = await startApp({ RENDER_SCHEDULER: false });
      try {
        await assert.rejects(
          buildApp({ config: testConfig(a.db, { RENDER_SCHEDULER: false }), logger: false }),
          (err: Error & { code?: string }) =>
            err.code === 'DB_LOCKED' && /in use by another pingd process|already open in this process/.test(err.message),
        );
        // Within the one process, renders never overlap either: a tick asked for while one runs is skipped.
        const g = gate();
        let inside!: () => void;
        const entered = new Promise<void>((r) => (inside = r));
        const first = a.app.renderer.tick({ onLocked: async () => (inside(), g.p) });
        await entered;
        try {
          assert.equal(await a.app.renderer.tick({ skipIfBusy: true }), null);
        } finally {
          g.open();
        }
        assert.ok((await first)?.rendered.length);
      } finally {
        await a.close();
      }
    });
    return;
  }

  test('one renders (the other finds the lock taken), both serve identical bytes and ETags', async () => {
    const db = await createTestDatabase();
    const a = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 }, db);
    const b = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 }, db);
    const admin = new pg.Client({ connectionString: db.config.DATABASE_URL });
    await admin.connect();
    try {
      for (let i = 0; i < 3; i++)
        assert.equal((await a.app.pings.accept({ method: 'ping', name: `Blog ${i}`, url: uniqueUrl() })).ok, true);

      for (const [holder, other] of [
        [a, b],
        [b, a],
      ] as const) {
        const g = gate();
        let inside!: () => void;
        const entered = new Promise<void>((r) => (inside = r));
        const held = holder.app.renderer.tick({ force: true, onLocked: async () => (inside(), g.p) });
        await entered;
        try {
          // The lock is held by exactly one session (of this database), and the other instance does not render.
          const locks = await admin.query(
            `select count(*)::int as n from pg_locks where locktype = 'advisory' and objid = $1 and granted
               and database = (select oid from pg_database where datname = current_database())`,
            [RENDER_LOCK],
          );
          assert.equal(locks.rows[0].n, 1);
          assert.equal(await other.app.renderer.tick({ force: true }), null);
        } finally {
          g.open();
        }
        const report = await held;
        assert.ok(report && report.rendered.some((r) => r.path === '/changes.xml'));
      }
      // Racing ticks: whenever both report a render, they did not overlap (the lock), and every round
      // renders at least once.
      for (let round = 0; round < 5; round++) {
        await a.app.pings.accept({ method: 'ping', name: `Round ${round}`, url: uniqueUrl() });
        const [ra, rb] = await Promise.all([a.app.renderer.tick(), b.app.renderer.tick()]);
        assert.ok((ra?.rendered.length ?? 0) + (rb?.rendered.length ?? 0) > 0, `round ${round}`);
      }
      const busy = (await b.app.metrics.metrics()).split('\n').find((l) => l.startsWith('pingd_publish_render_lock_busy_total '));
      assert.ok(busy && Number(busy.split(' ')[1]) >= 1, String(busy));

      for (const path of ['/changes.xml', '/shortChanges.xml', archivePath(hourStart(Date.now()))]) {
        const fromA = await fetchAll(a, path);
        const fromB = await fetchAll(b, path);
        assert.deepEqual(fromB, fromA, path);
      }
      const doc = strictParse(Buffer.from((await fetchAll(b, '/changes.xml')).identity.body, 'base64'));
      assert.equal(doc.children.length, 8);
    } finally {
      await admin.end();
      await b.app.close();
      await a.app.close();
      await db.drop();
    }
  });
});

describe('the cursor and pings still being committed', () => {
  test('a ping stamped before a rendering but committed after it is in the next delta from that rendering', async () => {
    const t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 });
    try {
      await t.app.pings.accept({ method: 'ping', name: 'Before', url: uniqueUrl() });
      await t.app.renderer.tick();
      const late = uniqueUrl('late');
      if (BACKEND === 'postgres') {
        // Another pingd connection opens a transaction and writes a ping (stamped now()), then waits.
        const c = new pg.Client({ connectionString: t.config.DATABASE_URL, application_name: 'pingd' });
        await c.connect();
        try {
          await c.query('begin');
          const [{ stamp }] = (await c.query(`select (extract(epoch from now()) * 1000000)::bigint as stamp`)).rows as { stamp: string }[];
          const w = await c.query(
            `insert into weblogs (url, name, first_ping_at, last_ping_at) values ($1, 'Late', now(), now()) returning id`,
            [late],
          );
          await c.query(`insert into pings (weblog_id, received_at, method, name, url) values ($1, now(), 'ping', 'Late', $2)`, [
            w.rows[0].id,
            late,
          ]);
          await new Promise((r) => setTimeout(r, 50));
          // Rendered while the ping is invisible: its cursor must not pass the open transaction's start.
          await t.app.renderer.tick({ force: true });
          const r1 = await t.app.inject({ url: '/changes.xml' });
          assert.doesNotMatch(r1.body, /Late/);
          const cursor = parseToken(String(r1.headers.etag).replace(/"/g, ''))?.cursorUs ?? Infinity;
          assert.ok(cursor <= Number(stamp), `cursor ${cursor} is not after the open transaction's start ${stamp}`);
          await c.query('commit');
          await t.app.renderer.tick();
          const d = await t.app.inject({ url: '/changes.xml', headers: { 'a-im': 'feed', 'if-none-match': String(r1.headers.etag) } });
          assert.equal(d.statusCode, 226);
          assert.deepEqual(
            strictParse(d.rawPayload).children.map((x) => x.attrs.url),
            [late],
          );
        } finally {
          await c.end();
        }
      } else {
        // The embedded database has one session: statements never interleave, so nothing is committed
        // "behind" a rendering; the cursor is the render time and a later ping is in the next delta.
        const r1 = await t.app.inject({ url: '/changes.xml' });
        const cursor = parseToken(String(r1.headers.etag).replace(/"/g, ''))?.cursorUs ?? 0;
        const accepted = await t.app.pings.accept({ method: 'ping', name: 'Late', url: late });
        assert.ok(accepted.ok && accepted.receivedAt.getTime() * 1000 > cursor);
        await t.app.renderer.tick();
        const d = await t.app.inject({ url: '/changes.xml', headers: { 'a-im': 'feed', 'if-none-match': String(r1.headers.etag) } });
        assert.equal(d.statusCode, 226);
        assert.deepEqual(
          strictParse(d.rawPayload).children.map((x) => x.attrs.url),
          [late],
        );
      }
    } finally {
      await t.close();
    }
  });
});
