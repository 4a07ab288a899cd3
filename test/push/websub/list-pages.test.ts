// The operator's list of subscriptions in keyset pages (GET /api/websub/subscriptions and
// /api/admin/websub/subscriptions): at most 500 a page, 100 unless ?limit= says otherwise, `next` the cursor
// of the following page (?after=), null on the last; every subscription once while paging, one stored
// meanwhile at the end; a bad limit or cursor is a 400 with its reason.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import type { TestApp } from '../../helpers/app.js';
import { ADMIN_TOKEN, hubApp, PUBLIC } from './helpers.js';

const TOPIC = `${PUBLIC}/changes.xml`;
const operator = { authorization: `Bearer ${ADMIN_TOKEN}` };

let t: TestApp;
before(async () => {
  t = await hubApp();
  // 1,203 subscriptions (and one expired, never listed), each with a secret and a token in its callback.
  await t.app.db.query(
    `insert into websub_subscriptions (topic, path, callback, secret, lease_seconds, expires_at)
     select $1, '/changes.xml', 'http://127.0.0.39:9/cb/' || i || '?key=token' || i, 'secret' || i, 3600,
            now() + case when i = 7 then interval '-1 second' else interval '1 hour' end
       from generate_series(1, 1204) i`,
    [TOPIC],
  );
});
after(async () => {
  await t.close();
});

async function page(path: string, query = ''): Promise<{ status: number; json: any; bytes: number }> {
  const r = await t.app.inject({ method: 'GET', url: `${path}${query}`, headers: operator });
  return { status: r.statusCode, json: r.json(), bytes: r.rawPayload.length };
}

for (const path of ['/api/websub/subscriptions', '/api/admin/websub/subscriptions']) {
  test(`${path} comes in pages of at most 500 with a next cursor (5,700 subscriptions were one 1.9 MB answer)`, async () => {
    const first = await page(path);
    assert.equal(first.status, 200);
    assert.equal(first.json.subscriptions.length, 100, 'a page of 100 by default');
    assert.equal(typeof first.json.next, 'string');
    assert.ok(first.bytes < 64 * 1024, `${first.bytes} bytes`);

    const seen: string[] = [];
    let after: string | null = null;
    const sizes: number[] = [];
    for (let n = 0; n < 10; n++) {
      const p = await page(path, `?limit=500${after ? `&after=${encodeURIComponent(after)}` : ''}`);
      assert.equal(p.status, 200);
      sizes.push(p.json.subscriptions.length);
      seen.push(...p.json.subscriptions.map((s: { callback: string }) => s.callback));
      // A subscription stored while the operator pages through comes on a later page, not lost.
      if (n === 0) {
        await t.app.db.query(
          `insert into websub_subscriptions (topic, path, callback, lease_seconds, expires_at) values ($1, '/changes.xml', $2, 3600, now() + interval '1 hour')
           on conflict (topic, callback) do nothing`,
          [TOPIC, 'http://127.0.0.39:9/late'],
        );
      }
      after = p.json.next;
      if (after === null) break;
    }
    assert.deepEqual(sizes, [500, 500, 204]);
    assert.equal(new Set(seen).size, seen.length, 'no subscription twice');
    assert.equal(seen.length, 1204);
    assert.ok(!seen.includes('http://127.0.0.39:9/cb/7?…'), 'the expired one is not listed');
    assert.equal(seen.at(-1), 'http://127.0.0.39:9/late');
    assert.ok(
      seen.every((c) => !/token|secret/.test(c)),
      'no callback query, no secret',
    );
    assert.equal(seen[0], 'http://127.0.0.39:9/cb/1?…');

    const two = await page(path, '?limit=2');
    const next = await page(path, `?limit=2&after=${two.json.next}`);
    assert.deepEqual(
      [...two.json.subscriptions, ...next.json.subscriptions].map((s: { callback: string }) => s.callback),
      ['http://127.0.0.39:9/cb/1?…', 'http://127.0.0.39:9/cb/2?…', 'http://127.0.0.39:9/cb/3?…', 'http://127.0.0.39:9/cb/4?…'],
    );
  });

  test(`${path}: a limit out of 1–500 or a cursor that is not one is a 400 with the reason`, async () => {
    for (const q of ['?limit=501', '?limit=0', '?limit=ten', '?limit=-1', '?limit=1.5']) {
      const r = await page(path, q);
      assert.equal(r.status, 400, q);
      assert.deepEqual(r.json, { error: 'WEBSUB_LIST_QUERY_INVALID', message: 'limit must be an integer from 1 to 500.' }, q);
    }
    for (const q of ['?after=abc', '?after=0', '?after=-3', '?after=1e3', '?after=99999999999999999999']) {
      const r = await page(path, q);
      assert.equal(r.status, 400, q);
      assert.deepEqual(r.json, { error: 'WEBSUB_LIST_QUERY_INVALID', message: 'after must be the `next` of a previous page.' }, q);
    }
    // Past the end: an empty last page.
    assert.deepEqual((await page(path, '?after=999999999')).json, { next: null, subscriptions: [] });
  });
}
