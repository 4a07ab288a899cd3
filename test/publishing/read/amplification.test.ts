// The cost of a conditional request is bounded whatever its headers hold: entity tags are looked up in one
// remembered set per rendering, never one query per tag; an over-long If-None-Match is cut, not obeyed.
import { test, after } from 'node:test';
import { AsyncLocalStorage } from 'node:async_hooks';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { IF_NONE_MATCH_MAX_REFS, parseIfNoneMatch } from '../../../src/publishing/read/conditional.js';

let t: TestApp;
after(async () => t?.close());

/**
 * Counts the statements about renderings the app sends to its database on behalf of `fn` (in its async
 * context): the pings' verification and the app's other background jobs share the database and run
 * statements of their own meanwhile. Regression: counted by text alone, a background statement about
 * renderings made it "2 queries, allowed 1" on a slow CI machine (2026-11-29).
 */
async function queriesDuring(fn: () => Promise<void>): Promise<number> {
  const db = t.app.db as { query: (...a: unknown[]) => Promise<unknown> };
  const real = db.query;
  const ours = new AsyncLocalStorage<true>();
  let n = 0;
  db.query = (...a: unknown[]) => {
    if (ours.getStore() && /rendering|published_documents/.test(String(a[0]))) n++;
    return real.apply(t.app.db, a);
  };
  try {
    await ours.run(true, fn);
  } finally {
    db.query = real;
  }
  return n;
}

const invented = (n: number) => Array.from({ length: n }, (_, i) => `"${(1000 + i).toString(36)}.${(Date.now() * 1000 - i).toString(36)}"`);

test('hundreds of invented entity tags with A-IM: feed cost at most one query (REGRESSION: ~900 tags, ~900 queries)', async () => {
  t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 60_000 });
  const ping = async () => assert.equal((await t.app.pings.accept({ method: 'ping', name: 'Amp', url: uniqueUrl('amp') })).ok, true);
  await ping();
  await t.app.renderer.tick({ now: new Date(Date.now() - 2000) });
  const first = await t.app.inject({ method: 'GET', url: '/changes.xml' });
  const base = String(first.headers.etag);
  await ping();
  // No wait for the next second: the first rendering is dated two seconds back (injected), so this one,
  // at the database's time, is already a later second.
  await t.app.renderer.tick({});
  const current = await t.app.inject({ method: 'GET', url: '/changes.xml' });
  assert.notEqual(current.headers.etag, base, 'a new rendering');

  let res = await t.app.inject({ method: 'GET', url: '/changes.xml' });
  const n = await queriesDuring(async () => {
    res = await t.app.inject({
      method: 'GET',
      url: '/changes.xml',
      headers: { 'a-im': 'feed', 'if-none-match': invented(900).join(', ') },
    });
  });
  assert.equal(res.statusCode, 200, 'none of them is ours: the full document');
  assert.ok(n <= 1, `${n} queries`);

  // A real base among them still gets its delta, and a second such request costs no query at all.
  const m = await queriesDuring(async () => {
    res = await t.app.inject({
      method: 'GET',
      url: '/changes.xml',
      headers: { 'a-im': 'feed', 'if-none-match': [base, ...invented(900)].join(', ') },
    });
  });
  assert.equal(res.statusCode, 226);
  assert.ok(m <= 1, `${m} queries`);
  const again = await queriesDuring(async () => {
    await t.app.inject({ method: 'GET', url: '/changes.xml', headers: { 'a-im': 'feed', 'if-none-match': invented(900).join(', ') } });
  });
  assert.equal(again, 0);
});

test(`If-None-Match is read up to ${IF_NONE_MATCH_MAX_REFS} of our tags; the rest is ignored`, () => {
  const tags = invented(100);
  assert.equal(parseIfNoneMatch(tags.join(', '))!.refs.length, IF_NONE_MATCH_MAX_REFS);
  assert.equal(parseIfNoneMatch(tags.slice(0, 3).join(','))!.refs.length, 3);
});
