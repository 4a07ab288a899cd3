import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, methodCall, rpc, type TestApp } from '../../helpers/app.js';
import { findPingsByUrl, findWeblog } from '../../helpers/rows.js';

let t: TestApp;
before(async () => {
  t = await startApp({ BODY_LIMIT: 4096 });
});
after(async () => {
  await t.close();
});

const THANKS_BODY =
  '<?xml version="1.0"?>\n<methodResponse><params><param><value><struct><member><name>flerror</name><value><boolean>0</boolean></value></member><member><name>message</name><value><string>Thanks for the ping.</string></value></member></struct></value></param></params></methodResponse>\n';

test('weblogUpdates.ping: exact success bytes, then the row is there', async () => {
  const url = uniqueUrl();
  const res = await t.app.inject({
    method: 'POST',
    url: '/RPC2',
    headers: { 'content-type': 'text/xml' },
    payload: methodCall('weblogUpdates.ping', ['My Blog', url]),
  });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'text/xml; charset=utf-8');
  assert.equal(res.body, THANKS_BODY);
  const rows = await findPingsByUrl(t.app.db, url);
  assert.equal(rows.length, 1);
  assert.equal(rows[0].name, 'My Blog');
  assert.equal(rows[0].method, 'ping');
  assert.equal(rows[0].client_addr, '127.0.0.1');
  const w = await findWeblog(t.app.db, url);
  assert.equal(w?.ping_count, 1);
});

test('extendedPing with 3 params stores the third as the RSS URL (WordPress form)', async () => {
  const url = uniqueUrl();
  const r = await rpc(t.app, methodCall('weblogUpdates.extendedPing', ['WP', url, `${url}feed/`]));
  assert.equal(r.flerror, false);
  const [row] = await findPingsByUrl(t.app.db, url);
  assert.equal(row.rss_url, `${url}feed/`);
  assert.equal(row.changes_url, null);
  assert.equal(row.method, 'extendedPing');
});

test('extendedPing with 5 params stores changes URL, RSS URL and tags (the RSS Feed State form)', async () => {
  const url = uniqueUrl();
  const r = await rpc(
    t.app,
    methodCall('weblogUpdates.extendedPing', ['The RSS Blog', url, `${url}post/1`, 'http://feeds.example.com/TheRssBlog', 'rss|opml| ']),
  );
  assert.equal(r.flerror, false);
  const [row] = await findPingsByUrl(t.app.db, url);
  assert.equal(row.changes_url, `${url}post/1`);
  assert.equal(row.rss_url, 'http://feeds.example.com/TheRssBlog');
  assert.deepEqual(row.tags, ['rss', 'opml']);
  const w = await findWeblog(t.app.db, url);
  assert.equal(w?.rss_url, 'http://feeds.example.com/TheRssBlog');
});

test('WordPress double-escaped names are stored as plain text', async () => {
  const url = uniqueUrl();
  const body = `<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName><params><param><value><string>Joe&amp;#039;s &amp;amp; Co</string></value></param><param><value><string>${url}</string></value></param></params></methodCall>`;
  assert.equal((await rpc(t.app, body)).flerror, false);
  assert.equal((await findPingsByUrl(t.app.db, url))[0].name, "Joe's & Co");
});

test('URLs are normalised: one weblog is one weblog', async () => {
  const host = `norm-${process.pid}.example.com`;
  const r = await rpc(t.app, methodCall('weblogUpdates.ping', ['N', `HTTP://${host.toUpperCase()}:80`]));
  assert.equal(r.flerror, false);
  const again = await rpc(t.app, methodCall('weblogUpdates.ping', ['N', `http://${host}/`]));
  assert.equal(again.flerror, true, 'same weblog, so throttled');
  assert.equal((await findPingsByUrl(t.app.db, `http://${host}/`)).length, 1);
});

test('a repeat within PING_MIN_INTERVAL is refused with flerror 1 and when to retry, and not stored', async () => {
  const url = uniqueUrl();
  assert.equal((await rpc(t.app, methodCall('weblogUpdates.ping', ['A', url]))).flerror, false);
  const r = await rpc(t.app, methodCall('weblogUpdates.ping', ['A renamed', url]));
  assert.equal(r.status, 200);
  assert.equal(r.flerror, true);
  assert.match(
    r.message ?? '',
    new RegExp(
      `^${url.replace(/[.]/g, '\\.')} was pinged less than 300 seconds ago; please ping again after \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ \\(in (29\\d|300) seconds\\)\\.$`,
    ),
  );
  assert.equal((await findPingsByUrl(t.app.db, url)).length, 1);
  assert.equal((await findWeblog(t.app.db, url))?.name, 'A', 'a refused ping changes nothing');
});

const refusals: [string, (string | null)[], string][] = [
  ['missing name (empty string)', ['', 'http://x.example.com/'], 'The weblog name is missing.'],
  ['whitespace-only name', ['  \t ', 'http://x.example.com/'], 'The weblog name is missing.'],
  ['name of control characters only', [' \u0001\u0002 ', 'http://x.example.com/'], 'The weblog name is empty.'],
  ['name too long', ['n'.repeat(1025), 'http://x.example.com/'], 'The weblog name is longer than 1024 characters.'],
  ['missing url', ['Name', ''], 'The weblog URL is missing.'],
  ['relative url', ['Name', 'www.example.com'], 'The weblog URL is not an absolute URL: it must start with http:// or https://.'],
  ['ftp url', ['Name', 'ftp://x.example.com/'], 'The weblog URL must use http or https, not ftp.'],
  ['credentials in url', ['Name', 'http://u:p@x.example.com/'], 'The weblog URL must not contain a user name or password.'],
  ['javascript url', ['Name', 'javascript:alert(1)'], 'The weblog URL must use http or https, not javascript.'],
];
for (const [label, params, message] of refusals) {
  test(`refused ping: ${label} → HTTP 200, flerror 1, exact reason, nothing stored`, async () => {
    const r = await rpc(t.app, methodCall('weblogUpdates.ping', params));
    assert.equal(r.status, 200);
    assert.equal(r.flerror, true);
    assert.equal(r.message, message);
    if (params[1]) assert.equal((await findPingsByUrl(t.app.db, params[1])).length, 0);
  });
}

test('refused extendedPing: a bad RSS URL names the field', async () => {
  const r = await rpc(t.app, methodCall('weblogUpdates.extendedPing', ['N', uniqueUrl(), 'feed.xml']));
  assert.equal(r.flerror, true);
  assert.equal(r.message, 'The rssUrl is not an absolute URL: it must start with http:// or https://.');
});

const faults: [string, string | Buffer, number, string | RegExp][] = [
  ['empty body', '', -32700, 'Empty request: POST an XML-RPC methodCall document.'],
  ['malformed XML', '<methodCall><methodName>weblogUpdates.ping</methodName><params>', -32700, /^Parse error: not well-formed XML/],
  ['unknown method', methodCall('weblogUpdates.foo', ['a', 'b']), -32601, 'Method not found: weblogUpdates.foo.'],
  [
    'too few params',
    methodCall('weblogUpdates.ping', ['only name']),
    -32602,
    'Invalid params: weblogUpdates.ping takes 2 to 4 parameters, got 1.',
  ],
  [
    'no params at all',
    '<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName></methodCall>',
    -32602,
    'Invalid params: weblogUpdates.ping takes 2 to 4 parameters, got 0.',
  ],
  [
    'too many params',
    methodCall('weblogUpdates.extendedPing', ['1', '2', '3', '4', '5', '6']),
    -32602,
    'Invalid params: weblogUpdates.extendedPing takes 2 to 5 parameters, got 6.',
  ],
  [
    'int where a string belongs',
    '<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName><params><param><value>n</value></param><param><value><int>5</int></value></param></params></methodCall>',
    -32602,
    'Invalid params: parameter 2 (url) must be a string.',
  ],
  [
    'entity declarations',
    '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><methodCall><methodName>&e;</methodName></methodCall>',
    -32700,
    'Parse error: DOCTYPE and entity declarations are not allowed in XML-RPC.',
  ],
  [
    'not a methodCall',
    '<?xml version="1.0"?><html><body>hi</body></html>',
    -32600,
    'Invalid request: the document element must be <methodCall>.',
  ],
];
for (const [label, body, code, message] of faults) {
  test(`fault with HTTP 200: ${label}`, async () => {
    const r = await rpc(t.app, body);
    assert.equal(r.status, 200);
    assert.equal(r.faultCode, code);
    if (typeof message === 'string') assert.equal(r.faultString, message);
    else assert.match(r.faultString ?? '', message);
    assert.equal(r.flerror, undefined);
  });
}

test('a body over BODY_LIMIT gets 413 with a fault body', async () => {
  const r = await rpc(t.app, methodCall('weblogUpdates.ping', ['x'.repeat(5000), uniqueUrl()]));
  assert.equal(r.status, 413);
  assert.equal(r.faultCode, -32600);
  assert.equal(r.faultString, 'Request body larger than 4096 bytes.');
});

test('paths /RPC2, /rpc2 and / all answer, with any or no Content-Type', async () => {
  const variants: [string, Record<string, string>][] = [
    ['/RPC2', {}],
    ['/rpc2', { 'content-type': 'application/xml' }],
    ['/', { 'content-type': 'text/xml; charset=utf-8' }],
    ['/RPC2', { 'content-type': 'application/x-www-form-urlencoded' }],
    ['/RPC2', { 'content-type': 'text/plain' }],
  ];
  for (const [path, headers] of variants) {
    const url = uniqueUrl();
    const res = await t.app.inject({ method: 'POST', url: path, headers, payload: methodCall('weblogUpdates.ping', ['N', url]) });
    assert.equal(res.statusCode, 200, `${path} ${JSON.stringify(headers)}`);
    assert.equal(res.body, THANKS_BODY, `${path} ${JSON.stringify(headers)}`);
    assert.equal((await findPingsByUrl(t.app.db, url)).length, 1);
  }
});

test('system.listMethods, methodHelp and methodSignature', async () => {
  const list = await t.app.inject({ method: 'POST', url: '/RPC2', payload: methodCall('system.listMethods', []) });
  assert.match(
    list.body,
    /<array><data><value><string>weblogUpdates\.ping<\/string><\/value><value><string>weblogUpdates\.extendedPing<\/string><\/value>/,
  );
  const help = await rpc(t.app, methodCall('system.methodHelp', ['weblogUpdates.extendedPing']));
  assert.equal(help.faultCode, undefined);
  assert.match(help.body, /extendedPing\(name, url, changesUrl, rssUrl\[, tags\]\)/);
  const sig = await t.app.inject({ method: 'POST', url: '/RPC2', payload: methodCall('system.methodSignature', ['weblogUpdates.ping']) });
  assert.match(
    sig.body,
    /<array><data><value><array><data><value><string>struct<\/string><\/value><value><string>string<\/string><\/value><value><string>string<\/string><\/value><\/data><\/array><\/value>/,
  );
  const unknown = await rpc(t.app, methodCall('system.methodHelp', ['nope']));
  assert.equal(unknown.faultCode, -32602);
  assert.equal(unknown.faultString, 'Invalid params: no method named "nope".');
});

test('messages are XML-escaped in replies', async () => {
  const url = `${uniqueUrl()}?a=1&b=<2>`;
  await rpc(t.app, methodCall('weblogUpdates.ping', ['N', url]));
  const r = await t.app.inject({ method: 'POST', url: '/RPC2', payload: methodCall('weblogUpdates.ping', ['N', url]) });
  assert.match(r.body, /\?a=1&amp;b=%3C2%3E was pinged less than/);
  assert.doesNotMatch(r.body, /a=1&b/);
});
