// What is published, rendered from the database with an injected "now": changes.xml (last hour) and
// shortChanges.xml (last 5 minutes) — one entry per weblog, newest first, `when` in seconds — and the hourly
// archives — every ping, oldest first, closed once the hour is over, caught up after downtime.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { startApp, createTestDatabase, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { insertPings, strictParse, decodeBody } from '../helpers.js';
import { HOUR_MS, archivePath, hourStart } from '../../../src/publishing/documents/archive.js';

// Fixtures live a few hours in the past of the real clock: the render time is injected, and "hours that
// ended" must also have ended for the database (its clock bounds what may be closed).
const H = hourStart(Date.now()) - 4 * HOUR_MS; // an hour that ended long ago
const T = H + 30 * 60_000; // "now" for the live documents: H:30:00

/** Documents of this module (other plugins may register more, e.g. /updates.xml). */
const ours = (p: string) => p === '/changes.xml' || p === '/shortChanges.xml' || /^\/\d{4}\/\d{2}\/\d{2}\/\d{2}\.xml$/.test(p);

async function get(t: TestApp, url: string, headers: Record<string, string> = {}) {
  const res = await t.app.inject({ method: 'GET', url, headers });
  return { status: res.statusCode, headers: res.headers, raw: res.rawPayload, text: res.body };
}

describe('live documents', () => {
  let t: TestApp;
  const url = (n: number) => `http://live${n}.example.com/`;
  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 });
    await insertPings(t.app.db, [
      { name: 'Two hours ago', url: url(7), at: T - 2 * 3600_000 },
      { name: 'Exactly one hour ago', url: url(2), at: T - 3600_000 }, // the window is (now - 1 h, now]
      { name: 'Just inside the hour', url: url(1), at: T - 3599_500 },
      { name: 'Six minutes ago', url: url(4), at: T - 301_000 },
      { name: 'Old name', url: url(3), at: T - 1800_000 },
      { name: 'Five minutes ago (new name)', url: url(3), at: T - 299_000 }, // re-pinged: one entry, latest
      { name: 'With RSS', url: url(5), rssUrl: 'http://live5.example.com/feed.xml', at: T - 10_400 },
      { name: 'Tie A', url: url(8), at: T - 60_000 },
      { name: 'Tie B', url: url(9), at: T - 60_000 },
      { name: 'After now', url: url(6), at: T + 5_000 },
    ]);
    const r = await t.app.renderer.tick({ now: new Date(T) });
    assert.ok(r);
    assert.deepEqual(r.failed, []);
  });
  after(() => t.close());

  test('changes.xml: the weblogs pinged in the last hour, newest first, exact bytes', async () => {
    const res = await get(t, '/changes.xml');
    assert.equal(res.status, 200);
    const updated = new Date(T).toUTCString();
    // ids break ties newest-id first (weblog 9 was inserted after 8).
    assert.equal(
      res.text,
      `<?xml version="1.0" encoding="utf-8"?>
<weblogUpdates version="2" updated="${updated}" count="10">
 <weblog name="With RSS" url="http://live5.example.com/" rssUrl="http://live5.example.com/feed.xml" when="10"/>
 <weblog name="Tie B" url="http://live9.example.com/" when="60"/>
 <weblog name="Tie A" url="http://live8.example.com/" when="60"/>
 <weblog name="Five minutes ago (new name)" url="http://live3.example.com/" when="299"/>
 <weblog name="Six minutes ago" url="http://live4.example.com/" when="301"/>
 <weblog name="Just inside the hour" url="http://live1.example.com/" when="3599"/>
</weblogUpdates>
`,
    );
    const doc = strictParse(res.raw);
    assert.deepEqual(doc.root.attrs, { version: '2', updated, count: '10' });
    const whens = doc.children.map((c) => Number(c.attrs.when));
    assert.deepEqual(
      whens,
      [...whens].sort((a, b) => a - b),
      '`when` ascends',
    );
  });

  test('shortChanges.xml: the last 5 minutes only', async () => {
    const res = await get(t, '/shortChanges.xml');
    assert.equal(res.status, 200);
    const doc = strictParse(res.raw);
    assert.deepEqual(
      doc.children.map((c) => [c.attrs.name, c.attrs.when]),
      [
        ['With RSS', '10'],
        ['Tie B', '60'],
        ['Tie A', '60'],
        ['Five minutes ago (new name)', '299'],
      ],
    );
    assert.equal(doc.root.attrs.count, '10');
  });

  test('every coding holds the same bytes', async () => {
    const identity = (await get(t, '/changes.xml')).raw;
    for (const enc of ['gzip', 'br']) {
      const res = await get(t, '/changes.xml', { 'accept-encoding': enc });
      assert.equal(res.headers['content-encoding'], enc);
      assert.deepEqual(decodeBody(res.raw, res.headers['content-encoding']), identity);
    }
  });

  test('nothing changed: no new rendering, same ETag; a ping or an entry leaving the window: a new one', async () => {
    const first = await get(t, '/changes.xml');
    let r = await t.app.renderer.tick({ now: new Date(T + 200) });
    assert.deepEqual(r?.rendered.map((x) => x.path).filter(ours), []);
    // (Other plugins may register more documents, e.g. /updates.xml: only ours are checked.)
    for (const p of ['/changes.xml', '/shortChanges.xml', archivePath(hourStart(T))]) assert.ok(r?.unchanged.includes(p), p);
    assert.equal((await get(t, '/changes.xml')).headers.etag, first.headers.etag);
    // 0.7 s later "Just inside the hour" has left the hour: changes.xml changes, shortChanges.xml does not.
    r = await t.app.renderer.tick({ now: new Date(T + 700) });
    assert.deepEqual(r?.rendered.map((x) => x.path).filter(ours), ['/changes.xml']);
    const second = await get(t, '/changes.xml');
    assert.notEqual(second.headers.etag, first.headers.etag);
    assert.doesNotMatch(second.text, /Just inside the hour/);
    assert.match(second.text, /updated="[^"]+" count="10"/);
    // Last-Modified moved forward although the render was in the same second as the previous one.
    assert.equal(second.headers['last-modified'], new Date(T + 1000).toUTCString());
    // A new ping changes both (count and entries).
    await insertPings(t.app.db, [{ name: 'Fresh', url: url(10), at: T + 2500 }]);
    r = await t.app.renderer.tick({ now: new Date(T + 3000) });
    assert.deepEqual(
      r?.rendered
        .map((x) => x.path)
        .filter(ours)
        .sort(),
      [archivePath(hourStart(T)), '/changes.xml', '/shortChanges.xml'],
    );
    const third = strictParse((await get(t, '/shortChanges.xml')).raw);
    assert.deepEqual(third.children[0].attrs, { name: 'Fresh', url: url(10), when: '0' });
    assert.equal(third.root.attrs.count, '11');
  });
});

describe('published XML is well-formed whatever was pinged', () => {
  let t: TestApp;
  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 });
  });
  after(() => t.close());

  test('hostile names and URLs, through intake and straight into the database, parse strictly in every coding', async () => {
    const viaIntake = ['<b>bold</b> & "quotes"', "it's ]]> <!-- -->", 'Joe&#039;s &amp;amp; Co', '\u202eevil\u200b \ud83d\ude00 \ufeff'];
    const accepted: string[] = [];
    for (const name of viaIntake) {
      const r = await t.app.pings.accept({
        method: 'extendedPing',
        name,
        url: uniqueUrl('hostile'),
        rssUrl: 'http://feeds.example.com/a?x=1&y="2"',
      });
      assert.equal(r.ok, true, JSON.stringify(r));
      if (r.ok) accepted.push(r.ping.name);
    }
    // Raw rows bypass validation: controls, tabs, newlines, non-characters, markup in URLs.
    const raw = [
      'ctl \u0001\u0008\u000b\u000c\u001f\u007f\u0085 end',
      'tab\tnl\ncr\r end',
      'nonchar \ufffe\uffff end',
      '<!DOCTYPE x [<!ENTITY e "b">]>&e;',
    ];
    const now = Date.now();
    await insertPings(
      t.app.db,
      raw.map((name, i) => ({
        name,
        url: `http://raw${i}.example.com/<x>&"\u0001`,
        rssUrl: i % 2 ? 'javascript:alert("x")<' : null,
        at: now - 1000 - i,
      })),
    );
    const r = await t.app.renderer.tick({});
    assert.deepEqual(r?.failed, []);
    for (const path of ['/changes.xml', '/shortChanges.xml', archivePath(hourStart(now))]) {
      const identity = (await get(t, path)).raw;
      const doc = strictParse(identity);
      const names = doc.children.map((c) => c.attrs.name);
      for (const n of accepted) assert.ok(names.includes(n), `${path} has ${JSON.stringify(n)}`);
      assert.ok(names.includes('ctl  end'));
      assert.ok(names.includes('tab\tnl\ncr\r end'), 'tab, LF and CR survive as character references');
      assert.ok(names.includes('nonchar  end'));
      assert.ok(names.includes('<!DOCTYPE x [<!ENTITY e "b">]>&e;'));
      assert.ok(doc.children.some((c) => c.attrs.url === 'http://raw0.example.com/<x>&"'));
      for (const enc of ['gzip', 'br']) {
        const res = await get(t, path, { 'accept-encoding': enc });
        assert.deepEqual(decodeBody(res.raw, res.headers['content-encoding']), identity, `${path} ${enc}`);
      }
    }
  });
});

describe('hourly archives', () => {
  let t: TestApp;
  const h = (n: number) => H + n * HOUR_MS; // hour starts around H
  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 });
    await insertPings(t.app.db, [
      { name: 'Before', url: 'http://a.example.com/', at: h(0) - 1 },
      { name: 'First', url: 'http://a.example.com/', at: h(0) },
      { name: 'Repeat 1', url: 'http://b.example.com/', at: h(0) + 60_000 },
      { name: 'Repeat 2', url: 'http://b.example.com/', at: h(0) + 60_000 }, // same instant: by id
      { name: 'Last', url: 'http://c.example.com/', rssUrl: 'http://c.example.com/rss', at: h(1) - 1 },
      { name: 'Next hour', url: 'http://a.example.com/', at: h(1) },
    ]);
  });
  after(() => t.close());

  test('finished hours are closed: every ping, oldest first, not de-duplicated, `updated` = end of the hour', async () => {
    const r = await t.app.renderer.tick({ now: new Date(h(1) + 30 * 60_000) });
    assert.deepEqual(r?.failed, []);
    assert.equal(r?.closedHours, 2); // the hour before H (one ping) and H
    const res = await get(t, archivePath(h(0)));
    assert.equal(res.status, 200);
    assert.equal(res.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.equal(res.headers['last-modified'], new Date(h(1)).toUTCString());
    assert.equal(
      res.text,
      `<?xml version="1.0" encoding="utf-8"?>
<weblogUpdates version="2" updated="${new Date(h(1)).toUTCString()}" count="4">
 <weblog name="First" url="http://a.example.com/" when="3600"/>
 <weblog name="Repeat 1" url="http://b.example.com/" when="3540"/>
 <weblog name="Repeat 2" url="http://b.example.com/" when="3540"/>
 <weblog name="Last" url="http://c.example.com/" rssUrl="http://c.example.com/rss" when="0"/>
</weblogUpdates>
`,
    );
    strictParse(res.raw);
    const before = await get(t, archivePath(h(-1)));
    assert.deepEqual(
      strictParse(before.raw).children.map((c) => c.attrs.name),
      ['Before'],
    );
    // The current hour is served as it grows, cached only for a render interval, dated by the end of its hour
    // (`when` counts back from it, so an entry's bytes never change) and last modified at its render.
    const current = await get(t, archivePath(h(1)));
    assert.equal(current.headers['cache-control'], 'public, max-age=10');
    assert.equal(current.headers['last-modified'], new Date(h(1) + 30 * 60_000).toUTCString());
    const cur = strictParse(current.raw);
    assert.deepEqual(cur.root.attrs, { version: '2', updated: new Date(h(2)).toUTCString(), count: '1' });
    assert.deepEqual(
      cur.children.map((c) => [c.attrs.name, c.attrs.when]),
      [['Next hour', '3600']],
    );
  });

  test('the current hour grows; a closed hour never changes again, even when rendered again', async () => {
    const closed = await get(t, archivePath(h(0)));
    await insertPings(t.app.db, [{ name: 'Later', url: 'http://d.example.com/', at: h(1) + 40 * 60_000 }]);
    let r = await t.app.renderer.tick({ now: new Date(h(1) + 45 * 60_000) });
    assert.deepEqual(
      r?.rendered.map((x) => x.path).filter((p) => ours(p) && p !== '/changes.xml' && p !== '/shortChanges.xml'),
      [archivePath(h(1))],
    );
    assert.deepEqual(
      strictParse((await get(t, archivePath(h(1)))).raw).children.map((c) => c.attrs.name),
      ['Next hour', 'Later'],
    );
    // Rendering a closed hour again (the CLI's --hour) gives the same bytes: nothing is replaced.
    const again = await t.app.renderer.renderHour(h(0), { now: new Date(h(1) + 46 * 60_000) });
    assert.equal(again, 'identical');
    const same = await get(t, archivePath(h(0)));
    assert.equal(same.headers.etag, closed.headers.etag);
    assert.deepEqual(same.raw, closed.raw);
    // The hour ends: its final rendering is closed and immutable.
    r = await t.app.renderer.tick({ now: new Date(h(2) + 5_000) });
    assert.equal(r?.closedHours, 1);
    const final = await get(t, archivePath(h(1)));
    assert.equal(final.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.equal(strictParse(final.raw).root.attrs.updated, new Date(h(2)).toUTCString());
  });

  test('hours with nothing, future hours and impossible dates', async () => {
    const empty = await get(t, archivePath(h(-2)));
    assert.equal(empty.status, 404, 'before the first ping there is nothing');
    assert.equal(empty.headers['cache-control'], 'no-store');
    assert.equal((await get(t, archivePath(hourStart(Date.now()) + 5 * HOUR_MS))).status, 404);
    for (const bad of ['/2026/02/30/10.xml', '/2026/13/01/00.xml', '/2026/11/22/24.xml', '/1969/12/31/23.xml']) {
      const res = await get(t, bad);
      assert.equal(res.status, 404, bad);
      assert.equal(res.text, 'Not a UTC hour.\n');
    }
  });
});

describe('hours missed while the server was down', () => {
  test('are rendered at the next start', async () => {
    const db = await createTestDatabase();
    const first = await startApp({ RENDER_SCHEDULER: false }, db);
    await insertPings(first.app.db, [
      { name: 'Down 1', url: 'http://down1.example.com/', at: H + 10_000 },
      { name: 'Down 2', url: 'http://down2.example.com/', at: H + 2 * HOUR_MS + 10_000 },
    ]);
    await first.app.close(); // down: nothing rendered these hours
    // The scheduler's own cron would not fire for a year; what renders is the start-up tick.
    const second = await startApp({ RENDER_SCHEDULER: true, RENDER_CRON: '0 0 1 1 *' }, db);
    try {
      await second.app.ready();
      await second.app.renderer.idle();
      for (const [n, name] of [
        [0, 'Down 1'],
        [2, 'Down 2'],
      ] as const) {
        const res = await get(second, archivePath(H + n * HOUR_MS));
        assert.equal(res.status, 200);
        assert.equal(res.headers['cache-control'], 'public, max-age=31536000, immutable');
        assert.deepEqual(
          strictParse(res.raw).children.map((c) => c.attrs.name),
          [name],
        );
      }
      // The hour between them had no ping: it is closed too, as an empty archive.
      const gap = await get(second, archivePath(H + HOUR_MS));
      assert.equal(gap.status, 200);
      assert.deepEqual(strictParse(gap.raw).root.attrs.count, '0');
      assert.equal((await get(second, '/changes.xml')).status, 200);
      // Big pre-compressed variants decode to the same thing (spot check through zlib directly).
      const gz = await get(second, archivePath(H), { 'accept-encoding': 'gzip' });
      assert.match(zlib.gunzipSync(gz.raw).toString(), /Down 1/);
    } finally {
      await second.close();
    }
  });
});
