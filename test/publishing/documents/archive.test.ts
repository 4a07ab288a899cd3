// An hour's archive read in pages: the bytes do not depend on the page size (the embedded database reads
// the open hour in smaller pages than PostgreSQL), including pages that end inside a run of pings received
// in the same microsecond.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, type TestApp } from '../../helpers/app.js';
import { insertPings } from '../helpers.js';
import {
  ARCHIVE_PAGE_ROWS,
  EMBEDDED_ARCHIVE_PAGE_ROWS,
  archivePageRows,
  archiveSource,
  archiveStats,
  hourStart,
} from '../../../src/publishing/documents/archive.js';

describe('archive pages', () => {
  let t: TestApp;
  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, VERIFY_PINGS: 'off' });
  });
  after(() => t.close());

  test('the embedded database reads archives in smaller pages than PostgreSQL', () => {
    assert.equal(archivePageRows('postgres'), ARCHIVE_PAGE_ROWS);
    assert.equal(archivePageRows('pglite'), EMBEDDED_ARCHIVE_PAGE_ROWS);
    assert.ok(EMBEDDED_ARCHIVE_PAGE_ROWS < ARCHIVE_PAGE_ROWS);
  });

  test('the same bytes whatever the page size, ties on time included', async () => {
    const startMs = hourStart(Date.now()) - 3 * 3_600_000;
    // 23 pings: runs of three in the same instant, so a page of 2, 3 or 4 ends inside or at the end of a run.
    const pings = Array.from({ length: 23 }, (_, i) => ({
      url: `http://archive-pages-${i % 7}.example.com/`,
      name: `Archive <${i}> & co`,
      at: startMs + 60_000 + Math.floor(i / 3) * 1000,
    }));
    await insertPings(t.app.db, pings);
    const toUs = (startMs + 3_600_000) * 1000;
    const stats = await archiveStats(t.app.db, startMs, toUs);
    assert.equal(stats.n, 23);
    const bytes = async (pageRows: number) => {
      const s = archiveSource(t.app.db, startMs, toUs, startMs + 3_600_000, stats, undefined, pageRows);
      let out = s.head;
      for await (const page of s.pages) for (const e of page) out += e.xml;
      return out + s.foot;
    };
    const whole = await bytes(ARCHIVE_PAGE_ROWS);
    assert.equal(whole.split('<weblog ').length - 1, 23);
    assert.match(whole, /name="Archive &lt;22&gt; &amp; co"/);
    for (const rows of [1, 2, 3, 4, 22, 23, 24]) assert.equal(await bytes(rows), whole, `pages of ${rows}`);
  });
});
