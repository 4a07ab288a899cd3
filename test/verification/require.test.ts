// VERIFY_PINGS=require: changes.xml, shortChanges.xml and the hourly archive list a ping only once its
// feed showed something new; the ping's answer does not wait for that.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, type TestApp } from '../helpers/app.js';
import { startFeedServer, feedFixture, bytes, type FeedServer } from '../helpers/feed-server.js';
import { ping, pingAndSettle, settled } from './helpers.js';
import { archivePath, hourStart } from '../../src/publishing/documents/archive.js';
import { methodCall, rpc } from '../helpers/app.js';
import { waitFor } from '../helpers/wait.js';

let t: TestApp;
let s: FeedServer;

before(async () => {
  s = await startFeedServer('127.0.0.10');
  t = await startApp({
    VERIFY_PINGS: 'require',
    FETCH_ALLOW_PRIVATE: true,
    FETCH_HOST_INTERVAL_MS: 0,
    VERIFY_FEED_INTERVAL: 0,
    PING_MIN_INTERVAL: 0,
    RENDER_SCHEDULER: false,
    PUBLISH_POINTER_TTL_MS: 0,
  });
  await t.app.ready();
});

after(async () => {
  await t?.close();
  await s?.close();
});

async function read(path: string): Promise<string> {
  await t.app.renderer.tick({});
  const r = await t.app.inject({ method: 'GET', url: path });
  assert.equal(r.statusCode, 200, `${path}: ${r.body}`);
  return r.body;
}

test('a ping is listed only once verified; one whose feed shows nothing is never listed', async () => {
  const good = `${s.origin}/good/`;
  const spam = `${s.origin}/spam/`;
  let release: () => void = () => undefined;
  const held = new Promise<void>((r) => (release = r));
  s.route('/good.xml', async (_req, res) => {
    await held;
    res.writeHead(200, { 'content-type': 'application/rss+xml' });
    res.end(feedFixture('rss20.xml'));
  });
  // The answer comes at once, before any fetch finished.
  const r = await rpc(t.app, methodCall('weblogUpdates.extendedPing', ['Good', good, good, `${s.origin}/good.xml`]));
  assert.equal(r.flerror, false);
  assert.equal(r.message, 'Thanks for the ping.');
  await waitFor(() => s.hits('/good.xml').length > 0, { what: 'the fetch of the feed to be under way', timeoutMs: 2000 });
  assert.equal(s.hits('/good.xml').length, 1, 'the fetch is under way');
  assert.doesNotMatch(await read('/changes.xml'), /\/good\//, 'not listed while unverified');

  release();
  assert.equal((await settled(t, good)).outcome, 'verified');
  // A weblog whose "feed" is a 404 page: accepted, never listed.
  assert.equal((await pingAndSettle(t, spam, `${s.origin}/missing.xml`)).outcome, 'not_a_feed');

  for (const path of ['/changes.xml', '/shortChanges.xml', archivePath(hourStart(Date.now()))]) {
    const body = await read(path);
    assert.match(body, new RegExp(`url="${good.replace(/\//g, '\\/')}"`), path);
    assert.doesNotMatch(body, /\/spam\//, path);
  }
});

test('a repeat ping with nothing new is not listed again (its weblog stays at its verified time)', async () => {
  const url = `${s.origin}/repeat/`;
  s.route('/repeat.xml', bytes(feedFixture('atom10.xml'), { 'content-type': 'application/atom+xml' }));
  assert.equal((await pingAndSettle(t, url, `${s.origin}/repeat.xml`)).outcome, 'verified');
  const first = await t.app.db.query<{ last_verified_at: Date }>('select last_verified_at from weblogs where url = $1', [url]);
  await ping(t, url, `${s.origin}/repeat.xml`);
  assert.equal((await settled(t, url)).outcome, 'unchanged');
  const second = await t.app.db.query<{ last_verified_at: Date }>('select last_verified_at from weblogs where url = $1', [url]);
  assert.equal(new Date(second[0].last_verified_at).getTime(), new Date(first[0].last_verified_at).getTime());
  const archive = await read(archivePath(hourStart(Date.now())));
  assert.equal(archive.split(`url="${url}"`).length - 1, 1, 'the archive lists the verified ping, not the repeat');
});
