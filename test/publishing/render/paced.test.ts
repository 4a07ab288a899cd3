// changes.xml rendered a slice per tick (src/publishing/render/paced.ts): the slices themselves (pure), and a
// server whose changes.xml of 24,000 kept weblogs goes on one page of 2,000 a tick (RENDER_SLICE_MS=0): dated
// when it began and listing exactly what a whole render then lists, a ping meanwhile left to the next
// rendering; given up, with its rendering discarded, when everything is rendered now, when another
// rendering was published meanwhile, and when the server closes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { PacedRender } from '../../../src/publishing/render/paced.js';
import type { RenderReport } from '../../../src/publishing/render/store-rendering.js';
import { Renderer } from '../../../src/publishing/render/renderer.js';
import { changesDocument } from '../../../src/publishing/documents/changes.js';
import { listingReads } from '../../../src/publishing/documents/listing.js';
import { totalPings } from '../../../src/intake/ping/window-repository.js';
import { HOUR_MS, hourStart } from '../../../src/publishing/documents/archive.js';
import { touchWatermark, WEBLOG_REMOVALS_WATERMARK } from '../../../src/publishing/rendering-repository.js';
import { startApp, type TestApp } from '../../helpers/app.js';
import { bulkPings, insertPings, sourceText } from '../helpers.js';

const report = (entries: number): RenderReport => ({
  path: '/p',
  document: 'p',
  id: 1,
  entries,
  closed: false,
  identityLength: 0,
  gzipLength: 0,
  brLength: 0,
  ms: 0,
});

/** A render of `pages` pages, each taking `pageMs` of busy time; counts the pages it consumed. */
function job(pages: number, pageMs: number, idleMs = 60_000, sliceMs = 25) {
  const seen = { pages: 0, activeMs: 0 };
  const render = new PacedRender(
    7,
    async (pace, activeMs) => {
      async function* source() {
        for (let i = 0; i < pages; i++) yield i;
      }
      for await (const _ of pace(source())) {
        const until = performance.now() + pageMs;
        while (performance.now() < until);
        seen.pages++;
      }
      seen.activeMs = activeMs();
      return report(seen.pages);
    },
    idleMs,
    sliceMs,
  );
  return { render, seen };
}

test('a paced render goes on for a slice at a time (a page at least), and its time is its slices, not the waits between', async () => {
  const { render, seen } = job(10, 10);
  const perSlice: number[] = [];
  let waited = 0;
  const began = performance.now();
  for (let i = 0; i < 20; i++) {
    const before = seen.pages;
    const o = await render.slice();
    perSlice.push(seen.pages - before);
    if (o !== 'in_progress') {
      assert.equal(typeof o === 'object' && o.entries, 10);
      break;
    }
    const from = performance.now();
    while (performance.now() < from + 30); // time between ticks: not the render's
    waited += performance.now() - from;
  }
  const elapsed = performance.now() - began;
  // 25 ms slices of pages of 10 ms or more (a busy machine makes them longer, never shorter): a slice
  // stops after the page that spends it, so 1 to 3 pages a slice, and 3 when nothing slowed them.
  assert.equal(render.ended, true);
  assert.equal(seen.pages, 10);
  assert.ok(perSlice.length >= 4 && perSlice.every((n) => n >= 1 && n <= 3), `pages a slice: ${perSlice}`);
  assert.ok(seen.activeMs >= 100, `active ${seen.activeMs} ms`);
  assert.ok(seen.activeMs <= elapsed - waited + 5, `active ${seen.activeMs} ms of ${elapsed} ms, ${waited} ms of it between slices`);
});

test('a slice of 0 ms renders one page a tick; the last page needs no tick of its own', async () => {
  const { render, seen } = job(3, 0, 60_000, 0);
  assert.equal(await render.slice(), 'in_progress');
  assert.equal(seen.pages, 1);
  assert.equal(await render.slice(), 'in_progress');
  const o = await render.slice();
  assert.equal(typeof o === 'object' && o.entries, 3);
});

test('a paced render not continued within its idle time gives itself up; the next slice reports the failure', async () => {
  const { render, seen } = job(5, 0, 50, 0);
  assert.equal(await render.slice(), 'in_progress');
  await waitUntil(() => render.ended);
  assert.equal(seen.pages, 1);
  await assert.rejects(render.slice(), /given up before its last slice/);
});

test('abandon: the render parked at the gate stops with an error, and abandon waits for it', async () => {
  let failed: unknown;
  const render = new PacedRender(
    1,
    async (pace) => {
      try {
        async function* source() {
          for (let i = 0; i < 5; i++) yield i;
        }
        for await (const _ of pace(source()));
        return report(5);
      } catch (err) {
        failed = err;
        throw err;
      }
    },
    60_000,
    0,
  );
  assert.equal(await render.slice(), 'in_progress');
  await render.abandon();
  assert.match(String(failed), /given up before its last slice/);
  assert.equal(render.ended, true);
});

async function waitUntil(cond: () => boolean): Promise<void> {
  const deadline = performance.now() + 10_000;
  while (!cond()) {
    if (performance.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('changes.xml paced on a server', () => {
  let t: TestApp;
  const H = hourStart(Date.now()) - 3 * HOUR_MS;
  let T = H + 40 * 60_000;
  const incomplete = async () =>
    Number((await t.app.db.query<{ n: number }>('select count(*)::int as n from renderings where not complete'))[0].n);
  const changes = async () => (await t.app.inject({ url: '/changes.xml' })).body;
  /** Ticks (10 s apart) until changes.xml is published; how many ticks it took. */
  async function tickUntilPublished(renderer = t.app.renderer): Promise<{ ticks: number; rendered: RenderReport }> {
    for (let ticks = 1; ticks <= 40; ticks++) {
      const r = await renderer.tick({ now: new Date((T += 10_000)) });
      const rendered = r?.rendered.find((x) => x.path === '/changes.xml');
      if (rendered) return { ticks, rendered };
    }
    throw new Error('changes.xml was not published in 40 ticks');
  }

  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0, RENDER_SLICE_MS: 0 });
    await bulkPings(t.app.db, 24_000, T - 30 * 60_000, T - 60_000, 'paced');
  });
  after(() => t.close());

  test('dated when it began, it lists what a whole render lists then; a ping meanwhile is in the next rendering', async () => {
    const began = T + 10_000;
    // What a whole render at that time lists, read from the database (no kept window).
    const doc = changesDocument(listingReads(), null);
    const w = { updatedMs: began, toUs: began * 1000, fromUs: began * 1000 - 3600 * 1_000_000 };
    const whole = await sourceText(await doc.source(t.app.db, w, { total: () => totalPings(t.app.db) }));

    const first = await t.app.renderer.tick({ now: new Date((T += 10_000)) });
    assert.ok(first?.unchanged.includes('/changes.xml'), 'in progress after its first slice');
    const late = 'http://late.example.com/';
    await insertPings(t.app.db, [{ name: 'Late', url: late, at: T - 1000 }]);
    const { ticks, rendered } = await tickUntilPublished();
    assert.equal(ticks, 11, '24,000 weblogs, a page of 2,000 a tick: 12 ticks in all');
    assert.equal(rendered.entries, 24_000);
    const body = await changes();
    assert.equal(body, whole, 'the bytes of a whole render at the time it began');
    assert.ok(!body.includes(late));

    const next = await tickUntilPublished();
    assert.equal(next.rendered.entries, 24_001);
    assert.ok((await changes()).includes(late), 'the ping that came meanwhile');
    assert.equal(await incomplete(), 0);
  });

  test('given up when everything is rendered now (pingd render): its rendering discarded, the forced one published', async () => {
    await insertPings(t.app.db, [{ name: 'Forced', url: 'http://forced.example.com/', at: T }]);
    const first = await t.app.renderer.tick({ now: new Date((T += 10_000)) });
    assert.ok(first?.unchanged.includes('/changes.xml'));
    assert.equal(await incomplete(), 1, 'the paced rendering, under way');
    const forced = await t.app.renderer.tick({ now: new Date((T += 10_000)), force: true });
    assert.equal(forced?.rendered.find((x) => x.path === '/changes.xml')?.entries, 24_002);
    assert.equal(await incomplete(), 0, 'the paced rendering was discarded');
  });

  test('given up when another renderer published changes.xml meanwhile; the next tick starts anew', async () => {
    await insertPings(t.app.db, [{ name: 'Other', url: 'http://other.example.com/', at: T }]);
    assert.ok((await t.app.renderer.tick({ now: new Date((T += 10_000)) }))?.unchanged.includes('/changes.xml'));
    const other = new Renderer(t.app.renderer.documents, { db: t.app.db, log: t.app.log, deltaWindowSec: 900 });
    const published = await other.tick({ now: new Date((T += 10_000)), liveOnly: true });
    const by = published?.rendered.find((x) => x.path === '/changes.xml');
    assert.equal(by?.entries, 24_003, 'the other renderer renders whole');
    await insertPings(t.app.db, [{ name: 'After', url: 'http://after.example.com/', at: T }]);
    const again = await t.app.renderer.tick({ now: new Date((T += 10_000)) });
    assert.ok(again?.unchanged.includes('/changes.xml'), 'a new paced render');
    assert.equal(await incomplete(), 1, "the old one's rendering discarded, the new one under way");
    const done = await tickUntilPublished();
    assert.equal(done.rendered.entries, 24_004);
    assert.ok(done.rendered.id > by!.id);
  });

  test('given up when a weblog is removed, held or released (the watermark moved): it would list what was kept', async () => {
    await insertPings(t.app.db, [{ name: 'Held', url: 'http://held.example.com/', at: T }]);
    assert.ok((await t.app.renderer.tick({ now: new Date((T += 10_000)) }))?.unchanged.includes('/changes.xml'));
    const [old] = await t.app.db.query<{ id: number }>('select id from renderings where not complete');
    await touchWatermark(t.app.db, WEBLOG_REMOVALS_WATERMARK);
    assert.ok((await t.app.renderer.tick({ now: new Date((T += 10_000)) }))?.unchanged.includes('/changes.xml'));
    const now = await t.app.db.query<{ id: number }>('select id from renderings where not complete');
    assert.equal(now.length, 1, 'a new paced render under way');
    assert.notEqual(Number(now[0].id), Number(old.id), 'the old one discarded');
    assert.equal((await tickUntilPublished()).rendered.id, Number(now[0].id));
  });

  test('a paced rendering under way longer than the 120 s grace of superseded ones is not pruned (its chunks were)', async () => {
    await insertPings(t.app.db, [{ name: 'Slow', url: 'http://slow.example.com/', at: T }]);
    assert.ok((await t.app.renderer.tick({ now: new Date((T += 10_000)) }))?.unchanged.includes('/changes.xml'));
    const [aged] = await t.app.db.query<{ id: number }>(
      `update renderings set created_at = now() - interval '10 minutes' where not complete returning id`,
    );
    const { rendered } = await tickUntilPublished();
    assert.equal(rendered.id, Number(aged.id), 'the paced rendering itself was published, not one begun again');
    assert.equal(rendered.entries, 24_006);
    const full = await t.app.inject({ url: '/changes.xml', headers: { 'accept-encoding': 'gzip' } });
    assert.equal(full.statusCode, 200);
    assert.equal(zlib.gunzipSync(full.rawPayload).toString(), await changes());
    assert.ok((await changes()).includes('http://slow.example.com/'));
  });

  test('given up when the server closes: no rendering left incomplete', async () => {
    await insertPings(t.app.db, [{ name: 'Closing', url: 'http://closing.example.com/', at: T }]);
    assert.ok((await t.app.renderer.tick({ now: new Date((T += 10_000)) }))?.unchanged.includes('/changes.xml'));
    assert.equal(await incomplete(), 1);
    await t.app.renderer.close();
    assert.equal(await incomplete(), 0);
  });
});
