// The open hour's kept pings: merging new pings into what is kept (pure), and on a real database the same
// bytes and fingerprints as reading the whole hour, render after render, while pings arrive in and out of
// order, after the render time and in other hours; an hour that outgrows the cache is read in full.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { countingQueries, insertPings, seeded, sourceText } from '../helpers.js';
import type { Queryable } from '../../../src/platform/db/database.js';
import { listingReads } from '../../../src/publishing/documents/listing.js';
import { countBefore, HourCache, mergeFresh, type KeptPing } from '../../../src/publishing/documents/hour-cache.js';
import { KeptEntries } from '../../../src/publishing/documents/kept-entries.js';
import { EMBEDDED_ARCHIVE_PAGE_ROWS, hourStart, readArchive, type ArchiveRead } from '../../../src/publishing/documents/archive.js';

const k = (id: number, atUs: number): KeptPing => ({ id, atUs, start: `p${id}` });
const ids = (es: KeptEntries) => Array.from({ length: es.length }, (_, i) => es.id(i));
const list = (...es: KeptPing[]) => KeptEntries.of(es);

describe('mergeFresh and countBefore', () => {
  test('new pings after every kept one are appended, oldest first', () => {
    const kept = list(k(1, 10), k(2, 20));
    mergeFresh(kept, [k(4, 40), k(3, 30)]);
    assert.deepEqual(ids(kept), [1, 2, 3, 4]);
  });

  test('a ping older than kept ones (its transaction started earlier, committed later) is merged in by time', () => {
    const kept = list(k(1, 10), k(2, 20), k(3, 30), k(4, 40));
    mergeFresh(kept, [k(6, 45), k(5, 25)]);
    assert.deepEqual(ids(kept), [1, 2, 5, 3, 4, 6]);
    // Each entry keeps its own text through the merge (the tail is moved, not re-read).
    assert.deepEqual(
      Array.from({ length: kept.length }, (_, i) => kept.start(i)),
      ['p1', 'p2', 'p5', 'p3', 'p4', 'p6'],
    );
  });

  test('ties on time: the lower ping id first, as the keyset pages read them', () => {
    const kept = list(k(2, 10), k(7, 10));
    mergeFresh(kept, [k(9, 10), k(3, 10)]);
    assert.deepEqual(ids(kept), [2, 3, 7, 9]);
    const none = list();
    mergeFresh(none, []);
    assert.deepEqual(ids(none), []);
  });

  test('countBefore: the pings received before a time', () => {
    const kept = list(k(1, 10), k(2, 20), k(3, 20), k(4, 30));
    assert.deepEqual(
      [0, 10, 11, 20, 21, 31].map((us) => countBefore(kept, us)),
      [0, 0, 1, 1, 3, 4],
    );
  });
});

const bytesOf = (read: ArchiveRead, updatedMs: number) => sourceText(read.source(updatedMs));
/** Counts the statements that read an hour's pages (the read the cache exists to avoid). */
const counting = (q: Queryable) => countingQueries(q, /order by received_at, id/);

describe('a kept hour renders what a full read renders', () => {
  let t: TestApp;
  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, VERIFY_PINGS: 'off' });
  });
  after(() => t.close());

  const reads = listingReads('all');
  const cacheOf = (max?: number) => new HourCache({ hourPage: reads.hourPage, follow: reads.follow! }, max);

  test('render after render, with pings in and out of order, after the render time and in the hours around', async () => {
    const cache = cacheOf();
    const c = counting(t.app.db);
    // An hour of its own, two hours back: every invented time is in the database's past.
    const startMs = hourStart(Date.now()) - 2 * 3_600_000;
    // A seeded generator: the same sequence on every run and backend.
    const { rand, url: someUrl } = seeded(4242, () => uniqueUrl('hour'));
    let nowMs = startMs + 60_000;
    const sizes: number[] = [];
    for (let step = 0; step < 20; step++) {
      const batch = [];
      for (let i = 0; i < 15; i++) {
        const url = someUrl();
        // Mostly just before the render time; some well before it (older than pings already kept), some
        // after it (kept for a later render), some in the hour before or after, some in the same instant.
        const r = rand();
        const at =
          r < 0.5
            ? nowMs - rand() * 5000
            : r < 0.7
              ? startMs + rand() * (nowMs - startMs)
              : r < 0.8
                ? nowMs + rand() * 4000
                : r < 0.85
                  ? startMs - 1 - rand() * 1000
                  : r < 0.9
                    ? startMs + 3_600_000 + rand() * 1000
                    : nowMs - 1000;
        batch.push({
          name: `Ping <${step}.${i}> & "co"`,
          url,
          rssUrl: rand() < 0.3 ? `${url}feed?a=1&b=${step}` : null,
          at: Math.round(at),
        });
      }
      await insertPings(t.app.db, batch);
      nowMs += step === 10 ? 1_800_000 : 20_000; // step 10 jumps half an hour
      const toUs = nowMs * 1000 + 123;
      const updatedMs = Math.floor(nowMs / 1000) * 1000;
      const kept = await readArchive(c.q, startMs, toUs, { reads, pageRows: EMBEDDED_ARCHIVE_PAGE_ROWS, cache });
      const full = await readArchive(t.app.db, startMs, toUs, { reads, pageRows: EMBEDDED_ARCHIVE_PAGE_ROWS, cache: null });
      assert.deepEqual(kept.stats, full.stats, `stats at step ${step}`);
      const a = await bytesOf(kept, updatedMs);
      assert.equal(a, await bytesOf(full, updatedMs), `bytes at step ${step}`);
      sizes.push(kept.stats.n);
    }
    assert.ok(sizes[19] >= 200 && sizes[0] < sizes[19], `the hours were not trivially small: ${sizes}`);
    // Read in full once (one page: the hour was young), then only what came in since.
    assert.equal(c.count(), 1);

    // Another hour: the kept one is dropped and the new one is read in full.
    const nextMs = startMs + 3_600_000;
    const toUs = (nextMs + 10_000) * 1000;
    const kept = await readArchive(c.q, nextMs, toUs, { reads, pageRows: EMBEDDED_ARCHIVE_PAGE_ROWS, cache });
    const full = await readArchive(t.app.db, nextMs, toUs, { reads, pageRows: EMBEDDED_ARCHIVE_PAGE_ROWS, cache: null });
    assert.ok(kept.stats.n > 0);
    assert.deepEqual(kept.stats, full.stats);
    assert.equal(await bytesOf(kept, nextMs + 10_000), await bytesOf(full, nextMs + 10_000));
    assert.equal(c.count(), 2);
  });

  test('an hour with more pings than the cache keeps is read in full until the next hour', async () => {
    const cache = cacheOf(5);
    const startMs = hourStart(Date.now()) - 5 * 3_600_000;
    await insertPings(
      t.app.db,
      Array.from({ length: 4 }, (_, i) => ({ name: `Few ${i}`, url: uniqueUrl('few'), at: startMs + 1000 * i })),
    );
    const toUs = (startMs + 60_000) * 1000;
    const c = counting(t.app.db);
    assert.equal((await cache.hour(c.q, startMs, toUs, 2))?.stats.n, 4);
    await insertPings(
      t.app.db,
      Array.from({ length: 2 }, (_, i) => ({ name: `More ${i}`, url: uniqueUrl('more'), at: startMs + 10_000 + i })),
    );
    assert.equal(await cache.hour(c.q, startMs, toUs, 2), null, 'six pings: more than five');
    const seen = c.count();
    assert.equal(await cache.hour(c.q, startMs, toUs, 2), null);
    assert.equal(c.count(), seen, 'not tried again within the hour');
    // Through readArchive: the full read, with the same six pings.
    const r = await readArchive(t.app.db, startMs, toUs, { reads, pageRows: 2, cache });
    assert.equal(r.stats.n, 6);
    assert.equal((await bytesOf(r, startMs + 60_000)).split('<weblog ').length - 1, 6);
    // The next hour starts kept again.
    assert.equal((await cache.hour(c.q, startMs + 3_600_000, toUs + 3_600_000_000, 2))?.stats.n, 0);
  });
});
