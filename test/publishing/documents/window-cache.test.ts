// The live documents' window cache: merging what changed into what is kept (pure), and on a real database
// the same bytes and fingerprints as reading the whole window, render after render, while pings arrive in
// and out of order, weblogs are renamed and the window moves (forward, and back past what is kept).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { countingQueries, insertPings, seeded, sourceText } from '../helpers.js';
import type { Queryable } from '../../../src/platform/db/database.js';
import { listingReads, type ListingReads } from '../../../src/publishing/documents/listing.js';
import { weblogUpdatesDocument } from '../../../src/publishing/documents/changes.js';
import { inWindow, mergeChanged, WindowCache, type KeptWeblog } from '../../../src/publishing/documents/window-cache.js';
import { KeptEntries } from '../../../src/publishing/documents/kept-entries.js';
import type { LiveDocument, RenderWindow, TickShared } from '../../../src/publishing/documents/document.js';
import { totalPings } from '../../../src/intake/ping/window-repository.js';

const k = (id: number, atUs: number): KeptWeblog => ({ id, atUs, start: `w${id}` });
const ids = (es: KeptEntries) => Array.from({ length: es.length }, (_, i) => es.id(i));
const list = (...es: KeptWeblog[]) => KeptEntries.of(es);

describe('mergeChanged and inWindow', () => {
  test('a changed weblog replaces its entry at its new place; the others keep their order', () => {
    const kept = list(k(1, 50), k(2, 40), k(3, 30));
    assert.deepEqual(ids(mergeChanged(kept, [k(3, 60)], 0)), [3, 1, 2]);
  });

  test('a change older than kept entries (its transaction started earlier) is merged in by time', () => {
    const kept = list(k(1, 50), k(2, 40), k(3, 30));
    const merged = mergeChanged(kept, [k(9, 35), k(8, 45)], 0);
    assert.deepEqual(ids(merged), [1, 8, 2, 9, 3]);
    // Kept entries keep their text (copied by reference into the new list); changed ones bring theirs.
    assert.deepEqual(
      Array.from({ length: merged.length }, (_, i) => merged.start(i)),
      ['w1', 'w8', 'w2', 'w9', 'w3'],
    );
    assert.deepEqual(ids(kept), [1, 2, 3], 'the list merged from is left as it was');
  });

  test('ties on time: the higher weblog id first, as the keyset pages read them', () => {
    assert.deepEqual(ids(mergeChanged(list(k(5, 40), k(2, 40)), [k(4, 40), k(7, 40)], 0)), [7, 5, 4, 2]);
  });

  test('what left the window is dropped, changed or not', () => {
    const kept = list(k(1, 50), k(2, 40), k(3, 30));
    assert.deepEqual(ids(mergeChanged(kept, [k(4, 20), k(1, 55)], 35)), [1, 2]);
    assert.deepEqual(ids(mergeChanged(kept, [], 40)), [1]);
    assert.deepEqual(ids(mergeChanged(list(), [], 0)), []);
  });

  test('inWindow: (fromUs, toUs], newest first', () => {
    const kept = list(k(1, 60), k(2, 50), k(3, 40), k(4, 30));
    assert.deepEqual(ids(inWindow(kept, 30, 50)), [2, 3]);
    assert.deepEqual(ids(inWindow(kept, 0, 100)), [1, 2, 3, 4]);
    assert.deepEqual(ids(inWindow(kept, 60, 100)), []);
  });
});

const bytesOf = async (doc: LiveDocument, q: Queryable, w: RenderWindow, shared: TickShared) => sourceText(await doc.source(q, w, shared));
/** Counts the statements that read a window's pages (the read the cache exists to avoid). */
const counting = (q: Queryable) => countingQueries(q, /order by last_ping_at desc/);

describe('a kept window renders what a full read renders', () => {
  let t: TestApp;
  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0, VERIFY_PINGS: 'off' });
  });
  after(() => t.close());

  test('render after render, with pings in and out of order, renames, and a window moving both ways', async () => {
    const all = listingReads('all');
    assert.ok(all.follow, 'every accepted ping is listed: the window can be followed');
    const full: ListingReads = { ...all, follow: undefined };
    const kept = weblogUpdatesDocument('kept.xml', '/kept.xml', 300, all);
    const read = weblogUpdatesDocument('read.xml', '/read.xml', 300, full);
    const c = counting(t.app.db);

    // A seeded generator: the same sequence on every run and backend.
    const { rand, url: someUrl, urls } = seeded(12345, () => uniqueUrl('kept'));
    let nowMs = Date.now() - 3600_000; // every invented time is in the database's past
    const sizes: number[] = [];
    for (let step = 0; step < 24; step++) {
      const batch = [];
      for (let i = 0; i < 12; i++) {
        const url = someUrl();
        // Mostly recent; some older than entries already kept (a batch that started earlier), some after
        // the render time (kept for a later render), some already out of the window.
        const r = rand();
        const offset = r < 0.6 ? -rand() * 30_000 : r < 0.8 ? -rand() * 290_000 : r < 0.9 ? rand() * 3000 : -310_000 - rand() * 1000;
        batch.push({
          name: `Weblog <${step}.${i}> & "co"`,
          url,
          rssUrl: rand() < 0.3 ? `${url}feed?a=1&b=${step}` : null,
          at: Math.round(nowMs + offset),
        });
      }
      await insertPings(t.app.db, batch);
      if (step % 3 === 1) {
        // Through intake's own batch statement too (received now, by the database clock).
        const r = await t.app.pings.accept({ method: 'ping', name: `Live ${step}`, url: urls[step % urls.length] });
        assert.equal(r.ok, true, JSON.stringify(r));
      }
      // The window moves forward 20 s a step; at step 16 it goes back 10 minutes (past what is kept).
      nowMs = step === 16 ? nowMs - 600_000 : nowMs + 20_000;
      const toUs = nowMs * 1000 + 123;
      const w: RenderWindow = { updatedMs: Math.floor(nowMs / 1000) * 1000, toUs, fromUs: toUs - 300 * 1_000_000 };
      const total = await totalPings(t.app.db);
      const shared: TickShared = { total: async () => total };
      assert.equal(await kept.fingerprint(c.q, w, shared), await read.fingerprint(t.app.db, w, shared), `fingerprint at step ${step}`);
      const a = await bytesOf(kept, c.q, w, shared);
      assert.equal(a, await bytesOf(read, t.app.db, w, shared), `bytes at step ${step}`);
      sizes.push((a.match(/<weblog /g) ?? []).length);
    }
    assert.ok(Math.max(...sizes) >= 40, `the windows were not trivially small: ${sizes}`);
    // Loaded twice (at the start, and when the window went back past what was kept), one page each.
    assert.equal(c.count(), 2);
  });

  test('when the widest window holds more weblogs than the cache keeps, it is read in full (null) and the narrowest is still kept', async () => {
    const all = listingReads('all');
    const cache = new WindowCache({ ...all, follow: all.follow! }, [10, 3], 5);
    // A minute ahead: a load keeps every weblog pinged after the window's start, and no other is.
    const nowMs = Date.now() + 60_000;
    await insertPings(
      t.app.db,
      Array.from({ length: 8 }, (_, i) => ({ name: `Many ${i}`, url: uniqueUrl('many'), at: nowMs - 1000 * i })),
    );
    const toUs = nowMs * 1000;
    const c = counting(t.app.db);
    assert.equal(await cache.window(c.q, { updatedMs: nowMs, toUs, fromUs: toUs - 10_000_000 }), null);
    const few = await cache.window(c.q, { updatedMs: nowMs, toUs, fromUs: toUs - 2_500_000 });
    assert.deepEqual(few && Array.from({ length: few.length }, (_, i) => /name="([^"]+)"/.exec(few.start(i))?.[1]), [
      'Many 0',
      'Many 1',
      'Many 2',
    ]);
    // The wide window is not tried again at every render (only after a few minutes): no page read for it.
    const reads = c.count();
    assert.equal(await cache.window(c.q, { updatedMs: nowMs, toUs, fromUs: toUs - 10_000_000 }), null);
    assert.equal((await cache.window(c.q, { updatedMs: nowMs, toUs, fromUs: toUs - 2_500_000 }))?.length, 3);
    assert.equal(c.count(), reads);
  });
});
