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

describe('a big body that cannot be read', () => {
  let t: TestApp;
  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 });
  });
  after(() => t.close());

  test('is a 503 before any byte is sent, in every coding (REGRESSION: a stream failing at its first chunk gave a 500)', async () => {
    // A published rendering of /changes.xml over 4 MiB in every coding whose chunks are gone (pruned, or the
    // database failing under the read): nothing was in memory, and the first chunk cannot be read.
    const big = 5 << 20;
    const [r] = await t.app.db.query<{ id: number }>(
      `insert into renderings (path, document, content_type, updated_at, cursor_us, fingerprint, complete, identity_length,
         identity_stored, gzip_length, br_length)
       values ('/changes.xml', 'changes.xml', 'text/xml; charset=utf-8', now(), 1, 'x', true, $1, false, $1, $1) returning id`,
      [big],
    );
    await t.app.db.query(
      `insert into published_documents (path, document, rendering_id) values ('/changes.xml', 'changes.xml', $1)
       on conflict (path) do update set rendering_id = excluded.rendering_id`,
      [r.id],
    );
    for (const ae of ['gzip', 'br', 'identity']) {
      const res = await t.app.inject({ method: 'GET', url: '/changes.xml', headers: { 'accept-encoding': ae } });
      assert.equal(res.statusCode, 503, `${ae}: ${res.body.slice(0, 200)}`);
      assert.match(res.body, /^The document cannot be read right now \(database unavailable\)/);
      assert.match(String(res.headers['retry-after']), /^\d+$/);
      assert.equal(res.headers.etag, undefined);
    }
  });
});
