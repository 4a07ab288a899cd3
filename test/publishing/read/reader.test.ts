// The reader's memory: bodies kept to answer with belong to current renderings only, so the live documents,
// rendered anew every tick, do not fill the cache with renderings nobody will ask for again.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, type TestApp } from '../../helpers/app.js';
import { insertPings } from '../helpers.js';
import { Reader } from '../../../src/publishing/read/reader.js';
import { HOUR_MS, hourStart } from '../../../src/publishing/documents/archive.js';

const T = hourStart(Date.now()) - 2 * HOUR_MS + 10 * 60_000;

describe('the reader keeps bodies of current renderings only', () => {
  let t: TestApp;
  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false });
  });
  after(() => t.close());

  async function renderAt(ms: number, name: string): Promise<void> {
    await insertPings(t.app.db, [{ name, url: `http://${name}.example.com/`, at: ms - 1000 }]);
    await t.app.renderer.tick({ now: new Date(ms) });
  }

  test('a new rendering of a path drops the bodies of the one it superseded; a late request for the old one is answered but not kept', async () => {
    const reader = new Reader({ db: t.app.db, pointerTtlMs: 0 });
    await renderAt(T, 'r1');
    const r1 = (await reader.current('/changes.xml'))!;
    const s1 = (await reader.current('/shortChanges.xml'))!;
    const r1gz = await reader.fullBody(r1, 'gzip');
    const r1br = await reader.fullBody(r1, 'br');
    const s1gz = await reader.fullBody(s1, 'gzip');
    assert.ok(Buffer.isBuffer(r1gz) && Buffer.isBuffer(r1br) && Buffer.isBuffer(s1gz));
    assert.equal(reader.cachedBytes, r1.gzipLength + r1.brLength + s1.gzipLength);

    await renderAt(T + 10_000, 'r2');
    const r2 = (await reader.current('/changes.xml'))!;
    assert.ok(r2.id > r1.id);
    await reader.fullBody(r2, 'gzip');
    // changes.xml's first rendering is gone (both codings); shortChanges.xml's, not superseded here, stays.
    assert.equal(reader.cachedBytes, r2.gzipLength + s1.gzipLength);

    // A request that looked up r1 before r2 was published still gets r1's bytes, read again.
    const late = await reader.fullBody(r1, 'gzip');
    assert.deepEqual(late, r1gz);
    assert.equal(reader.cachedBytes, r2.gzipLength + s1.gzipLength);
  });

  test('the cached bytes are a metric', async () => {
    await t.app.inject({ url: '/changes.xml', headers: { 'accept-encoding': 'gzip' } });
    const res = await t.app.inject({ url: '/metrics' });
    const m = /^pingd_publish_cache_bytes (\d+)$/m.exec(res.body);
    assert.ok(m, 'pingd_publish_cache_bytes is exported');
    assert.ok(Number(m[1]) > 0);
  });
});
