// The spam evidence gathered by SQL for the rescoring job (src/spam/evidence-repository.ts), against a real
// database: siblings of one domain and the domains pinged from one address, each counted the way rhythm.ts
// reads them, and bounded. Regression: a domain with 500,000 weblogs pinged within the hour made the siblings
// statement join every pair of a 500-weblog batch with all of them; the embedded database ran out of memory
// and intake answered no ping for ~8 s every minute (bench/wrk.ts, 0 pings/s answered).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startApp, methodCall, readReply, type TestApp } from '../helpers/app.js';
import { gatherEvidence, SIBLINGS_WALK } from '../../src/spam/evidence-repository.js';
import { rhythmReasons, SIBLINGS_CAP } from '../../src/spam/rhythm.js';

const tag = randomBytes(3).toString('hex');
let t: TestApp;
before(async () => {
  t = await startApp({ SPAM_FILTER: 'mark', SPAM_RESCORE_INTERVAL: 0, RENDER_SCHEDULER: false, PING_MIN_INTERVAL: 0, PING_HOST_BUDGET: 0 });
});
after(async () => {
  await t.close();
});

async function ping(url: string, from: string): Promise<void> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/RPC2',
    remoteAddress: from,
    headers: { 'content-type': 'text/xml' },
    payload: methodCall('weblogUpdates.ping', ['A weblog', url]),
  });
  assert.equal(readReply(res.statusCode, res.body).flerror, false, res.body);
}

const idOf = async (url: string) => Number((await t.app.db.query<{ id: number }>('select id from weblogs where url = $1', [url]))[0].id);

test(`siblings past SIBLINGS_CAP (${SIBLINGS_CAP}) are counted up to it, and the reason says "or more"`, async () => {
  const farm = Array.from({ length: SIBLINGS_CAP + 30 }, (_, i) => `http://s${i}.farm-${tag}.example/`);
  for (const u of farm) await ping(u, '192.0.2.10');
  // The hour before the weblog's own last ping: the farm's last weblog sees every other one.
  const [g] = await gatherEvidence(t.app.db, [await idOf(farm.at(-1)!)]);
  assert.equal(g.evidence.siblingsLastHour, SIBLINGS_CAP);
  const farmReason = rhythmReasons(g.evidence).find((r) => r.code === 'rhythm.farm');
  assert.equal(farmReason?.text, `${SIBLINGS_CAP} or more other weblogs of the same domain pinged within the hour`);
  assert.equal(farmReason?.weight, 0.35);
});

test('below the cap, siblings and the domains pinged from one address are exact', async () => {
  const few = Array.from({ length: 7 }, (_, i) => `http://f${i}.few-${tag}.example/`);
  const spread = Array.from({ length: 25 }, (_, i) => `http://blog${i}-${tag}.example/`);
  for (const u of few) await ping(u, '192.0.2.20');
  for (const u of spread) await ping(u, '192.0.2.20');
  const [a] = await gatherEvidence(t.app.db, [await idOf(few[6])]);
  assert.equal(a.evidence.siblingsLastHour, 6);
  // Only pings up to the weblog's own last one count: few[6] was pinged before the 25 other domains.
  assert.equal(a.evidence.domainsFromAddressLastHour, 1);
  const [b] = await gatherEvidence(t.app.db, [await idOf(spread[24])]);
  assert.equal(b.evidence.domainsFromAddressLastHour, 26);
  assert.equal(b.evidence.siblingsLastHour, 0);
});

test('a sibling that pinged after the weblog counts only with a ping in the hour before its last one', async () => {
  const site = `late-${tag}.example`;
  const before = `http://before.${site}/`;
  const both = `http://both.${site}/`;
  const weblog = `http://main.${site}/`;
  const after = `http://after.${site}/`;
  await ping(before, '192.0.2.30');
  await ping(both, '192.0.2.30');
  await ping(weblog, '192.0.2.30');
  // After the weblog's last ping: `both` again (its earlier ping still counts), `after` for the first time.
  await ping(both, '192.0.2.30');
  await ping(after, '192.0.2.30');
  const [g] = await gatherEvidence(t.app.db, [await idOf(weblog)]);
  assert.equal(g.evidence.siblingsLastHour, 2);
});

test('regression: the siblings statement probes a sibling through its own pings, never the hour of every ping', async () => {
  // On the embedded database (no autovacuum: default estimates) the probe was planned as a bitmap AND with
  // the whole hour's received_at range: 33 ms a probe once the hour held ~1M pings, a batch for half an hour.
  const sent: { sql: string; params: unknown[] }[] = [];
  const db = t.app.db;
  const recording = {
    query: <T>(sql: string, params: unknown[] = [], opts?: { name?: string }) => {
      sent.push({ sql, params });
      return db.query<T>(sql, params, opts);
    },
    exec: (sql: string) => db.exec(sql),
  };
  const site = `probe-${tag}.example`;
  const urls = Array.from({ length: 5 }, (_, i) => `http://p${i}.${site}/`);
  for (const u of urls) await ping(u, '192.0.2.40');
  await gatherEvidence(recording, [await idOf(urls[2])]);
  const siblings = sent.find((s) => s.sql.includes('weblog_spam s2'));
  assert.ok(siblings, 'the siblings statement was sent');
  const plan = (await db.query<Record<string, string>>(`explain ${siblings.sql}`, siblings.params))
    .map((r) => Object.values(r)[0])
    .join('\n');
  assert.doesNotMatch(plan, /pings\w*_received_at\w*/, `the probe reads no received_at index:\n${plan}`);
  // And each sibling's weblog row by its key, not a hash of every weblog pinged in the hour per weblog of the
  // batch (16-18 s a batch on the embedded database in the wrk bench, 200,000 new weblogs).
  assert.doesNotMatch(plan, /Seq Scan on weblogs\b/, `no weblogs scan:\n${plan}`);
  assert.match(plan, /weblogs_pkey/, plan);
});

test('regression: a weblog of a domain with thousands of weblogs pinged after it walks a bounded number of siblings', async () => {
  // The wrk bench's pings for new weblogs, all of one domain: each earlier weblog's statement probed every
  // later sibling (none could count, so the cap never ended the walk), 9-11 s a statement of 50 weblogs on
  // the embedded database, and pingd answered no ping meanwhile.
  const db = t.app.db;
  const site = `crowd-${tag}.example`;
  const weblog = `http://first.${site}/`;
  await ping(weblog, '192.0.2.50');
  const id = await idOf(weblog);
  const later = 3 * SIBLINGS_WALK;
  // Weblogs of the same domain first pinged after it (written directly: thousands of pings through intake
  // would take longer than the point needs).
  await db.query(
    `with w as (
       insert into weblogs (url, name, first_ping_at, last_ping_at)
       select 'http://c' || g || '.' || $2 || '/', 'crowd', now() + interval '1 second', now() + interval '1 second'
         from generate_series(1, $1::int) g
       returning id, url, last_ping_at
     ), s as (
       insert into weblog_spam (weblog_id, url, score, site) select id, url, 0, $2 from w
     )
     insert into pings (weblog_id, received_at, method, name, url) select id, last_ping_at, 'ping', 'crowd', url from w`,
    [later, site],
  );
  const sent: { sql: string; params: unknown[] }[] = [];
  const recording = {
    query: <T>(sql: string, params: unknown[] = [], opts?: { name?: string }) => {
      sent.push({ sql, params });
      return db.query<T>(sql, params, opts);
    },
    exec: (sql: string) => db.exec(sql),
  };
  const [g] = await gatherEvidence(recording, [id]);
  assert.equal(g.evidence.siblingsLastHour, 0, 'none of them pinged in the hour before its last ping');
  const siblings = sent.find((s) => s.sql.includes('weblog_spam s2'))!;
  const [row] = await db.query<Record<string, unknown>>(`explain (analyze, format json) ${siblings.sql}`, siblings.params);
  const raw = Object.values(row)[0];
  const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { Plan: PlanNode }[];
  // Rows the scans of weblog_spam returned for the sibling walk (every loop's), against what the site holds.
  let walked = 0;
  const visit = (n: PlanNode) => {
    if (n['Relation Name'] === 'weblog_spam') walked += n['Actual Rows'] * n['Actual Loops'];
    for (const c of n.Plans ?? []) visit(c);
  };
  visit(plan[0].Plan);
  assert.ok(walked > 0, 'the plan read weblog_spam');
  assert.ok(walked <= 2 * SIBLINGS_WALK, `walked ${walked} siblings of ${later}; at most ${2 * SIBLINGS_WALK}`);
});

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  Plans?: PlanNode[];
}
