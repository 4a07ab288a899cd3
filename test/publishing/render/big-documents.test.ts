// Documents larger than one stored chunk (1 MiB), and an archive whose identity coding is too big to store
// (over 4 MiB: served by decompressing the stored gzip): same bytes in every coding, exact lengths,
// deltas that span chunks. Also archive retention's deletion of old archives.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { startApp, type TestApp } from '../../helpers/app.js';
import { HOUR_MS, archivePath, hourStart } from '../../../src/publishing/documents/archive.js';
import { countArchivesBefore, deleteArchivesBefore } from '../../../src/publishing/rendering-repository.js';
import { bulkPings, decodeBody, strictParse } from '../helpers.js';

describe('big documents', () => {
  let t: TestApp;
  const H = hourStart(Date.now()) - 3 * HOUR_MS;
  const T = H + 55 * 60_000; // changes.xml "now"
  const A = H - HOUR_MS; // the big archive's hour
  before(async () => {
    // One page of 2,000 weblogs a tick: changes.xml of 31,000 is paced over 16 ticks.
    t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0, PUBLISH_DELTA_WINDOW: 3600, RENDER_SLICE_MS: 0 });
  });
  after(() => t.close());

  test('changes.xml over several chunks, paced a page a tick, and a 226 delta spanning chunks, in every coding', async () => {
    await bulkPings(t.app.db, 15_000, T - 50 * 60_000, T - 30 * 60_000, 'older');
    const first = await t.app.renderer.tick({ now: new Date(T - 25 * 60_000) });
    assert.ok(
      first?.rendered.some((x) => x.path === '/changes.xml' && x.entries === 15_000),
      'fewer than 20,000 weblogs: rendered whole in its tick',
    );
    const base = await t.app.inject({ url: '/changes.xml' });
    await bulkPings(t.app.db, 16_000, T - 20 * 60_000, T - 60_000, 'newer');
    let rendered;
    let ticks = 0;
    while (!rendered && ticks < 40) {
      const r = await t.app.renderer.tick({ now: new Date(T + ticks * 10_000) });
      ticks++;
      rendered = r?.rendered.find((x) => x.path === '/changes.xml');
      if (!rendered) {
        assert.ok(r?.unchanged.includes('/changes.xml'), `tick ${ticks}: in progress`);
        // Until its last slice, the rendering served is the one before.
        assert.equal((await t.app.inject({ url: '/changes.xml' })).headers.etag, base.headers.etag, `tick ${ticks}`);
      }
    }
    assert.equal(ticks, 16, 'a page of 2,000 a tick: 31,000 weblogs in 16 ticks');
    assert.ok(rendered && rendered.entries === 31_000 && rendered.identityLength > 2 << 20, JSON.stringify(rendered));

    const full = await t.app.inject({ url: '/changes.xml' });
    assert.equal(full.statusCode, 200);
    assert.equal(Number(full.headers['content-length']), rendered.identityLength);
    const doc = strictParse(full.rawPayload);
    assert.equal(doc.children.length, 31_000);
    for (const enc of ['gzip', 'br']) {
      const res = await t.app.inject({ url: '/changes.xml', headers: { 'accept-encoding': enc } });
      assert.equal(Number(res.headers['content-length']), res.rawPayload.length);
      assert.ok(decodeBody(res.rawPayload, enc).equals(full.rawPayload), enc);
    }
    // The delta: the 16,000 newer weblogs, a prefix of the document longer than a chunk.
    const lines = full.body.split('\n');
    const expected = Buffer.from([...lines.slice(0, 2 + 16_000), '</weblogUpdates>', ''].join('\n'));
    assert.ok(expected.length > 1 << 20);
    for (const enc of ['identity', 'gzip', 'br']) {
      const d = await t.app.inject({
        url: '/changes.xml',
        headers: { 'a-im': 'feed', 'if-none-match': String(base.headers.etag), 'accept-encoding': enc },
      });
      assert.equal(d.statusCode, 226, enc);
      assert.equal(Number(d.headers['content-length']), d.rawPayload.length);
      assert.ok(decodeBody(d.rawPayload, d.headers['content-encoding']).equals(expected), `delta ${enc}`);
    }
    assert.ok(strictParse(expected).children.every((c) => c.attrs.url.startsWith('http://newer')));
  });

  test('an archive too big to store in identity: served by decompressing the stored gzip, exact length, HEAD', async () => {
    await bulkPings(t.app.db, 60_000, A + 1000, A + HOUR_MS - 1000, 'arch');
    const r = await t.app.renderer.renderHour(A, { now: new Date(H + 2 * HOUR_MS) });
    assert.ok(r && r !== 'identical' && r.closed && r.identityLength > 4 << 20, JSON.stringify(r));
    const path = archivePath(A);
    const stored = await t.app.db.query<{ variant: string; n: number }>(
      `select variant, count(*)::int as n from rendering_chunks where rendering_id = $1 group by variant order by variant`,
      [r.id],
    );
    assert.deepEqual(
      stored.map((s) => s.variant),
      ['br', 'gzip'],
      'no identity chunks',
    );
    const identity = await t.app.inject({ url: path });
    assert.equal(identity.statusCode, 200);
    assert.equal(identity.headers['content-encoding'], undefined);
    assert.equal(Number(identity.headers['content-length']), r.identityLength);
    assert.equal(identity.rawPayload.length, r.identityLength);
    const gz = await t.app.inject({ url: path, headers: { 'accept-encoding': 'gzip' } });
    assert.ok(zlib.gunzipSync(gz.rawPayload).equals(identity.rawPayload));
    const doc = strictParse(identity.rawPayload);
    assert.equal(doc.children.length, 60_000);
    assert.equal(doc.root.attrs.count, '60000');
    const head = await t.app.inject({ method: 'HEAD', url: path });
    assert.equal(head.headers['content-length'], String(r.identityLength));
    assert.equal(head.body, '');
  });

  test('archive retention deletes whole archives before a cutoff, oldest first, in bounded batches', async () => {
    const before = await countArchivesBefore(t.app.db, new Date(H + HOUR_MS));
    assert.equal(before, 2); // the big closed hour and the hour changes.xml was rendered in
    assert.equal(await deleteArchivesBefore(t.app.db, new Date(H + HOUR_MS), 1), 1);
    assert.equal(await countArchivesBefore(t.app.db, new Date(H + HOUR_MS)), before - 1);
    await deleteArchivesBefore(t.app.db, new Date(H + HOUR_MS), 1000);
    assert.equal(await countArchivesBefore(t.app.db, new Date(H + HOUR_MS)), 0);
    assert.equal((await t.app.inject({ url: archivePath(H) })).statusCode, 404);
    assert.equal((await t.app.inject({ url: archivePath(A) })).statusCode, 404);
    const [left] = await t.app.db.query<{ n: number }>(`select count(*)::int as n from renderings where path = $1`, [archivePath(H)]);
    assert.equal(left.n, 0, 'its renderings and bytes went too');
    assert.equal((await t.app.inject({ url: '/changes.xml' })).statusCode, 200, 'live documents are not archives');
  });
});
