// One site must not become many weblogs in the published lists: spellings of one host that normalisation
// keeps apart (`?a=1`, `?a=2`, … or paths) are counted against a per-host budget of accepted pings.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startApp, methodCall, rpc, type TestApp } from '../../helpers/app.js';
import { RateLimiter, weblogHost } from '../../../src/intake/abuse/rate-limit.js';

let t: TestApp;
after(async () => t?.close());

const host = (label: string) => `${label}-${process.pid}-${randomBytes(3).toString('hex')}.example.com`;
const ping = (url: string) => t.app.inject({ method: 'GET', url: `/ping?name=Variants&url=${encodeURIComponent(url)}` });

test('query variants of one host are held to its budget (REGRESSION: ?a=1, ?a=2, … were each a new weblog, unlimited)', async () => {
  t = await startApp({ PING_HOST_BUDGET: 5, PING_MIN_INTERVAL: 300 });
  const site = host('variants');
  const answers = [];
  for (let i = 1; i <= 12; i++) answers.push(await ping(`http://${site}/?a=${i}`));
  assert.deepEqual(
    answers.map((r) => r.statusCode),
    [200, 200, 200, 200, 200, 429, 429, 429, 429, 429, 429, 429],
  );
  const refused = answers[5];
  const retryAfter = Number(refused.headers['retry-after']);
  assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}: one token comes back every 300/5 s`);
  assert.ok(
    refused.body.includes(
      `<p class="err">Too many weblogs on ${site} were pinged lately (at most 5 every 300 seconds); please ping again in ${retryAfter} seconds.</p>`,
    ),
    refused.body,
  );
  const [{ n }] = await t.app.db.query<{ n: number }>('select count(*)::int as n from weblogs where url like $1', [`http://${site}/%`]);
  assert.equal(Number(n), 5, 'only the budget reached the weblogs table');

  // XML-RPC answers the same refusal as flerror 1; other hosts are untouched.
  const r = await rpc(t.app, methodCall('weblogUpdates.ping', ['Variants', `http://${site}/?a=99`]));
  assert.equal(r.flerror, true);
  assert.match(r.message ?? '', new RegExp(`^Too many weblogs on ${site.replace(/\./g, '\\.')} were pinged lately`));
  assert.equal((await ping(`http://${host('other')}/?a=1`)).statusCode, 200);
  const m = await t.app.inject({ method: 'GET', url: '/metrics' });
  assert.match(m.body, /^pingd_host_budget_tracked_hosts [1-9]\d*$/m);
});

test("a weblog re-pinging inside its throttle spends nothing of its host's budget", async () => {
  const site = host('repinger');
  const statuses: number[] = [];
  for (let i = 0; i < 10; i++) statuses.push((await ping(`http://${site}/blog`)).statusCode);
  assert.deepEqual(statuses, [200, 429, 429, 429, 429, 429, 429, 429, 429, 429], 'the throttle refuses the repeats');
  const others = [];
  for (let i = 1; i <= 4; i++) others.push((await ping(`http://${site}/other-${i}`)).statusCode);
  assert.deepEqual(others, [200, 200, 200, 200], 'four more weblogs of the host fit in a budget of five');
  assert.equal((await ping(`http://${site}/other-5`)).statusCode, 429);
});

test('the budget is on by default and 0 turns it off', async () => {
  const dflt = await startApp();
  const off = await startApp({ PING_HOST_BUDGET: 0 });
  try {
    assert.equal(dflt.app.config.PING_HOST_BUDGET, 100);
    const site = host('unbudgeted');
    for (let i = 1; i <= 8; i++) {
      const r = await off.app.inject({ method: 'GET', url: `/ping?name=V&url=${encodeURIComponent(`http://${site}/?a=${i}`)}` });
      assert.equal(r.statusCode, 200);
    }
  } finally {
    await Promise.all([dflt.close(), off.close()]);
  }
});

test('budget buckets: check does not spend, spend may go below zero, tokens come back over the window', () => {
  let now = 5_000_000;
  const b = new RateLimiter(2, () => now, 300_000);
  try {
    assert.deepEqual(b.check('h'), { ok: true });
    assert.deepEqual(b.check('h'), { ok: true }, 'checking spends nothing');
    b.spend('h');
    b.spend('h');
    b.spend('h'); // three pings admitted together, all committed
    assert.deepEqual(b.check('h'), { ok: false, retryAfterSec: 300 }, 'two tokens owed: 150 s each');
    now += 300_000;
    assert.deepEqual(b.check('h'), { ok: true });
  } finally {
    b.close();
  }
  assert.equal(weblogHost('http://blog.example.com/?a=1'), 'blog.example.com');
  assert.equal(weblogHost('https://blog.example.com:8443/x'), 'blog.example.com');
  assert.equal(weblogHost('http://[2001:db8::1]/'), '[2001:db8::1]');
});
