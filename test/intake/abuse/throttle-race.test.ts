// The per-weblog throttle under concurrency, beyond one protocol on one instance: pings for one weblog
// arriving at the same moment by XML-RPC, HTTP GET and RSS Ping (and, on PostgreSQL, at two instances
// sharing the database) give exactly one acceptance and exactly one row.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startApp, methodCall, readReply, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { findPingsByUrl, findWeblog } from '../../helpers/rows.js';

let a: TestApp;
let b: TestApp;
before(async () => {
  a = await startApp({ RSSPING_VERIFY_HASH_URI: false });
  // A second instance on the same database (the embedded database has one owner: the same app twice).
  b = BACKEND === 'postgres' ? await startApp({ RSSPING_VERIFY_HASH_URI: false }, a.db) : a;
});
after(async () => {
  if (b !== a) await b.close();
  await a.close();
});

type Attempt = () => Promise<boolean>;

function attempts(t: TestApp, url: string, i: number): Attempt[] {
  return [
    async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/RPC2',
        headers: { 'content-type': 'text/xml' },
        payload: methodCall('weblogUpdates.ping', [`X${i}`, url]),
      });
      return readReply(res.statusCode, res.body).flerror === false;
    },
    async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/RPC2',
        headers: { 'content-type': 'text/xml' },
        payload: methodCall('weblogUpdates.extendedPing', [`E${i}`, url, `${url}feed`]),
      });
      return readReply(res.statusCode, res.body).flerror === false;
    },
    async () => {
      const res = await t.app.inject({ method: 'GET', url: `/pingSiteForm?name=G${i}&url=${encodeURIComponent(url)}` });
      assert.ok([200, 429].includes(res.statusCode), `GET ${res.statusCode}`);
      return res.statusCode === 200;
    },
    async () => {
      const body = `<rss_ping version=2><site_name>R${i}</site_name><site_uri>${url}</site_uri><feed_uri type="RSS 2.0">${url}feed</feed_uri><payload type="RSS 2.0"><item><title>T${i}</title><link>${url}p${i}</link></item></payload></rss_ping>`;
      const res = await t.app.inject({ method: 'POST', url: '/rssping', headers: { 'content-type': 'text/xml' }, payload: body });
      assert.ok([200, 429].includes(res.statusCode), `rssping ${res.statusCode}: ${res.body}`);
      return res.statusCode === 200;
    },
  ];
}

test('simultaneous pings for one weblog over every protocol (and both instances): exactly one accepted, one row', async () => {
  for (let round = 0; round < 8; round++) {
    const url = uniqueUrl('race-all');
    const all = [...attempts(a, url, 0), ...attempts(b, url, 1), ...attempts(a, url, 2), ...attempts(b, url, 3)];
    const results = await Promise.all(all.map((f) => f()));
    assert.equal(results.filter(Boolean).length, 1, `round ${round}: ${results.map((r) => (r ? 1 : 0)).join('')}`);
    assert.equal((await findPingsByUrl(a.app.db, url)).length, 1);
    assert.equal((await findWeblog(a.app.db, url))?.ping_count, 1);
  }
});

test('two simultaneous pings for one weblog, repeated: exactly one accepted each time', async () => {
  for (let round = 0; round < 30; round++) {
    const url = uniqueUrl('race-two');
    const [x, y] = await Promise.all([attempts(a, url, 0)[round % 4](), attempts(b, url, 1)[(round + 1) % 4]()]);
    assert.equal(Number(x) + Number(y), 1, `round ${round}`);
  }
});
