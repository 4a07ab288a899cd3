// Holding splogs out of what pingd publishes (issue 39, part 2). A keyword-glued host pinged beside an honest
// one through the real intake path: under SPAM_FILTER=hold changes.xml, shortChanges.xml, the hour's
// archive, /updates.xml and the stream list only the honest one, the "did my ping arrive?" page says yes and
// gives the reasons, `?spam=include` shows it on the stream, and the operator's pins (through the operator
// API) list it or hold an honest one at once. Under mark nothing is hidden but the score shows; under off
// nothing is scored.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { methodCall, rpc, startApp, type TestApp } from '../helpers/app.js';
import { openStream } from '../helpers/sse-client.js';
import { archivePath, hourStart } from '../../src/publishing/documents/archive.js';
import { DEFAULT_SPAM_THRESHOLD } from '../../src/spam/score.js';
import { loadConfig } from '../../src/platform/config.js';
import { deriveJobs, ensureCursor } from '../../src/push/relay/derive-repository.js';

const TOKEN = 'admin-test-token-0123456789abcdef';
const SPLOG = 'http://cheapcarinsurancequotes.info/';
const HONEST = 'http://jims-kitchen.example.org/';
const SPLOG_REASONS = [
  '+0.45: its address or name is made of words splogs use: cheap, insurance, quotes',
  '+0.20: its host name glues 4 words together (cheapcarinsurancequotes)',
  '+0.10: it is under .info, where most splogs were registered',
];

async function ping(t: TestApp, name: string, url: string): Promise<void> {
  const r = await rpc(t.app, methodCall('weblogUpdates.ping', [name, url]));
  assert.equal(r.flerror, false, r.body);
}

/** The weblog URLs a served weblogUpdates document lists, sorted. */
async function listed(t: TestApp, path: string): Promise<string[]> {
  const res = await t.app.inject({ url: path });
  assert.equal(res.statusCode, 200, `${path}: ${res.body}`);
  return [...res.body.matchAll(/ url="([^"]*)"/g)].map((m) => m[1]).sort();
}

const DOCS = () => ['/changes.xml', '/shortChanges.xml', archivePath(hourStart(Date.now()))];

async function admin(t: TestApp, argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/admin/cli',
    headers: { authorization: `Bearer ${TOKEN}` },
    payload: { argv },
  });
  assert.equal(res.statusCode, 200, res.body);
  const r = res.json() as { code: number; stdout: string; stderr: string };
  // stderr starts with the server's database line (docs/reference/cli.md).
  return { ...r, stderr: r.stderr.replace(/^pingd: database: .*\n/, '') };
}

/** The `url` of each `ping` event a replay from the start sends (it ends after the stored events). */
async function streamed(t: TestApp, query = ''): Promise<string[]> {
  const c = await openStream(`${t.url}/stream?since=0&until=live${query}`);
  try {
    await c.waitUntil((x) => x.ended, 15_000, 'the end of the replay');
    return c.events.filter((e) => e.event === 'ping').map((e) => (JSON.parse(e.data) as { url: string }).url);
  } finally {
    c.close();
  }
}

const weblogPage = (t: TestApp, url: string) => t.app.inject({ url: `/weblog?url=${encodeURIComponent(url)}` });

test('SPAM_THRESHOLD defaults to the scorer’s DEFAULT_SPAM_THRESHOLD; SPAM_FILTER to hold', () => {
  assert.equal(loadConfig({}, {}).SPAM_THRESHOLD, DEFAULT_SPAM_THRESHOLD);
  assert.equal(loadConfig({}, {}).SPAM_FILTER, 'hold');
});

test('SPAM_FILTER=hold: the splog is held out of the documents and the stream, its ping acknowledged and explained; pins list or hold', async () => {
  const t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0, ADMIN_TOKEN: TOKEN, SPAM_FILTER: 'hold' });
  try {
    await t.listen();
    // A live connection: the splog is pinged first, so had it been sent it would come before the honest ping.
    const live = await openStream(`${t.url}/stream`);
    const liveAll = await openStream(`${t.url}/stream?spam=include`);
    await ping(t, 'Cheap Car Insurance Quotes', SPLOG);
    await ping(t, "Jim's Kitchen", HONEST);
    await live.waitFor(1);
    await liveAll.waitFor(2);
    assert.deepEqual(
      live.events.map((e) => JSON.parse(e.data).url),
      [HONEST],
    );
    assert.deepEqual(
      liveAll.events.map((e) => [JSON.parse(e.data).url, JSON.parse(e.data).held]),
      [
        [SPLOG, true],
        [HONEST, undefined],
      ],
    );
    live.close();
    liveAll.close();

    await t.app.renderer.tick({ force: true });
    for (const path of DOCS()) assert.deepEqual(await listed(t, path), [HONEST], path);
    const updates = await t.app.inject({ url: '/updates.xml' });
    assert.ok(!updates.body.includes('cheapcarinsurancequotes'), 'updates.xml leaves the splog out');
    assert.deepEqual(await streamed(t), [HONEST]);
    assert.deepEqual(await streamed(t, '&spam=include'), [SPLOG, HONEST]);

    // "Did my ping arrive?": yes, held, and why, in words.
    const page = await weblogPage(t, SPLOG);
    assert.equal(page.statusCode, 200);
    assert.ok(page.body.includes('<h2>Yes: Cheap Car Insurance Quotes</h2>'), page.body);
    assert.ok(
      page.body.includes(
        '<p class="err" id="held">Held as likely spam: its pings arrived and are kept, but this server lists it in no document (changes.xml, shortChanges.xml, the hourly archives, updates.xml) and sends it to no subscriber while its spam score is 0.75, above this server&#39;s limit of 0.50, for the reasons below.</p>',
      ),
      page.body,
    );
    const reasons = [...page.body.matchAll(/<li>([^<]*)<\/li>/g)].map((m) => m[1].replace('−', '-'));
    for (const r of SPLOG_REASONS) assert.ok(reasons.includes(r), `${r} in ${JSON.stringify(reasons)}`);
    assert.ok(page.body.includes('<li><a href="/changes.xml">changes.xml</a>: not listed: held as likely spam</li>'), page.body);
    assert.equal((page.body.match(/<td class="ok">accepted<\/td>/g) ?? []).length, 1, 'its ping is there');
    const honestPage = await weblogPage(t, HONEST);
    assert.ok(!honestPage.body.includes('id="held"'));
    assert.ok(
      honestPage.body.includes('<dd id="spam-score">0.00 (0 a blog, 1 a splog) · nothing in it looks like spam</dd>'),
      honestPage.body,
    );

    // The operator sees what is held.
    assert.deepEqual(await admin(t, ['spam', 'list', '--held']), { code: 0, stdout: `0.750  held  -      ${SPLOG}\n`, stderr: '' });
    const shown = await admin(t, ['spam', 'show', SPLOG]);
    assert.equal(shown.stdout, `${SPLOG}: score 0.750, held\n` + SPLOG_REASONS.map((r) => `  ${r.replace(': ', '  ')}`).join('\n') + '\n');
    const feeds = await admin(t, ['feeds', 'show', SPLOG]);
    const spam = JSON.parse(feeds.stdout.slice(feeds.stdout.indexOf('spam: ') + 6)) as { score: number; held: boolean; reasons: unknown[] };
    assert.deepEqual([spam.score, spam.held, spam.reasons.length], [0.75, true, 3], 'pingd feeds show gives the score');
    const stats = await t.app.inject({ url: '/api/stats' });
    assert.equal(stats.json().spam.held, 1, stats.body);

    // allow: listed at once (the command renders the documents again, and the server's renderer drops its windows).
    const allowed = await admin(t, ['spam', 'allow', SPLOG]);
    assert.equal(allowed.code, 0, allowed.stderr);
    assert.ok(
      allowed.stdout.startsWith(`${SPLOG}: pinned allow; listed\nrendered /changes.xml, /shortChanges.xml, /updates.xml\n`),
      allowed.stdout,
    );
    for (const path of DOCS()) assert.deepEqual(await listed(t, path), [HONEST, SPLOG].sort(), `${path} after allow`);
    await t.app.renderer.tick();
    assert.deepEqual(await listed(t, '/changes.xml'), [HONEST, SPLOG].sort(), 'the server’s own render keeps it listed');

    // deny: an honest weblog held, its later pings too.
    const denied = await admin(t, ['spam', 'deny', HONEST]);
    assert.equal(denied.code, 0, denied.stderr);
    assert.ok(denied.stdout.startsWith(`${HONEST}: pinned deny; held: listed nowhere\n`), denied.stdout);
    for (const path of DOCS()) assert.deepEqual(await listed(t, path), [SPLOG], `${path} after deny`);
    assert.deepEqual(await streamed(t), [SPLOG]);
    const deniedPage = await weblogPage(t, HONEST);
    assert.ok(deniedPage.body.includes('while the operator marked it as spam.</p>'), deniedPage.body);

    // clear: the scores decide again.
    for (const url of [HONEST, SPLOG]) {
      const cleared = await admin(t, ['spam', 'clear', url]);
      assert.equal(cleared.code, 0, cleared.stderr);
    }
    await t.app.renderer.tick();
    assert.deepEqual(await listed(t, '/changes.xml'), [HONEST]);
    assert.deepEqual(await admin(t, ['spam', 'show', 'http://never.example.com/']), {
      code: 1,
      stdout: '',
      stderr: 'pingd spam: pingd has no ping from http://never.example.com/\n',
    });
  } finally {
    await t.close();
  }
});

test('SPAM_FILTER=mark: nothing is hidden, the score shows; a restart under hold holds what was scored', async () => {
  const t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0, ADMIN_TOKEN: TOKEN, SPAM_FILTER: 'mark' });
  try {
    await t.listen();
    await ping(t, 'Cheap Car Insurance Quotes', SPLOG);
    await ping(t, "Jim's Kitchen", HONEST);
    await t.app.renderer.tick({ force: true });
    for (const path of DOCS()) assert.deepEqual(await listed(t, path), [HONEST, SPLOG].sort(), path);
    assert.deepEqual(await streamed(t), [SPLOG, HONEST]);
    const page = await weblogPage(t, SPLOG);
    assert.ok(!page.body.includes('id="held"'));
    assert.ok(page.body.includes('<dd id="spam-score">0.75 (0 a blog, 1 a splog)'), page.body);
    assert.deepEqual(await admin(t, ['spam', 'list', '--held']), { code: 0, stdout: 'no weblog is held\n', stderr: '' });
    assert.deepEqual(await admin(t, ['spam', 'list']), {
      code: 0,
      stdout: `0.750  -     -      ${SPLOG}\n0.000  -     -      ${HONEST}\n`,
      stderr: '',
    });
  } finally {
    await t.app.close();
  }
  // The same database, started under hold: the splog scored under mark is held from the first render.
  const again = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0, SPAM_FILTER: 'hold' }, t.db);
  try {
    await again.app.renderer.tick({ force: true });
    for (const path of DOCS()) assert.deepEqual(await listed(again, path), [HONEST], `${path} under hold`);
  } finally {
    await again.close();
  }
});

test('SPAM_FILTER=off: nothing is scored, nothing held', async () => {
  const t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0, SPAM_FILTER: 'off' });
  try {
    await ping(t, 'Cheap Car Insurance Quotes', SPLOG);
    await t.app.renderer.tick({ force: true });
    assert.deepEqual(await listed(t, '/changes.xml'), [SPLOG]);
    assert.deepEqual(await t.app.db.query('select weblog_id from weblog_spam'), []);
    const page = await weblogPage(t, SPLOG);
    assert.ok(!page.body.includes('spam-score'), page.body);
  } finally {
    await t.close();
  }
});

test('SPAM_FILTER=hold: the relay makes no job for a held weblog’s ping', async () => {
  const t = await startApp({ RENDER_SCHEDULER: false, SPAM_FILTER: 'hold' });
  try {
    await ensureCursor(t.app.db, 'listed');
    await ping(t, 'Cheap Car Insurance Quotes', SPLOG);
    await ping(t, "Jim's Kitchen", HONEST);
    const page = await deriveJobs(t.app.db, {
      rule: 'listed',
      targets: ['http://relay.example.net/RPC2'],
      marker: 'pingd-relay-marker',
      minIntervalSec: 0,
      loopWindowSec: 0,
      queueMax: 100,
      pageSize: 100,
    });
    assert.equal(page?.read, 2, 'both pings read: the cursor moves past the held one');
    const jobs = await t.app.db.query<{ weblog_url: string }>('select weblog_url from relay_jobs order by id');
    assert.deepEqual(
      jobs.map((j) => j.weblog_url),
      [HONEST],
    );
  } finally {
    await t.close();
  }
});
