// The blocklist and the per-address rate limit at the entry points: protocol-appropriate refusals,
// counted in metrics, the list reloaded from its file without a restart, both off by default.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startApp, uniqueUrl, methodCall, rpc, createTestDatabase, testConfig, type TestApp } from '../../helpers/app.js';
import { buildApp } from '../../../src/app.js';
import { BLOCKED_CLIENT, BLOCKED_WEBLOG } from '../../../src/intake/abuse/plugin.js';
import { findPingsByUrl } from '../../helpers/rows.js';
import { waitFor } from '../../helpers/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'pingd-abuse-'));
const blocklistPath = join(dir, 'blocklist.txt');
writeFileSync(blocklistPath, '# test list\nspam.example\nurl:*casino*\nname:*cheap pills*\nclient:192.0.2.66\n');

let t: TestApp;
before(async () => {
  t = await startApp({ BLOCKLIST_FILE: blocklistPath, RATE_LIMIT_PER_IP: 3, RSSPING_VERIFY_HASH_URI: false });
});
after(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

// Each test uses its own client address so that the rate limit couples nothing but what it tests.
let addr = 10;
const nextAddr = () => `203.0.113.${addr++}`;
const xmlrpc = (body: string, remoteAddress: string) =>
  t.app.inject({ method: 'POST', url: '/RPC2', payload: body, headers: { 'content-type': 'text/xml' }, remoteAddress });
const form = (q: Record<string, string>, remoteAddress: string) =>
  t.app.inject({ method: 'GET', url: `/pingSiteForm?${new URLSearchParams(q)}`, remoteAddress });

async function metric(name: string, labels: string): Promise<number> {
  const res = await t.app.inject({ method: 'GET', url: '/metrics' });
  const line = res.body.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

test('blocked host (and its subdomains): XML-RPC flerror 1, HTTP 403, nothing stored, counted', async () => {
  const before = await metric('pingd_pings_total', 'method="ping",outcome="blocked"');
  const ip = nextAddr();
  const r = await xmlrpc(methodCall('weblogUpdates.ping', ['Spam', 'http://www.spam.example/']), ip);
  assert.equal(r.statusCode, 200);
  assert.match(r.body, /<name>flerror<\/name><value><boolean>1<\/boolean>/);
  assert.ok(r.body.includes(`<string>${BLOCKED_WEBLOG}</string>`));
  assert.equal((await findPingsByUrl(t.app.db, 'http://www.spam.example/')).length, 0);
  assert.equal(await metric('pingd_pings_total', 'method="ping",outcome="blocked"'), before + 1);
  assert.equal(await metric('pingd_blocklist_hits_total', 'kind="host"'), 1);

  const g = await form({ name: 'Spam', url: 'https://SPAM.example./x' }, ip);
  assert.equal(g.statusCode, 403);
  assert.match(g.body, new RegExp(BLOCKED_WEBLOG.replace(/\./g, '\\.')));
  assert.equal(await metric('pingd_pings_total', 'method="pingSiteForm",outcome="blocked"'), 1);
});

test('blocked URL pattern in the RSS URL, blocked name pattern, blocked client address', async () => {
  const url = uniqueUrl('fine');
  const r1 = await rpc(t.app, methodCall('weblogUpdates.extendedPing', ['Fine', url, 'http://feeds.example.com/online-casino.xml']), {
    'content-type': 'text/xml',
  });
  assert.equal(r1.flerror, true);
  assert.equal(r1.message, BLOCKED_WEBLOG);
  // The name is matched after decoding, as it would be stored.
  const r2 = await xmlrpc(methodCall('weblogUpdates.ping', ['Get CHEAP&#32;pills', uniqueUrl()]), nextAddr());
  assert.ok(r2.body.includes(BLOCKED_WEBLOG), r2.body);
  const r3 = await xmlrpc(methodCall('weblogUpdates.ping', ['Fine', uniqueUrl()]), '192.0.2.66');
  assert.ok(r3.body.includes(`<string>${BLOCKED_CLIENT}</string>`), r3.body);
  const g = await form({ name: 'Fine', url: uniqueUrl() }, '::ffff:192.0.2.66');
  assert.equal(g.statusCode, 403);
  assert.ok(g.body.includes(BLOCKED_CLIENT), g.body);
  assert.equal((await findPingsByUrl(t.app.db, url)).length, 0);
  // Unblocked pings still go through.
  const ok = await xmlrpc(methodCall('weblogUpdates.ping', ['Fine', url]), nextAddr());
  assert.match(ok.body, /Thanks for the ping\./);
});

test('an invalid ping is refused by validation with its exact reason, even when it would match the blocklist', async () => {
  const r = await xmlrpc(methodCall('weblogUpdates.ping', ['', 'http://spam.example/']), nextAddr());
  assert.ok(r.body.includes('<string>The weblog name is missing.</string>'));
});

test('rate limit per client address: flerror 1 for XML-RPC, 429 with Retry-After for HTTP, counted; others unaffected', async () => {
  const ip = nextAddr();
  for (let i = 0; i < 3; i++) {
    const r = await xmlrpc(methodCall('weblogUpdates.ping', [`R${i}`, uniqueUrl('rl')]), ip);
    assert.match(r.body, /Thanks for the ping\./, `ping ${i}`);
  }
  const url = uniqueUrl('rl');
  const r = await xmlrpc(methodCall('weblogUpdates.ping', ['R4', url]), ip);
  assert.equal(r.statusCode, 200);
  assert.match(
    r.body,
    /<boolean>1<\/boolean>.*<string>Too many pings from your address \(at most 3 a minute\); please ping again in (1\d|20) seconds\.<\/string>/s,
  );
  assert.equal((await findPingsByUrl(t.app.db, url)).length, 0);
  const g = await form({ name: 'R5', url: uniqueUrl('rl') }, ip);
  assert.equal(g.statusCode, 429);
  assert.match(String(g.headers['retry-after']), /^(1\d|20)$/);
  assert.match(g.body, /Too many pings from your address/);
  assert.equal(await metric('pingd_pings_total', 'method="ping",outcome="rate_limited"'), 1);
  assert.equal(await metric('pingd_pings_total', 'method="pingSiteForm",outcome="rate_limited"'), 1);
  // Another address is not affected.
  const other = await xmlrpc(methodCall('weblogUpdates.ping', ['Other', uniqueUrl('rl')]), nextAddr());
  assert.match(other.body, /Thanks for the ping\./);
});

test('rate limit: an IPv6 /64 is one client, the next /64 another', async () => {
  for (let i = 1; i <= 3; i++) {
    const r = await xmlrpc(methodCall('weblogUpdates.ping', ['V6', uniqueUrl('v6')]), `2001:db8:77:1::${i}`);
    assert.match(r.body, /Thanks for the ping\./);
  }
  assert.match((await xmlrpc(methodCall('weblogUpdates.ping', ['V6', uniqueUrl('v6')]), '2001:db8:77:1:ffff::9')).body, /Too many pings/);
  assert.match((await xmlrpc(methodCall('weblogUpdates.ping', ['V6', uniqueUrl('v6')]), '2001:db8:77:2::1')).body, /Thanks for the ping\./);
});

test('RSS Ping: blocked (any feed_uri counts) → 403, over the rate → 429 with Retry-After, both counted', async () => {
  const rss = (site: string, feeds: string[]) =>
    `<rss_ping version=2><site_name>R</site_name><site_uri>${site}</site_uri>${feeds.map((f) => `<feed_uri type="RSS 2.0">${f}</feed_uri>`).join('')}<payload type="RSS 2.0"><item><title>T</title><link>${site}p</link></item></payload></rss_ping>`;
  const post = (body: string, remoteAddress: string) =>
    t.app.inject({ method: 'POST', url: '/rssping', payload: body, headers: { 'content-type': 'text/xml' }, remoteAddress });
  const site = uniqueUrl('rss-abuse');
  const blocked = await post(rss(site, [`${site}feed`, 'http://feeds.spam.example/x']), nextAddr());
  assert.equal(blocked.statusCode, 403);
  assert.ok(blocked.body.includes(`<flerror>1</flerror><message>${BLOCKED_WEBLOG}</message>`), blocked.body);
  assert.equal((await findPingsByUrl(t.app.db, site)).length, 0);
  assert.equal(await metric('pingd_pings_total', 'method="rssPing",outcome="blocked"'), 1);
  const ip = nextAddr();
  for (let i = 0; i < 3; i++) assert.equal((await post(rss(uniqueUrl('rss-rl'), [`${site}feed`]), ip)).statusCode, 200);
  const limited = await post(rss(uniqueUrl('rss-rl'), [`${site}feed`]), ip);
  assert.equal(limited.statusCode, 429);
  assert.match(String(limited.headers['retry-after']), /^(1\d|20)$/);
  assert.match(limited.body, /<flerror>1<\/flerror><message>Too many pings from your address/);
  assert.equal(await metric('pingd_pings_total', 'method="rssPing",outcome="rate_limited"'), 1);
});

test('the blocklist file is re-read without a restart', async () => {
  const url = 'http://late-spam.example.net/';
  assert.match((await xmlrpc(methodCall('weblogUpdates.ping', ['Late', url]), nextAddr())).body, /Thanks for the ping\./);
  writeFileSync(blocklistPath, '# test list\nspam.example\nlate-spam.example.net\n');
  await waitFor(() => t.app.abuse.blocklist.hosts.has('late-spam.example.net'), {
    what: 'the watcher to pick the change up',
    timeoutMs: 10_000,
    intervalMs: 100,
  });
  const r = await xmlrpc(methodCall('weblogUpdates.ping', ['Late', 'http://www.late-spam.example.net/']), nextAddr());
  assert.ok(r.body.includes(BLOCKED_WEBLOG));
  // Rules removed from the file stop applying.
  const casino = await xmlrpc(methodCall('weblogUpdates.ping', ['Casino', uniqueUrl('casino')]), nextAddr());
  assert.match(casino.body, /Thanks for the ping\./);
  assert.ok((await metric('pingd_blocklist_reloads_total', 'result="ok"')) >= 2);
  assert.equal(await metric('pingd_blocklist_rules', 'kind="host"'), 2);
});

test('by default there is no blocklist and no rate limit', async () => {
  const t2 = await startApp();
  try {
    for (let i = 0; i < 40; i++) {
      const r = await t2.app.inject({
        method: 'POST',
        url: '/RPC2',
        payload: methodCall('weblogUpdates.ping', ['Spam', `http://s${i}.spam.example/`]),
        remoteAddress: '203.0.113.200',
      });
      assert.match(r.body, /Thanks for the ping\./, `ping ${i}`);
    }
  } finally {
    await t2.close();
  }
});

test('a BLOCKLIST_FILE that cannot be read stops the start with a message naming it', async () => {
  const db = await createTestDatabase();
  try {
    await assert.rejects(
      buildApp({ config: testConfig(db, { BLOCKLIST_FILE: join(dir, 'missing.txt') }), logger: false }),
      /cannot read BLOCKLIST_FILE .*missing\.txt: ENOENT/,
    );
    // Refused before the database was opened: nothing is left holding it.
    const ok = await startApp({}, db);
    await ok.close();
  } finally {
    await db.drop();
  }
});
