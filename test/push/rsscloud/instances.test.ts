// Two pingd instances on one PostgreSQL database share the notification queue: each change reaches each
// subscriber once (claims are FOR UPDATE SKIP LOCKED under a lease), and an endpoint host has at most one
// notification in flight across both instances.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, createTestDatabase, type TestApp } from '../../helpers/app.js';
import { cloudApp, form, serveFeed, startEndpoint, startFeedServer, type Feed } from './helpers.js';
import { waitFor } from '../../helpers/wait.js';

const skip =
  BACKEND === 'postgres'
    ? false
    : 'needs PostgreSQL: the embedded database is one session in one process, so two instances cannot share it';

test('two instances, one database: each change reaches each subscriber once, one notification in flight per host', { skip }, async () => {
  const db = await createTestDatabase({ migrated: true });
  const feeds = await startFeedServer('127.0.0.13');
  const hosts = [await startEndpoint('127.0.0.48'), await startEndpoint('127.0.0.49')];
  const apps: TestApp[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      apps.push(await cloudApp({ RSSCLOUD_CONCURRENCY: 4 }, db));
    }
    const list: Feed[] = Array.from({ length: 3 }, () => serveFeed(feeds));
    const subs: { ep: (typeof hosts)[number]; path: string; feed: Feed }[] = [];
    for (const [h, ep] of hosts.entries())
      for (const [i, feed] of list.entries()) {
        const path = `/h${h}-f${i}`;
        ep.answer(path, (x) => (x.method === 'GET' ? { status: 200, body: x.query.get('challenge') ?? '' } : { status: 200, delayMs: 40 }));
        const r = await form(apps[(h + i) % 2], '/rsscloud/pleaseNotify', {
          domain: ep.host,
          port: String(ep.port),
          path,
          protocol: 'http-post',
          url1: feed.url,
        });
        assert.equal(r.status, 200, r.body);
        subs.push({ ep, path, feed });
      }
    for (const [i, feed] of list.entries()) {
      feed.add('Changed once');
      assert.equal((await form(apps[i % 2], '/rsscloud/ping', { url: feed.url })).status, 200);
    }
    const queued = async () =>
      Number((await apps[0].app.db.query<{ n: number }>('select count(*)::int as n from rsscloud_notifications'))[0].n);
    await waitFor(async () => subs.every((s) => s.ep.posts(s.path).length >= 1) && (await queued()) === 0, {
      what: 'every subscriber notified and the queue empty',
      between: () => {
        for (const a of apps) {
          a.app.rsscloud.worker.wake();
          a.app.verification.worker?.wake();
        }
      },
    });
    for (const s of subs) {
      assert.equal(s.ep.posts(s.path).length, 1, `${s.path} notified once`);
      assert.equal(s.ep.posts(s.path)[0].body, `url=${encodeURIComponent(s.feed.url)}`);
    }
    for (const ep of hosts) assert.equal(ep.maxConcurrent, 1, `${ep.host}: one notification in flight at a time`);
  } finally {
    for (const a of apps) await a.app.close();
    for (const ep of hosts) await ep.close();
    await feeds.close();
    await db.drop();
  }
});
