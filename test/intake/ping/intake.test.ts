// Durable acknowledgement under concurrency: every flerror-0 reply has its row, refusals leave none,
// and the per-weblog throttle holds when pings for one weblog race.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { startApp, uniqueUrl, methodCall, readReply, type TestApp } from '../../helpers/app.js';
import { countPings, findPingsByUrl } from '../../helpers/rows.js';

let t: TestApp;
before(async () => {
  t = await startApp();
  await t.listen();
});
after(async () => {
  await t.close();
});

function post(body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(`${t.url}/RPC2`);
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        headers: { 'content-type': 'text/xml', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

test('400 concurrent pings over HTTP: every acknowledged ping has exactly its row', async () => {
  const before = await countPings(t.app.db);
  const urls = Array.from({ length: 400 }, () => uniqueUrl('burst'));
  // Every 10th is invalid: it must be refused and leave no row.
  const bodies = urls.map((u, i) => methodCall('weblogUpdates.ping', [i % 10 === 0 ? '' : `Blog ${i}`, u]));
  const replies = await Promise.all(bodies.map((b) => post(b)));
  let acked = 0;
  for (let i = 0; i < urls.length; i++) {
    const r = readReply(replies[i].status, replies[i].body);
    assert.equal(r.status, 200);
    const rows = await findPingsByUrl(t.app.db, urls[i]);
    if (i % 10 === 0) {
      assert.equal(r.flerror, true);
      assert.equal(rows.length, 0);
    } else {
      assert.equal(r.flerror, false, r.message);
      assert.equal(rows.length, 1);
      assert.equal(rows[0].name, `Blog ${i}`);
      acked++;
    }
  }
  assert.equal(acked, 360);
  assert.equal((await countPings(t.app.db)) - before, acked);
});

test('racing pings for one weblog: exactly one accepted', async () => {
  for (let round = 0; round < 5; round++) {
    const url = uniqueUrl('race');
    const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => post(methodCall('weblogUpdates.ping', [`Racer ${i}`, url]))));
    const ok = replies.map((r) => readReply(r.status, r.body)).filter((r) => r.flerror === false);
    assert.equal(ok.length, 1, `round ${round}`);
    assert.equal((await findPingsByUrl(t.app.db, url)).length, 1);
  }
});

test('the throttle also holds through the service when pings share a batch', async () => {
  const url = uniqueUrl('batch');
  const results = await Promise.all(Array.from({ length: 10 }, () => t.app.pings.accept({ method: 'ping', name: 'B', url })));
  assert.equal(results.filter((r) => r.ok).length, 1);
  assert.ok(results.filter((r) => !r.ok).every((r) => !r.ok && r.reason === 'throttled'));
});

test('with the database gone, pings are refused with flerror 1 and never acknowledged', async () => {
  const t2 = await startApp();
  try {
    await t2.app.db.close();
    const url = uniqueUrl('down');
    const res = await t2.app.inject({ method: 'POST', url: '/RPC2', payload: methodCall('weblogUpdates.ping', ['Down', url]) });
    const r = readReply(res.statusCode, res.body);
    assert.equal(r.status, 200);
    assert.equal(r.flerror, true);
    assert.equal(r.message, 'The ping could not be stored (database unavailable); please ping again later.');
    const form = await t2.app.inject({ method: 'GET', url: `/pingSiteForm?name=D&url=${encodeURIComponent(url)}` });
    assert.equal(form.statusCode, 503);
    assert.match(form.body, /could not be stored/);
  } finally {
    await t2.close();
  }
});

test('PING_MIN_INTERVAL=0 disables the throttle', async () => {
  const t3 = await startApp({ PING_MIN_INTERVAL: 0 });
  try {
    const url = uniqueUrl('nothrottle');
    const results = await Promise.all(Array.from({ length: 5 }, () => t3.app.pings.accept({ method: 'ping', name: 'Z', url })));
    assert.equal(results.filter((r) => r.ok).length, 5);
    assert.equal((await findPingsByUrl(t3.app.db, url)).length, 5);
  } finally {
    await t3.close();
  }
});
