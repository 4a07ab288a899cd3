// Statements as the app sends them: the embedded database runs each as a named prepared statement
// (src/platform/db/pglite-statements.ts), so its answers must stay what PGlite's query() and PostgreSQL
// give — values of every type the app reads, errors and recovery, transactions, a plan whose result
// columns changed, more statement texts than are kept. Run on both backends: the same answers from each.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDatabase } from '../../../src/platform/db/database.js';
import { createTestDatabase, testConfig } from '../../helpers/app.js';

async function withDb(fn: (db: Awaited<ReturnType<typeof openDatabase>>) => Promise<void>) {
  const tdb = await createTestDatabase();
  const cfg = testConfig(tdb);
  const db = await openDatabase({ databaseUrl: cfg.DATABASE_URL, dataDir: cfg.DATA_DIR, poolMax: 2, timeoutMs: 5000 });
  try {
    await fn(db);
  } finally {
    await db.close();
    await tdb.drop();
  }
}

test('values of every type the app reads come back the same on the second run of a statement as on the first', async () => {
  await withDb(async (db) => {
    const sql = `select $1::bigint as big, $2::int as small, $3::text as txt, $4::timestamptz as at, $5::bytea as bin,
                        $6::text[] as list, $7::jsonb as doc, $8::boolean as yes, $9::float8 as f, $10::text as nothing`;
    const params = [
      9_007_199_254_740_000,
      -3,
      'é <&> "q"',
      new Date('2026-11-29T06:00:00.123Z'),
      Buffer.from([0, 1, 254, 255]),
      ['a', 'b,c', ''],
      JSON.stringify({ k: [1, null] }),
      true,
      0.25,
      null,
    ];
    const first = await db.query<Record<string, unknown>>(sql, params);
    const second = await db.query<Record<string, unknown>>(sql, params);
    assert.deepEqual(second, first);
    const r = first[0];
    assert.equal(Number(r.big), 9_007_199_254_740_000);
    assert.equal(r.small, -3);
    assert.equal(r.txt, 'é <&> "q"');
    assert.equal((r.at as Date).toISOString(), '2026-11-29T06:00:00.123Z');
    assert.ok(Buffer.isBuffer(r.bin), 'bytea comes back as a Buffer');
    assert.deepEqual([...(r.bin as Buffer)], [0, 1, 254, 255]);
    assert.deepEqual(r.list, ['a', 'b,c', '']);
    assert.deepEqual(r.doc, { k: [1, null] });
    assert.equal(r.yes, true);
    assert.equal(r.f, 0.25);
    assert.equal(r.nothing, null);
  });
});

test('a failing statement refuses with PostgreSQL’s code, and the next statements (the same text too) run', async () => {
  await withDb(async (db) => {
    await db.exec('create table st_t (id int primary key, v text)');
    const insert = 'insert into st_t (id, v) values ($1, $2)';
    await db.query(insert, [1, 'a']);
    await assert.rejects(db.query(insert, [1, 'b']), (err: Error & { cause?: { code?: string } }) => {
      assert.match(String(err.message), /duplicate key|unique/i);
      return true;
    });
    await db.query(insert, [2, 'b']);
    assert.deepEqual(await db.query('select id, v from st_t order by id'), [
      { id: 1, v: 'a' },
      { id: 2, v: 'b' },
    ]);
    // A statement that does not parse is refused each time it is sent, and kept nowhere.
    for (let i = 0; i < 2; i++) await assert.rejects(db.query('selec 1'), /syntax error/);
    assert.deepEqual(await db.query('select 1 as one'), [{ one: 1 }]);
  });
});

test('a transaction sees its own writes through kept statements; a rolled-back one leaves nothing; an error inside aborts it', async () => {
  await withDb(async (db) => {
    await db.exec('create table st_tx (id int primary key)');
    const insert = 'insert into st_tx (id) values ($1)';
    const count = 'select count(*)::int as n from st_tx';
    await db.transaction(async (tx) => {
      await tx.query(insert, [1]);
      assert.deepEqual(await tx.query(count), [{ n: 1 }]);
    });
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.query(insert, [2]);
        throw new Error('changed my mind');
      }),
      /changed my mind/,
    );
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.query(insert, [3]);
        await tx.query(insert, [1]); // duplicate: the transaction is aborted
      }),
      /duplicate key|unique/i,
    );
    assert.deepEqual(await db.query(count), [{ n: 1 }]);
    assert.deepEqual(await db.query('select id from st_tx'), [{ id: 1 }]);
  });
});

test('a kept `select *` whose table gained a column answers with the new column (a kept plan may not change its result type)', async () => {
  await withDb(async (db) => {
    await db.exec('create table st_alter (id int)');
    await db.query('insert into st_alter (id) values ($1)', [1]);
    const all = 'select * from st_alter where id = $1';
    assert.deepEqual(await db.query(all, [1]), [{ id: 1 }]);
    await db.exec(`alter table st_alter add column note text default 'n'`);
    assert.deepEqual(await db.query(all, [1]), [{ id: 1, note: 'n' }]);
    await db.exec('alter table st_alter drop column note');
    await db
      .transaction(async (tx) => {
        // Inside a transaction the refusal stands (the transaction is aborted) or the plan is fresh: either
        // way the next run, on its own, answers with the table as it is.
        await tx.query(all, [1]).catch(() => undefined);
      })
      .catch(() => undefined);
    assert.deepEqual(await db.query(all, [1]), [{ id: 1 }]);
  });
});

test('more statement texts than are kept all run, and the first ones run again after being let go', async () => {
  await withDb(async (db) => {
    for (let round = 0; round < 2; round++)
      for (let i = 0; i < 300; i++) assert.deepEqual(await db.query(`select $1::int + ${i} as v`, [round]), [{ v: round + i }]);
  });
});
