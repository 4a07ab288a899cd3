// rssCloud's ping as an intake protocol: POST /rsscloud/ping (REST, curl) and rssCloud.ping on /RPC2
// (Python's xmlrpc.client and the npm xmlrpc client) store a ping through intake's one path, answered as
// rsscloud-server 4.0.0 answers (every refusal too: HTTP 200, success="false"); every refusal's exact answer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import xmlrpc from 'xmlrpc';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { findPingsByUrl } from '../../helpers/rows.js';
import { form, xmlAnswer } from './helpers.js';

const run = promisify(execFile);
let t: TestApp;
before(async () => {
  t = await startApp();
  await t.listen();
});
after(async () => {
  await t.close();
});

test('POST /rsscloud/ping: stored as a ping of the feed (no weblog names it yet) with the feed as its rssUrl, answered as rsscloud-server does', async () => {
  const site = uniqueUrl('cloud');
  const feed = `${site}feed.xml`;
  const r = await form(t, '/rsscloud/ping', { url: feed });
  assert.equal(r.status, 200);
  assert.equal(r.headers['content-type'], 'text/xml; charset=utf-8');
  assert.equal(r.body, '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<result success="true" msg="Thanks for the ping."/>');
  const [row] = await findPingsByUrl(t.app.db, feed);
  assert.deepEqual([row.method, row.rss_url, row.name], ['rssCloud', feed, new URL(site).hostname]);
});

test('POST /rsscloud/ping of a feed a weblog remembers is a ping of that weblog', async () => {
  const site = uniqueUrl('owner');
  const feed = `${site}atom.xml`;
  const [w] = await t.app.db.query<{ id: number }>(
    `insert into weblogs (url, name, first_ping_at, last_ping_at) values ($1, 'Owner', now() - interval '1 day', now() - interval '1 day') returning id`,
    [site],
  );
  const [f] = await t.app.db.query<{ id: number }>(`insert into feeds (url, fetch_url) values ($1, $1) returning id`, [feed]);
  await t.app.db.query('update weblogs set feed_id = $1 where id = $2', [f.id, w.id]);
  assert.equal((await form(t, '/rsscloud/ping', { url: feed })).status, 200);
  const [row] = await findPingsByUrl(t.app.db, site);
  assert.deepEqual([row.method, row.rss_url, row.name], ['rssCloud', feed, 'Owner']);
});

test('POST /rsscloud/ping with Accept: application/json answers JSON; a type it cannot give is 406', async () => {
  const feed = `${uniqueUrl('json')}rss`;
  const r = await form(t, '/rsscloud/ping', { url: feed }, { accept: 'application/json' });
  assert.equal(r.status, 200);
  assert.equal(r.body, '{"success":true,"msg":"Thanks for the ping."}');
  const n = await form(t, '/rsscloud/ping', { url: `${uniqueUrl('png')}rss` }, { accept: 'image/png' });
  assert.equal(n.status, 406);
  assert.equal(n.body, 'Not Acceptable');
});

test('POST /rsscloud/ping refusals, each HTTP 200 with success="false": missing url, not a URL, repeated url, not UTF-8, throttled (with Retry-After); not a form is 415', async () => {
  let r = await form(t, '/rsscloud/ping', {});
  assert.equal(r.status, 200);
  assert.equal(r.headers['content-type'], 'text/xml; charset=utf-8');
  assert.equal(r.body, xmlAnswer('result', false, 'The following parameters were missing from the request body: url.'));
  r = await form(t, '/rsscloud/ping', { url: 'feed.xml' });
  assert.equal(r.status, 200);
  assert.equal(r.body, xmlAnswer('result', false, 'The feed URL is not an absolute URL: it must start with http:// or https://.'));
  r = await form(t, '/rsscloud/ping', [
    ['url', 'http://a.example/'],
    ['url', 'http://b.example/'],
  ]);
  assert.equal(r.status, 200);
  assert.equal(r.body, xmlAnswer('result', false, 'The parameter url must be given once.'));
  const bytes = await t.app.inject({
    method: 'POST',
    url: '/rsscloud/ping',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: 'url=%FF',
  });
  assert.equal(bytes.statusCode, 200);
  assert.equal(
    bytes.body,
    xmlAnswer(
      'result',
      false,
      "the parameter url is not UTF-8 once percent-decoded: a URL's own escapes are sent escaped again (%25FF for %FF)",
    ),
  );
  const site = uniqueUrl('again');
  assert.equal((await form(t, '/rsscloud/ping', { url: `${site}rss` })).status, 200);
  r = await form(t, '/rsscloud/ping', { url: `${site}rss` }, { accept: 'application/json' });
  assert.equal(r.status, 200);
  assert.equal(r.headers['content-type'], 'application/json; charset=utf-8');
  assert.ok(Number(r.headers['retry-after']) > 0);
  const j = JSON.parse(r.body);
  assert.equal(j.success, false);
  assert.match(j.msg, new RegExp(`^${site.replace(/[.]/g, '\\.')}rss was pinged less than 300 seconds ago`));
  const x = await t.app.inject({ method: 'POST', url: '/rsscloud/ping', headers: { 'content-type': 'text/xml' }, payload: '<x/>' });
  assert.equal(x.statusCode, 415);
  assert.equal(x.body, xmlAnswer('result', false, 'Send the parameters as application/x-www-form-urlencoded.'));
});

test('curl: the REST ping as a shell script sends it', async () => {
  const site = uniqueUrl('curl');
  const { stdout } = await run('curl', ['-s', '-d', `url=${encodeURIComponent(`${site}index.xml`)}`, `${t.url}/rsscloud/ping`]);
  assert.equal(stdout, '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<result success="true" msg="Thanks for the ping."/>');
  assert.equal((await findPingsByUrl(t.app.db, `${site}index.xml`)).length, 1);
});

test('Python xmlrpc.client: rssCloud.ping answers true, faults 4 with the reason, and is listed', async () => {
  const site = uniqueUrl('py');
  const script = `
import json, sys, xmlrpc.client
s = xmlrpc.client.ServerProxy(sys.argv[1])
out = {}
out['ping'] = s.rssCloud.ping(sys.argv[2])
out['hello'] = s.rssCloud.hello()
for name, args in [('bad', ['nope']), ('none', []), ('two', ['a', 'b']), ('again', [sys.argv[2]])]:
    try:
        s.rssCloud.ping(*args)
    except xmlrpc.client.Fault as f:
        out[name] = [f.faultCode, f.faultString]
out['methods'] = s.system.listMethods()
out['help'] = s.system.methodHelp('rssCloud.ping')
print(json.dumps(out))
`;
  const { stdout } = await run('python3', ['-c', script, `${t.url}/RPC2`, `${site}feed`]);
  const out = JSON.parse(stdout);
  assert.equal(out.ping, true);
  assert.equal(out.hello, true);
  assert.deepEqual(out.bad, [4, 'The feed URL is not an absolute URL: it must start with http:// or https://.']);
  assert.deepEqual(out.none, [4, 'Can\'t call "ping" because there aren\'t enough parameters.']);
  assert.deepEqual(out.two, [4, 'Can\'t call "ping" because there are too many parameters.']);
  assert.equal(out.again[0], 4);
  assert.match(out.again[1], /was pinged less than 300 seconds ago/);
  for (const m of ['rssCloud.ping', 'rssCloud.pleaseNotify', 'rssCloud.hello', 'weblogUpdates.ping']) assert.ok(out.methods.includes(m), m);
  assert.match(out.help, /^rssCloud\.ping\(url\)/);
  const [row] = await findPingsByUrl(t.app.db, `${site}feed`);
  assert.equal(row.method, 'rssCloud');
  assert.equal(row.user_agent?.startsWith('Python-xmlrpc/'), true);
});

test('npm xmlrpc client: rssCloud.ping', async () => {
  const client = xmlrpc.createClient({ host: '127.0.0.1', port: Number(new URL(t.url).port), path: '/RPC2' });
  const site = uniqueUrl('npm');
  const v = await new Promise((res, rej) => client.methodCall('rssCloud.ping', [`${site}rss.xml`], (err, x) => (err ? rej(err) : res(x))));
  assert.equal(v, true);
  assert.equal((await findPingsByUrl(t.app.db, `${site}rss.xml`))[0].rss_url, `${site}rss.xml`);
});
