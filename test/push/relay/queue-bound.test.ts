// The relay queue's bound: a target that cannot keep up (one relay a minute) keeps at most RELAY_QUEUE_MAX
// weblogs waiting, the stalest dropped and counted per target (`pingd relay status`, /api/stats, /status),
// while a target that keeps up loses nothing; a weblog pinged again while it waits stays one job (its
// newest ping) and counts once.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';
import { targetStatus } from '../../../src/push/relay/target-repository.js';
import { relayCommand } from '../../../src/push/relay/relay-command.js';
import { borrowed } from '../../../src/platform/db/borrow.js';
import { derivedAll, httpPing } from './helpers.js';
import { startForwarder, type Forwarder } from './forwarder.js';
import { waitFor } from '../../helpers/wait.js';

const MAX = 5;
let dir: string;
let fast: Forwarder;
let slow: Forwarder;
let t: TestApp;
let base: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'pingd-relay-bound-'));
  // Plain XML-RPC ping servers answering flerror 0 (nothing is passed on).
  fast = await startForwarder('127.0.0.50', () => '', { forwards: () => false });
  slow = await startForwarder('127.0.0.51', () => '', { forwards: () => false });
  const file = join(dir, 'relay.yaml');
  writeFileSync(file, `targets:\n  - url: ${fast.url}\n    rate_per_min: 60000\n  - url: ${slow.url}\n    rate_per_min: 1\n`);
  t = await startApp({
    RELAY_FILE: file,
    RELAY_QUEUE_MAX: MAX,
    PING_MIN_INTERVAL: 0,
    PING_HOST_BUDGET: 0,
    FETCH_ALLOW_ADDRESSES: parseCidrList('127.0.0.0/8'),
  });
  Object.assign(t.app.relay.timing, { pollMs: 100, deriveGapMs: 20, flushMs: 20 });
  base = await t.listen();
});

after(async () => {
  await t?.close();
  await fast?.close();
  await slow?.close();
  rmSync(dir, { recursive: true, force: true });
});

const status = async (url: string) => (await targetStatus(t.app.db, 100)).find((s) => s.url === url)!;
const waiting = async (url: string) =>
  (
    await t.app.db.query<{ weblog_url: string; name: string }>(
      `select weblog_url, name from relay_jobs where target = $1 and state = 'pending' order by ping_id`,
      [url],
    )
  ).map((r) => ({ ...r }));

const blogs = Array.from({ length: 20 }, () => uniqueUrl('bound'));
/** What the bound dropped at the fast target (a page of more new weblogs than RELAY_QUEUE_MAX can). */
let fastDropped = 0;

test('a target that cannot keep up keeps at most RELAY_QUEUE_MAX weblogs waiting; the stalest are dropped and counted (REGRESSION: one job per ping and target, without end)', async () => {
  // The first relay takes the slow target's turn: the next is a minute away.
  assert.equal(await httpPing(base, 'Bound', blogs[0]), 200);
  await waitFor(async () => (await status(slow.url)).delivered === 1, {
    timeoutMs: 10_000,
    what: 'the first relay to the slow target recorded',
  });
  for (const u of blogs.slice(1)) assert.equal(await httpPing(base, 'Bound', u), 200);
  // A page of pings and the bound it brings commit together.
  await derivedAll(t.app.db);

  const s = await status(slow.url);
  assert.deepEqual({ pending: s.pending, dropped: s.dropped, delivered: s.delivered }, { pending: MAX, dropped: 19 - MAX, delivered: 1 });
  // The newest stay: a relay late by RELAY_QUEUE_MAX turns is still worth sending, an older one is dropped.
  assert.deepEqual(
    (await waiting(slow.url)).map((j) => j.weblog_url),
    blogs.slice(-MAX),
  );
  assert.equal(slow.calls.length, 1);
  // The bound is per target: the fast one drains its own queue (a page of more than RELAY_QUEUE_MAX new
  // weblogs can overflow even its queue before a claim: each weblog is then delivered or counted dropped).
  await waitFor(async () => (await status(fast.url)).pending === 0, { timeoutMs: 10_000, what: 'the fast target drained' });
  const f = await status(fast.url);
  assert.equal(f.delivered + f.dropped, 20);
  assert.equal(new Set(fast.calls.map((c) => c.params[1])).size, f.delivered);
  fastDropped = f.dropped;
});

test('a weblog pinged again while it waits stays one job of its newest ping, and takes one place in the bound', async () => {
  const again = uniqueUrl('again');
  for (const name of ['First', 'Second', 'Third']) assert.equal(await httpPing(base, name, again), 200);
  await derivedAll(t.app.db);
  const s = await status(slow.url);
  assert.deepEqual({ pending: s.pending, dropped: s.dropped }, { pending: MAX, dropped: 19 - MAX + 1 });
  const jobs = await waiting(slow.url);
  assert.deepEqual(jobs.at(-1), { weblog_url: again, name: 'Third' });
  assert.deepEqual(
    jobs.slice(0, -1).map((j) => j.weblog_url),
    blogs.slice(-(MAX - 1)),
  );
  await waitFor(async () => (await status(fast.url)).pending === 0, { timeoutMs: 10_000, what: 'the fast target drained' });
});

test('what was dropped shows in `pingd relay status`, /api/stats and /status', async () => {
  const lines: string[] = [];
  const code = await relayCommand({}, ['status'], t.config, {
    openDb: async () => borrowed(t.app.db),
    EXIT: { OK: 0, FAILURE: 1, USAGE: 2 },
    out: (x) => void lines.push(x),
    err: (x) => void lines.push(x),
  });
  assert.equal(code, 0);
  const out = lines.join('\n');
  const slowBlock = out.slice(out.indexOf(slow.url));
  assert.match(slowBlock, new RegExp(`waiting {3}${MAX} \\(oldest \\d+ s\\) {3}dropped ${19 - MAX + 1} \\(queue full\\)`));

  const stats = await t.app.inject({ url: '/api/stats' });
  assert.equal(stats.statusCode, 200);
  const relay = (stats.json() as { health: { queues: { name: string; depth: number; dropped?: number }[] } }).health.queues.find(
    (q) => q.name === 'relay',
  );
  assert.deepEqual({ depth: relay?.depth, dropped: relay?.dropped }, { depth: MAX, dropped: 19 - MAX + 1 + fastDropped });

  const page = await t.app.inject({ url: '/status' });
  assert.equal(page.statusCode, 200);
  assert.match(page.body, new RegExp(`id="relay-dropped">${19 - MAX + 1 + fastDropped}<`));

  const metrics = await t.app.inject({ url: '/metrics' });
  assert.match(
    metrics.body,
    new RegExp(`pingd_relay_skipped_total\\{target="${slow.url.replace(/[./]/g, '\\$&')}",reason="dropped"\\} ${19 - MAX + 1}`),
  );
});
