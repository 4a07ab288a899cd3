// Retention: raw pings older than RETENTION_DAYS go, in bounded batches, and nothing else does (newer
// pings, the weblogs with their totals); one instance prunes at a time (advisory lock); intake keeps
// working during a pass; a shutdown stops a pass after its current batch.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import cron from 'node-cron';
import pg from 'pg';
import { prune, RETENTION_LOCK } from '../../../src/operations/retention/prune.js';
import { insertPayload, type PayloadRecord } from '../../../src/intake/rss-ping/payload-repository.js';
import { ARCHIVES_CLOSED_WATERMARK, setWatermark } from '../../../src/publishing/rendering-repository.js';
import { archivePath, hourStart } from '../../../src/publishing/documents/archive.js';
import { BACKEND, startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import type { FastifyInstance } from 'fastify';
import { ConfigError, loadConfig } from '../../../src/platform/config.js';
import { waitFor } from '../../helpers/wait.js';

const apps: TestApp[] = [];
after(async () => {
  for (const a of apps) await a.close().catch(() => undefined);
});

async function app(overrides: Parameters<typeof startApp>[0] = {}): Promise<TestApp> {
  // No render ticks: the publisher would otherwise close archives for the hours these tests backdate into.
  const t = await startApp({ PING_MIN_INTERVAL: 0, RENDER_SCHEDULER: false, ...overrides });
  apps.push(t);
  return t;
}

async function ping(a: FastifyInstance, url: string, name = 'Retained blog') {
  const r = await a.pings.accept({ method: 'ping', name, url });
  assert.equal(r.ok, true, JSON.stringify(r));
}

/** Moves every stored ping of `url` back in time (the test's clock, not the repository's). */
async function age(a: FastifyInstance, url: string, days: number) {
  await a.db.query(`update pings set received_at = now() - make_interval(secs => $2::float8 * 86400) where url = $1`, [url, days]);
}

/** Adds `n` old ping rows for one weblog straight into the table: a backlog without n round trips. */
async function backlog(a: FastifyInstance, url: string, n: number, days = 40) {
  await ping(a, url);
  await a.db.query(
    `insert into pings (weblog_id, received_at, method, name, url)
     select w.id, now() - make_interval(days => $3::int, secs => g), 'ping', w.name, w.url
       from weblogs w, generate_series(1, $2::int) g where w.url = $1`,
    [url, n, days],
  );
}

const countFor = async (a: FastifyInstance, url: string) =>
  Number((await a.db.query<{ n: number }>('select count(*)::int as n from pings where url = $1', [url]))[0].n);

test('prune deletes exactly the pings older than the cutoff, in batches, and keeps weblogs and their totals', async () => {
  const { app: a } = await app();
  const old = uniqueUrl('old');
  const edge = uniqueUrl('edge');
  const fresh = uniqueUrl('fresh');
  for (let i = 0; i < 7; i++) await ping(a, old);
  for (let i = 0; i < 2; i++) await ping(a, edge);
  for (let i = 0; i < 3; i++) await ping(a, fresh);
  await age(a, old, 31);
  await age(a, edge, 29.9);
  const weblogsBefore = await a.db.query(
    'select url, name, first_ping_at, last_ping_at, ping_count from weblogs where url = any($1::text[]) order by url',
    [[old, edge, fresh]],
  );

  const dry = await prune(a.db, { pingDays: 30, archiveDays: 0, batchSize: 3, dryRun: true });
  assert.equal(dry.pingsDeleted, 7);
  assert.equal(dry.dryRun, true);
  assert.equal(await countFor(a, old), 7, 'a dry run deletes nothing');

  const r = await prune(a.db, { pingDays: 30, archiveDays: 0, batchSize: 3, pauseMs: 0 });
  assert.equal(r.pingsDeleted, 7);
  assert.equal(
    r.batches,
    6,
    'pings 3 + 3 + 1 (the short batch ends it), then one empty batch each of RSS Ping payloads, verifications and found items',
  );
  assert.equal(r.complete, true);
  assert.equal(r.archiveCutoff, null, 'archives are kept forever by default');
  assert.ok(r.pingCutoff && Math.abs(r.pingCutoff.getTime() - (Date.now() - 30 * 86_400_000)) < 60_000);
  assert.equal(await countFor(a, old), 0);
  assert.equal(await countFor(a, edge), 2, 'younger than 30 days: kept');
  assert.equal(await countFor(a, fresh), 3);
  const weblogsAfter = await a.db.query(
    'select url, name, first_ping_at, last_ping_at, ping_count from weblogs where url = any($1::text[]) order by url',
    [[old, edge, fresh]],
  );
  assert.deepEqual(weblogsAfter, weblogsBefore, 'weblogs, first/last ping and ping_count untouched');

  const again = await prune(a.db, { pingDays: 30, archiveDays: 0, batchSize: 3 });
  assert.equal(again.pingsDeleted, 0);
  assert.equal(again.batches, 4, 'one empty batch per table (pings, payloads, verifications, found items)');
  const never = await prune(a.db, { pingDays: 0, archiveDays: 0, batchSize: 3 });
  assert.deepEqual([never.pingCutoff, never.pingsDeleted, never.batches], [null, 0, 0], 'days = 0 keeps everything');
});

test('RSS Ping payloads follow the retention of their pings; nothing younger goes', async () => {
  const { app: a } = await app();
  const payload = (headline: string): PayloadRecord => ({
    siteName: 'Payload blog',
    feeds: [{ uri: 'http://p.example.com/rss.xml', type: 'rss' }],
    auth: 'none',
    authNote: null,
    payloadType: null,
    payloadEncoding: null,
    payloadAttributes: {},
    payloadFormat: 'rss',
    payload: `<item><title>${headline}</title></item>`,
    payloadSha1: '0'.repeat(40),
    payloadHash: null,
    payloadHashAlgorithm: null,
    payloadHashUri: null,
    publisherMboxHash: null,
    publisherMboxHashAlgorithm: null,
    headline,
    itemLink: null,
    itemGuid: null,
    itemUri: `http://p.example.com/${headline}`,
    summary: null,
    tokenized: false,
  });
  const url = uniqueUrl('payload');
  const ids: number[] = [];
  for (let i = 0; i < 5; i++) {
    const r = await a.pings.accept({ method: 'rssPing', name: 'Payload blog', url });
    assert.ok(r.ok);
    ids.push(r.id);
    await insertPayload(a.db, r.id, r.receivedAt, url, payload(`h${i}`));
  }
  // Three of the five pings (and their payloads) are 45 days old.
  await a.db.query(`update pings set received_at = received_at - interval '45 days' where id = any($1::bigint[])`, [ids.slice(0, 3)]);
  await a.db.query(`update rssping_payloads set received_at = received_at - interval '45 days' where ping_id = any($1::bigint[])`, [
    ids.slice(0, 3),
  ]);
  const dry = await prune(a.db, { pingDays: 30, archiveDays: 0, batchSize: 2, dryRun: true });
  assert.deepEqual([dry.pingsDeleted, dry.payloadsDeleted], [3, 3]);
  const r = await prune(a.db, { pingDays: 30, archiveDays: 0, batchSize: 2, pauseMs: 0 });
  assert.deepEqual([r.pingsDeleted, r.payloadsDeleted], [3, 3]);
  const left = (
    await a.db.query<{ ping_id: number }>('select ping_id from rssping_payloads where site_url = $1 order by ping_id', [url])
  ).map((x) => Number(x.ping_id));
  assert.deepEqual(left, ids.slice(3));
  assert.equal(await countFor(a, url), 2);
});

test('verification jobs and found items follow the retention of their pings; nothing younger goes', async () => {
  // VERIFY_PINGS=mark writes a job with every ping; no feed server is asked (the jobs are aged, not run).
  const { app: a } = await app({ VERIFY_PINGS: 'mark', FETCH_ALLOW_PRIVATE: false });
  await a.verification.worker?.close(0);
  const url = uniqueUrl('verified');
  const ids: number[] = [];
  for (let i = 0; i < 4; i++) {
    const r = await a.pings.accept({ method: 'ping', name: 'Verified blog', url });
    assert.ok(r.ok);
    ids.push(r.id);
  }
  const [w] = await a.db.query<{ id: number }>('select id from weblogs where url = $1', [url]);
  await a.db.query(
    `insert into feed_items (feed_id, weblog_id, ping_id, received_at, weblog_url, weblog_name, feed_url, title)
     select 0, $1, p.id, p.received_at, $2, 'Verified blog', $2 || 'feed', 'item ' || p.id from pings p where p.id = any($3::bigint[])`,
    [w.id, url, ids],
  );
  const old = ids.slice(0, 3);
  for (const table of ['pings', 'ping_verifications', 'feed_items']) {
    const key = table === 'pings' ? 'id' : 'ping_id';
    await a.db.query(`update ${table} set received_at = received_at - interval '45 days' where ${key} = any($1::bigint[])`, [old]);
  }
  const dry = await prune(a.db, { pingDays: 30, archiveDays: 0, batchSize: 2, dryRun: true });
  assert.deepEqual([dry.pingsDeleted, dry.verificationsDeleted, dry.itemsDeleted], [3, 3, 3]);
  const r = await prune(a.db, { pingDays: 30, archiveDays: 0, batchSize: 2, pauseMs: 0 });
  assert.deepEqual([r.pingsDeleted, r.verificationsDeleted, r.itemsDeleted], [3, 3, 3]);
  const jobs = (await a.db.query<{ ping_id: number }>('select ping_id from ping_verifications where weblog_id = $1', [w.id])).map((x) =>
    Number(x.ping_id),
  );
  const items = (await a.db.query<{ ping_id: number }>('select ping_id from feed_items where weblog_id = $1', [w.id])).map((x) =>
    Number(x.ping_id),
  );
  assert.deepEqual([jobs, items], [ids.slice(3), ids.slice(3)]);
});

test('ARCHIVE_RETENTION_DAYS deletes only the hourly archives older than it, with their bytes; the others are still served', async () => {
  // Pointer TTL 0: this instance asks the database for every request (it would otherwise notice within 1 s).
  const { app: a } = await app({ PUBLISH_POINTER_TTL_MS: 0 });
  const oldUrl = uniqueUrl('arch-old');
  const newUrl = uniqueUrl('arch-new');
  await ping(a, oldUrl);
  await ping(a, newUrl);
  await age(a, oldUrl, 40);
  await age(a, newUrl, 10);
  const hourOf = async (url: string) =>
    hourStart(new Date((await a.db.query<{ at: Date }>('select received_at as at from pings where url = $1', [url]))[0].at).getTime());
  const [oldHour, newHour] = [await hourOf(oldUrl), await hourOf(newUrl)];
  for (const h of [oldHour, newHour]) assert.ok(await a.renderer.renderHour(h), `rendered ${archivePath(h)}`);
  const get = (h: number) => a.inject({ method: 'GET', url: archivePath(h) });
  assert.equal((await get(oldHour)).statusCode, 200);
  assert.ok((await get(oldHour)).body.includes(oldUrl));
  const bytesOf = async (path: string) =>
    Number(
      (
        await a.db.query<{ n: number }>(
          'select count(*)::int as n from rendering_chunks c join renderings r on r.id = c.rendering_id where r.path = $1',
          [path],
        )
      )[0].n,
    );
  assert.ok((await bytesOf(archivePath(oldHour))) > 0);

  const dry = await prune(a.db, { pingDays: 0, archiveDays: 30, batchSize: 5000, dryRun: true });
  assert.equal(dry.archivesDeleted, 1);
  const r = await prune(a.db, { pingDays: 0, archiveDays: 30, batchSize: 5000, pauseMs: 0 });
  assert.equal(r.archivesDeleted, 1);
  assert.equal(r.pingsDeleted, 0, 'RETENTION_DAYS = 0: raw pings stay');
  assert.equal((await get(oldHour)).statusCode, 404);
  assert.equal(await bytesOf(archivePath(oldHour)), 0, 'its renderings and bytes are gone too');
  const kept = await get(newHour);
  assert.equal(kept.statusCode, 200);
  assert.ok(kept.body.includes(newUrl));
  assert.equal(await countFor(a, oldUrl), 1);
});

test('pings of an hour whose archive is not closed yet are kept, whatever their age', async () => {
  const { app: a } = await app();
  const url = uniqueUrl('unclosed');
  await ping(a, url);
  await age(a, url, 40);
  // The publisher has closed the archives only up to 45 days ago (say, after a long outage).
  const mark = Date.now() - 45 * 86_400_000;
  await setWatermark(a.db, ARCHIVES_CLOSED_WATERMARK, mark * 1000);
  const held = await prune(a.db, { pingDays: 30, archiveDays: 0, batchSize: 100 });
  assert.equal(held.pingsDeleted, 0);
  assert.equal(held.pingCutoff?.getTime(), mark, 'the cutoff is held back to the last closed hour');
  assert.equal(await countFor(a, url), 1);
  await setWatermark(a.db, ARCHIVES_CLOSED_WATERMARK, Date.now() * 1000);
  const r = await prune(a.db, { pingDays: 30, archiveDays: 0, batchSize: 100 });
  assert.equal(r.pingsDeleted, 1);
  assert.equal(await countFor(a, url), 0);
});

test('a pass stops after the batch in progress when asked to, and at maxBatches, reporting it incomplete', async () => {
  const { app: a } = await app();
  const url = uniqueUrl('stop');
  await backlog(a, url, 50);
  let asked = 0;
  const stopped = await prune(a.db, { pingDays: 30, archiveDays: 0, batchSize: 10, pauseMs: 0, shouldStop: () => ++asked > 2 });
  assert.deepEqual([stopped.pingsDeleted, stopped.batches, stopped.complete], [20, 2, false]);
  const capped = await prune(a.db, { pingDays: 30, archiveDays: 0, batchSize: 10, pauseMs: 0, maxBatches: 1 });
  assert.deepEqual([capped.pingsDeleted, capped.complete], [10, false]);
  assert.equal(await countFor(a, url), 21, '20 old rows left, and the fresh ping');
});

test('the scheduled job: hourly in UTC, runs the configured pass, counts it in /metrics, and is gone after close', async () => {
  const named = () => [...cron.getTasks().values()].filter((t) => t.name === 'pingd-retention').length;
  const before = named();
  const t = await app({ RETENTION_DAYS: 30, RETENTION_BATCH: 10 });
  assert.equal(named(), before + 1, 'one task per app');
  const next = t.app.retention.nextRun();
  assert.ok(next && next.getUTCMinutes() === 17 && next.getUTCSeconds() === 0 && next.getTime() - Date.now() <= 3_600_000, String(next));

  const url = uniqueUrl('job');
  await backlog(t.app, url, 25);
  const run = await t.app.retention.runOnce();
  assert.ok(run.ran);
  assert.equal(run.result.pingsDeleted, 25);
  assert.equal(await countFor(t.app, url), 1);
  const metrics = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
  assert.match(metrics, /^pingd_retention_deleted_rows_total\{table="pings"\} 25$/m);
  assert.match(metrics, /^pingd_retention_runs_total\{outcome="pruned"\} 1$/m);
  assert.match(metrics, /^pingd_retention_last_success_timestamp_seconds \d+/m);

  await t.close();
  apps.splice(apps.indexOf(t), 1);
  assert.equal(named(), before, 'the task is destroyed on close');

  // With retention off the schedule still makes the logs' days ahead (src/operations/retention/partitions.ts).
  const off = await app({ RETENTION_DAYS: 0, ARCHIVE_RETENTION_DAYS: 0 });
  assert.equal(named(), before + 1, 'the task keeps the partitions when retention is off');
  assert.deepEqual(await off.app.retention.runOnce(), { ran: false, reason: 'disabled' });
  assert.equal(off.app.retention.nextRun(), null);
});

test('one instance prunes at a time: a pass finding the advisory lock taken skips', async () => {
  const t = await app({ RETENTION_DAYS: 30 });
  const url = uniqueUrl('lock');
  await backlog(t.app, url, 5);
  if (BACKEND === 'postgres') {
    // Another instance (another session) is pruning.
    const other = new pg.Client({ connectionString: t.config.DATABASE_URL });
    await other.connect();
    try {
      await other.query('select pg_advisory_lock($1)', [RETENTION_LOCK]);
      assert.deepEqual(await t.app.retention.runOnce(), { ran: false, reason: 'locked' });
      assert.equal(await countFor(t.app, url), 6, 'nothing deleted by the instance that skipped');
      assert.match((await t.app.inject({ method: 'GET', url: '/metrics' })).body, /^pingd_retention_runs_total\{outcome="skipped"\} 1$/m);
      await other.query('select pg_advisory_unlock($1)', [RETENTION_LOCK]);
    } finally {
      await other.end();
    }
  }
  // Embedded: the data directory has one owner, so the pass always runs.
  const run = await t.app.retention.runOnce();
  assert.ok(run.ran && run.result.pingsDeleted === 5);
  // Two passes asked for at once in one instance: the second does not start a parallel pass.
  await backlog(t.app, url, 5);
  const [first, second] = await Promise.all([t.app.retention.runOnce(), t.app.retention.runOnce()]);
  assert.ok(first.ran && first.result.pingsDeleted === 5);
  assert.deepEqual(second, { ran: false, reason: 'busy' });
});

test('intake goes on during a long pass, and closing the app ends the pass after its current batch', async () => {
  const t = await app({ RETENTION_DAYS: 30, RETENTION_BATCH: 50 });
  const url = uniqueUrl('long');
  await backlog(t.app, url, 3000);
  const pass = t.app.retention.runOnce();
  let passDone = false;
  void pass.then(() => (passDone = true));
  // Pings submitted while the pass runs are all accepted; at least the first is answered before it ends.
  const answeredDuring: boolean[] = [];
  for (let i = 0; i < 5; i++) {
    const r = await t.app.pings.accept({ method: 'ping', name: 'During prune', url: uniqueUrl('during') });
    assert.equal(r.ok, true, JSON.stringify(r));
    answeredDuring.push(!passDone);
  }
  assert.equal(answeredDuring[0], true, 'intake was answered while the pass was still running');
  const full = await pass;
  assert.ok(full.ran && full.result.complete && full.result.pingsDeleted === 3000, JSON.stringify(full));

  await backlog(t.app, url, 3000);
  const stored = await countFor(t.app, url);
  const interrupted = t.app.retention.runOnce();
  // Barrier: a batch is gone, so the pass is under way when the app closes.
  await waitFor(async () => (await countFor(t.app, url)) < stored, { what: 'the first batch of the pass deleted', intervalMs: 5 });
  await t.close();
  apps.splice(apps.indexOf(t), 1);
  const r = await interrupted;
  assert.ok(r.ran, JSON.stringify(r));
  assert.equal(r.result.complete, false, 'stopped early');
  assert.ok(
    r.result.pingsDeleted > 0 && r.result.pingsDeleted < 3000 && r.result.pingsDeleted % 50 === 0,
    `whole batches only: ${r.result.pingsDeleted}`,
  );
});

test('retention settings are validated at start, naming the variable', () => {
  assert.throws(
    () => loadConfig({ RETENTION_CRON: '61 * * * *' }),
    (e: unknown) => e instanceof ConfigError && e.message === 'RETENTION_CRON is not a valid cron expression: "61 * * * *"',
  );
  assert.throws(() => loadConfig({ RETENTION_CRON: 'hourly' }), /RETENTION_CRON must be a cron expression of 5 or 6 fields/);
  assert.throws(() => loadConfig({ RETENTION_DAYS: '-1' }), /RETENTION_DAYS must be between 0 and 36500, got -1/);
  assert.throws(() => loadConfig({ RETENTION_BATCH: '5' }), /RETENTION_BATCH must be between 10 and 100000, got 5/);
  assert.throws(() => loadConfig({ ARCHIVE_RETENTION_DAYS: 'forever' }), /ARCHIVE_RETENTION_DAYS must be an integer/);
  const c = loadConfig({});
  assert.deepEqual([c.RETENTION_DAYS, c.ARCHIVE_RETENTION_DAYS, c.RETENTION_CRON, c.RETENTION_BATCH], [30, 0, '17 * * * *', 5000]);
});

test('pruning live-stream events moves the stream horizon to the highest position deleted (resumes before it are reset)', async () => {
  const { app: a } = await app();
  const old = uniqueUrl('horizon-old');
  const kept = uniqueUrl('horizon-kept');
  for (let i = 0; i < 3; i++) await ping(a, old);
  await ping(a, kept);
  await age(a, old, 31);
  const oldIds = (await a.db.query<{ id: number }>('select id from pings where url = $1 order by id', [old])).map((r) => Number(r.id));
  // A settled verification of an old ping, stamped with a later position: its deletion moves the horizon too.
  await a.db.query(
    `insert into ping_verifications (ping_id, weblog_id, received_at, outcome, done_at, event_id)
     select id, weblog_id, received_at, 'unchanged', now(), $2 from pings where id = $1`,
    [oldIds[0], oldIds[2] + 100],
  );
  assert.equal(Number((await a.db.query<{ n: number }>('select pruned_through as n from stream_horizon'))[0].n), 0);
  await prune(a.db, { pingDays: 30, archiveDays: 0, batchSize: 2, pauseMs: 0 });
  assert.equal(Number((await a.db.query<{ n: number }>('select pruned_through as n from stream_horizon'))[0].n), oldIds[2] + 100);
  // Nothing older to prune: the horizon stays.
  await prune(a.db, { pingDays: 30, archiveDays: 0, batchSize: 2, pauseMs: 0 });
  assert.equal(Number((await a.db.query<{ n: number }>('select pruned_through as n from stream_horizon'))[0].n), oldIds[2] + 100);
});
