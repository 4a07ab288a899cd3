// The background rescoring (src/publishing/spam-rescorer.ts) against a real database: intake scores a new
// weblog's URL alone, so a subdomain farm with plain names pinging on a timer is listed at first; once the
// job has gathered every family's evidence by SQL, the farm is held (its score rose: siblings, clockwork
// rhythm) and leaves changes.xml and the earlier hours' archives at the next render, while an honest weblog
// stays. A splog-looking URL whose publisher registers for RSS Ping falls below the threshold at its next
// ping's rescoring and is listed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startApp, methodCall, readReply, type TestApp } from '../helpers/app.js';
import { insertPings } from '../publishing/helpers.js';
import { archivePath, hourStart } from '../../src/publishing/documents/archive.js';
import { addPublisher } from '../../src/intake/rss-ping/publisher-repository.js';
import { deriveKey, sealPassword } from '../../src/intake/rss-ping/secret-box.js';

const SECRET = 'r'.repeat(40);
const tag = randomBytes(3).toString('hex');
const farm = Array.from({ length: 24 }, (_, i) => `http://journal${i}.northfield-${tag}.example/`);
const honest = `http://jims-kitchen-${tag}.example.org/`;
const splog = `http://cheapcarinsurancequotes${tag.replace(/[0-9]/g, 'x')}.info/`;

let t: TestApp;
before(async () => {
  t = await startApp({
    SPAM_FILTER: 'hold',
    SPAM_RESCORE_INTERVAL: 0,
    RENDER_SCHEDULER: false,
    PUBLISH_POINTER_TTL_MS: 0,
    PING_MIN_INTERVAL: 0,
    RSSPING_SECRET: SECRET,
  });
});
after(async () => {
  await t.close();
});

async function ping(name: string, url: string): Promise<void> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/RPC2',
    headers: { 'content-type': 'text/xml' },
    payload: methodCall('weblogUpdates.ping', [name, url]),
  });
  assert.equal(readReply(res.statusCode, res.body).flerror, false, res.body);
}

async function listed(): Promise<Set<string>> {
  await t.app.renderer.tick({ force: true });
  const doc = await t.app.inject({ method: 'GET', url: '/changes.xml' });
  return new Set([...doc.body.matchAll(/url="([^"]+)"/g)].map((m) => m[1]));
}

async function spamOf(url: string): Promise<{ score: number; held: boolean; codes: string[] }> {
  const [r] = await t.app.db.query<{ score: number; held: boolean; reasons: { code: string }[] }>(
    'select s.score, s.held, s.reasons from weblog_spam s join weblogs w on w.id = s.weblog_id where w.url = $1',
    [url],
  );
  return { score: Number(r.score), held: r.held, codes: r.reasons.map((x) => x.code) };
}

test('a subdomain farm pinging on a timer is listed on its URL alone, then held once rescored; an honest weblog stays', async () => {
  // Each farm weblog: 7 earlier pings every 10 minutes (the history a timer leaves), then one now, through
  // intake (which writes the URL score and the registrable domain with it).
  const now = Date.now();
  await insertPings(
    t.app.db,
    farm.flatMap((url, i) => Array.from({ length: 7 }, (_, k) => ({ name: `Journal ${i}`, url, at: now - (7 - k) * 600_000 }))),
  );
  await insertPings(t.app.db, [
    { name: 'Jim cooks', url: honest, at: now - 3_100_000 },
    { name: 'Jim cooks', url: honest, at: now - 2_200_000 },
    { name: 'Jim cooks', url: honest, at: now - 400_000 },
  ]);
  for (const [i, url] of farm.entries()) await ping(`Journal ${i}`, url);
  await ping('Jim cooks', honest);

  const before = await listed();
  assert.ok(farm.every((u) => before.has(u)) && before.has(honest), 'on their URLs alone, all are listed');
  // The finished hours the farm pinged in, rendered before the job runs: the farm is in their archives.
  const pastHours = [...new Set(Array.from({ length: 7 }, (_, k) => hourStart(now - (7 - k) * 600_000)))].filter((h) => h < hourStart(now));
  const inArchive = async (h: number) => {
    const doc = await t.app.inject({ method: 'GET', url: archivePath(h) });
    assert.equal(doc.statusCode, 200, `${archivePath(h)}: ${doc.statusCode}`);
    return farm.filter((u) => doc.body.includes(`url="${u}"`)).length;
  };
  for (const h of pastHours) {
    await t.app.renderer.renderHour(h);
    assert.ok((await inArchive(h)) > 0, `${archivePath(h)} lists the farm before the job`);
  }
  assert.equal((await spamOf(farm[0])).held, false);

  const run = await t.app.spamRescorer.runOnce();
  assert.equal(run.ran, true, JSON.stringify(run));
  assert.ok(run.ran && run.flipped >= farm.length, JSON.stringify(run));
  for (const url of farm) {
    const s = await spamOf(url);
    assert.equal(s.held, true, `${url}: ${JSON.stringify(s)}`);
    assert.ok(s.codes.includes('rhythm.farm') && s.codes.includes('rhythm.regular'), `${url}: ${s.codes}`);
  }
  const h = await spamOf(honest);
  assert.equal(h.held, false, JSON.stringify(h));

  const after = await listed();
  assert.deepEqual(
    farm.filter((u) => after.has(u)),
    [],
    'the farm left changes.xml at the next render',
  );
  assert.ok(after.has(honest));
  // The same render took the archive hours the job marked: the farm left the earlier hours' archives too.
  for (const h of pastHours) assert.equal(await inArchive(h), 0, `${archivePath(h)} after the job`);
  assert.deepEqual(await t.app.db.query('select hour from archive_stale_hours'), [], 'every marked hour rendered');
});

test("a splog-looking URL is held at intake; once its publisher registers, its next ping's rescoring lets it be listed", async () => {
  await ping('Cheap Car Insurance Quotes', splog);
  const first = await spamOf(splog);
  assert.equal(first.held, true, JSON.stringify(first));
  assert.ok(!(await listed()).has(splog));

  await addPublisher(t.app.db, splog, sealPassword(deriveKey(SECRET), splog, 'a-publisher-password'));
  await ping('Cheap Car Insurance Quotes', splog);
  const run = await t.app.spamRescorer.runOnce();
  assert.equal(run.ran, true, JSON.stringify(run));
  const s = await spamOf(splog);
  assert.deepEqual([s.held, s.codes.includes('trust.publisher')], [false, true], JSON.stringify(s));
  assert.ok((await listed()).has(splog), 'listed once its score fell');
});
