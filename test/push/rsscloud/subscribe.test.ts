// rssCloud subscriptions: a subscriber registering as FeedLand does (REST, http-post, from its own address,
// with the test POST to it), with a domain (the GET challenge), as an xml-rpc endpoint (the test call), and
// through rssCloud.pleaseNotify with Python's xmlrpc.client; renewals, the 25-hour expiry, the bounds and
// every refusal's exact answer (HTTP 200 and success="false", as rsscloud-server 4.0.0 answers them).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { TestApp } from '../../helpers/app.js';
import type { FeedServer } from '../../helpers/feed-server.js';
import { cloudApp, form, notifyCall, serveFeed, startEndpoint, startFeedServer, xmlAnswer, type Endpoint } from './helpers.js';

const run = promisify(execFile);
const THANKS =
  "Thanks for the registration. It worked. When the resource updates we'll notify you. Don't forget to re-register after 24 hours, your subscription will expire in 25. Keep on truckin!";

let t: TestApp;
let feeds: FeedServer;
let ep: Endpoint;
before(async () => {
  t = await cloudApp({ RSSCLOUD_MAX_URLS: 3 });
  await t.listen();
  feeds = await startFeedServer('127.0.0.2');
  ep = await startEndpoint('127.0.0.41');
});
after(async () => {
  await ep.close();
  await feeds.close();
  await t.close();
});

/** A form POST from `localAddress` to the listening app, as a subscriber's own HTTP client sends it. */
function postFrom(
  localAddress: string,
  path: string,
  fields: [string, string][],
  accept?: string,
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  const body = new URLSearchParams(fields).toString();
  const u = new URL(t.url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path,
        method: 'POST',
        localAddress,
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'content-length': Buffer.byteLength(body),
          ...(accept ? { accept } : {}),
        },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString(), headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function subscription(resource: string): Promise<{ notify_url: string; hours: number; protocol: string } | undefined> {
  const [r] = await t.app.db.query<{ notify_url: string; hours: number; protocol: string }>(
    `select notify_url, protocol, extract(epoch from expires_at - now())::float8 / 3600 as hours from rsscloud_subscriptions where resource_url = $1`,
    [resource],
  );
  return r;
}

test('FeedLand registers over REST with http-post from its own address: the test POST reaches it, the feed is fetched once, 25 hours', async () => {
  const feed = serveFeed(feeds);
  const r = await postFrom('127.0.0.41', '/rsscloud/pleaseNotify', [
    ['notifyProcedure', ''],
    ['port', String(ep.port)],
    ['path', '/feedupdated'],
    ['protocol', 'http-post'],
    ['url1', feed.url],
  ]);
  assert.equal(r.status, 200, r.body);
  assert.equal(r.headers['content-type'], 'text/xml; charset=utf-8');
  assert.equal(r.body, xmlAnswer('notifyResult', true, THANKS));
  const [check] = ep.posts('/feedupdated');
  assert.equal(check.body, `url=${encodeURIComponent(feed.url)}`);
  assert.equal(check.headers['content-type'], 'application/x-www-form-urlencoded');
  assert.equal(feeds.hits(new URL(feed.url).pathname).length, 1);
  const s = await subscription(feed.url);
  assert.equal(s?.notify_url, `http://127.0.0.41:${ep.port}/feedupdated`);
  assert.equal(s?.protocol, 'http-post');
  assert.ok(s && s.hours > 24.99 && s.hours <= 25, `expires in ${s?.hours} h`);

  // Asking again renews: one subscription, its 25 hours counted from now; the feed is known, not fetched again.
  await t.app.db.query(`update rsscloud_subscriptions set expires_at = now() + interval '1 hour' where resource_url = $1`, [feed.url]);
  const again = await postFrom(
    '127.0.0.41',
    '/rsscloud/pleaseNotify',
    [
      ['port', String(ep.port)],
      ['path', 'feedupdated'],
      ['protocol', 'http-post'],
      ['url1', feed.url],
    ],
    'application/json',
  );
  assert.equal(again.status, 200);
  assert.deepEqual(JSON.parse(again.body), { success: true, msg: THANKS });
  assert.ok(((await subscription(feed.url))?.hours ?? 0) > 24.99);
  const [n] = await t.app.db.query<{ n: number }>('select count(*)::int as n from rsscloud_subscriptions where resource_url = $1', [
    feed.url,
  ]);
  assert.equal(n.n, 1);
  assert.equal(feeds.hits(new URL(feed.url).pathname).length, 1);
});

test('With a domain the endpoint is checked with a GET challenge; an endpoint that does not echo it is refused', async () => {
  const feed = serveFeed(feeds);
  const ok = await form(t, '/rsscloud/pleaseNotify', {
    domain: '127.0.0.41',
    port: String(ep.port),
    path: '/challenged',
    protocol: 'http-post',
    url1: feed.url,
  });
  assert.equal(ok.status, 200, ok.body);
  const [get] = ep.hits.filter((h) => h.path === '/challenged');
  assert.equal(get.method, 'GET');
  assert.equal(get.query.get('url'), feed.url);
  assert.ok((get.query.get('challenge') ?? '').length >= 16);

  ep.answer('/wrong', () => ({ status: 200, body: 'hello' }));
  const no = await form(t, '/rsscloud/pleaseNotify', {
    domain: '127.0.0.41',
    port: String(ep.port),
    path: '/wrong',
    protocol: 'http-post',
    url1: feed.url,
  });
  assert.equal(no.status, 200);
  assert.equal(
    no.body,
    xmlAnswer(
      'notifyResult',
      false,
      'The subscription was cancelled because the call failed when we tested the handler: the endpoint did not answer with the challenge.',
    ),
  );
  assert.equal(await subscription(feed.url).then((s) => s?.notify_url), `http://127.0.0.41:${ep.port}/challenged`);
});

test('protocol=xml-rpc: the endpoint gets a test call of its notifyProcedure (with or without a domain) and is stored with it', async () => {
  for (const [domain, path] of [
    [undefined, '/RPC2'],
    ['127.0.0.41', '/RPC2-domain'],
  ] as const) {
    const feed = serveFeed(feeds);
    const fields: [string, string][] = [
      ['notifyProcedure', 'river.feedUpdated'],
      ['port', String(ep.port)],
      ['path', path],
      ['protocol', 'xml-rpc'],
      ['url1', feed.url],
      ...(domain ? ([['domain', domain]] as [string, string][]) : []),
    ];
    const r = await postFrom('127.0.0.41', '/rsscloud/pleaseNotify', fields);
    assert.equal(r.status, 200, r.body);
    assert.equal(r.body, xmlAnswer('notifyResult', true, THANKS));
    // One POST, no challenge GET: as rsscloud-server 4.0.0 checks an xml-rpc endpoint.
    assert.deepEqual(
      ep.hits.filter((h) => h.path === path).map((h) => h.method),
      ['POST'],
    );
    const [call] = ep.posts(path);
    assert.equal(call.headers['content-type'], 'text/xml');
    assert.equal(call.body, notifyCall('river.feedUpdated', feed.url));
    const [row] = await t.app.db.query<{ protocol: string; notify_procedure: string; notify_url: string }>(
      'select protocol, notify_procedure, notify_url from rsscloud_subscriptions where resource_url = $1',
      [feed.url],
    );
    assert.deepEqual(
      { ...row },
      { protocol: 'xml-rpc', notify_procedure: 'river.feedUpdated', notify_url: `http://127.0.0.41:${ep.port}${path}` },
    );
  }
  // An endpoint that fails the test call is refused, as any other.
  const feed = serveFeed(feeds);
  ep.answer('/RPC2-down', () => ({ status: 500 }));
  const no = await form(t, '/rsscloud/pleaseNotify', {
    notifyProcedure: 'river.feedUpdated',
    domain: '127.0.0.41',
    port: String(ep.port),
    path: '/RPC2-down',
    protocol: 'xml-rpc',
    url1: feed.url,
  });
  assert.equal(no.status, 200);
  assert.equal(
    no.body,
    xmlAnswer(
      'notifyResult',
      false,
      'The subscription was cancelled because the call failed when we tested the handler: the endpoint answered HTTP 500.',
    ),
  );
});

test('Python xmlrpc.client: rssCloud.pleaseNotify answers true, and faults 4 with the reason', async () => {
  const feed = serveFeed(feeds);
  const script = `
import json, sys, xmlrpc.client
s = xmlrpc.client.ServerProxy(sys.argv[1])
out = {}
out['ok'] = s.rssCloud.pleaseNotify('', int(sys.argv[2]), '/rpc', 'http-post', [sys.argv[3]], '127.0.0.41')
out['xmlrpc'] = s.rssCloud.pleaseNotify('river.feedUpdated', int(sys.argv[2]), '/rpc-x', 'xml-rpc', [sys.argv[3]], '127.0.0.41')
for name, args in [('few', ['', 1, '/x', 'http-post']), ('proto', ['', int(sys.argv[2]), '/rpc', 'soap', [sys.argv[3]], '127.0.0.41'])]:
    try:
        s.rssCloud.pleaseNotify(*args)
    except xmlrpc.client.Fault as f:
        out[name] = [f.faultCode, f.faultString]
print(json.dumps(out))
`;
  const { stdout } = await run('python3', ['-c', script, `${t.url}/RPC2`, String(ep.port), feed.url]);
  const out = JSON.parse(stdout);
  assert.equal(out.ok, true);
  assert.equal(out.xmlrpc, true);
  assert.equal(ep.posts('/rpc-x')[0]?.body, notifyCall('river.feedUpdated', feed.url));
  assert.deepEqual(out.few, [4, 'Can\'t call "pleaseNotify" because there aren\'t enough parameters.']);
  assert.deepEqual(out.proto, [4, "Can't accept the subscription because the protocol, soap, is unsupported."]);
  assert.equal((await subscription(feed.url))?.notify_url, `http://127.0.0.41:${ep.port}/rpc`);
});

test('pleaseNotify refusals, each HTTP 200 with its exact answer', async () => {
  const feed = serveFeed(feeds);
  feeds.route('/page.html', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<html><body>not a feed</body></html>');
  });
  feeds.route('/missing.xml', (_req, res) => {
    res.writeHead(404);
    res.end();
  });
  ep.answer('/broken', () => ({ status: 500, body: 'no' }));
  const base = { port: String(ep.port), path: '/x', protocol: 'http-post', domain: '127.0.0.41' };
  const cases: [Record<string, string>, number, string][] = [
    [{ url1: feed.url }, 400, 'The following parameters were missing from the request body: port, path, protocol.'],
    [{ ...base, protocol: 'soap', url1: feed.url }, 400, "Can't accept the subscription because the protocol, soap, is unsupported."],
    [
      { ...base, protocol: 'xml-rpc', url1: feed.url },
      400,
      'The notifyProcedure must be given for the xml-rpc protocol: the name of the method to call on the endpoint.',
    ],
    [{ ...base }, 400, 'No resources specified.'],
    [{ ...base, port: '70000', url1: feed.url }, 400, 'The port must be a number from 1 to 65535.'],
    [{ ...base, path: '/a b', url1: feed.url }, 400, 'The path contains whitespace or control characters.'],
    [{ ...base, domain: 'a.example/x', url1: feed.url }, 400, 'The domain must be a host name or an IP address, without a port or a path.'],
    [{ ...base, url1: 'ftp://x.example/feed' }, 400, 'The resource URL must use http or https, not ftp.'],
    [{ ...base, url1: 'a', url2: 'b', url3: 'c', url4: 'd' }, 400, 'At most 3 resources may be named in one request.'],
    [
      { ...base, url1: `${feeds.origin}/page.html` },
      422,
      `The subscription was cancelled because there was an error reading the resource at URL ${feeds.origin}/page.html: it is not an RSS, Atom or JSON feed.`,
    ],
    [
      { ...base, url1: `${feeds.origin}/missing.xml` },
      422,
      `The subscription was cancelled because there was an error reading the resource at URL ${feeds.origin}/missing.xml: it answered HTTP 404.`,
    ],
    [
      { ...base, path: '/broken', url1: feed.url },
      422,
      'The subscription was cancelled because the call failed when we tested the handler: the endpoint answered HTTP 500.',
    ],
  ];
  // The second figure is the status pingd answered before it answered as rsscloud-server 4.0.0 does: each
  // refusal is now a 200 whatever its kind, and its kind is the metric's label.
  for (const [fields, , msg] of cases) {
    const r = await form(t, '/rsscloud/pleaseNotify', fields);
    assert.equal(r.status, 200, `${JSON.stringify(fields)}: ${r.body}`);
    assert.equal(r.headers['content-type'], 'text/xml; charset=utf-8');
    assert.equal(r.body, xmlAnswer('notifyResult', false, msg), JSON.stringify(fields));
  }
  // A metadata address is never asked, whatever the loopback allowance: the address policy refuses it.
  const meta = await form(
    t,
    '/rsscloud/pleaseNotify',
    { ...base, domain: '169.254.169.254', url1: feed.url },
    { accept: 'application/json' },
  );
  assert.equal(meta.status, 200);
  const j = JSON.parse(meta.body);
  assert.equal(j.success, false);
  assert.match(j.msg, /^The subscription was cancelled because the call failed when we tested the handler: .*169\.254\.169\.254/);
  assert.equal(await subscription(feed.url), undefined);
});

test('Bounds: RSSCLOUD_MAX_PER_HOST and RSSCLOUD_MAX_SUBSCRIPTIONS refuse new subscriptions (200, success="false", Retry-After), renewals pass', async () => {
  const small = await cloudApp({ RSSCLOUD_MAX_PER_HOST: 1, RSSCLOUD_MAX_SUBSCRIPTIONS: 2 });
  const ep2 = await startEndpoint('127.0.0.42');
  try {
    const [a, b, c] = [serveFeed(feeds), serveFeed(feeds), serveFeed(feeds)];
    const sub = (domain: string, url: string) =>
      form(small, '/rsscloud/pleaseNotify', {
        domain,
        port: String(domain === '127.0.0.41' ? ep.port : ep2.port),
        path: '/bounded',
        protocol: 'http-post',
        url1: url,
      });
    assert.equal((await sub('127.0.0.41', a.url)).status, 200);
    const host = await sub('127.0.0.41', b.url);
    assert.equal(host.status, 200);
    assert.equal(host.headers['retry-after'], '3600');
    assert.equal(
      host.body,
      xmlAnswer(
        'notifyResult',
        false,
        "Can't accept the subscription because the endpoint's host 127.0.0.41 already has 1 subscriptions here (RSSCLOUD_MAX_PER_HOST).",
      ),
    );
    assert.equal((await sub('127.0.0.41', a.url)).status, 200, 'a renewal passes');
    assert.equal((await sub('127.0.0.42', b.url)).status, 200);
    const full = await sub('127.0.0.43', c.url);
    assert.equal(full.status, 200);
    assert.equal(
      full.body,
      xmlAnswer(
        'notifyResult',
        false,
        "Can't accept the subscription because this server keeps at most 2 subscriptions (RSSCLOUD_MAX_SUBSCRIPTIONS); please try again later.",
      ),
    );
    // Nothing was fetched or asked for the refused ones.
    assert.equal(feeds.hits(new URL(c.url).pathname).length, 0);
  } finally {
    await ep2.close();
    await small.close();
  }
});

test('Bounds: RSSCLOUD_MAX_PER_REQUESTER refuses a client asking for more, whatever endpoints it names', async () => {
  const small = await cloudApp({ RSSCLOUD_MAX_PER_REQUESTER: 1 });
  const ep2 = await startEndpoint('127.0.0.42');
  try {
    const [a, b] = [serveFeed(feeds), serveFeed(feeds)];
    const ok = await form(small, '/rsscloud/pleaseNotify', {
      domain: '127.0.0.41',
      port: String(ep.port),
      path: '/r',
      protocol: 'http-post',
      url1: a.url,
    });
    assert.equal(ok.status, 200, ok.body);
    const no = await form(small, '/rsscloud/pleaseNotify', {
      domain: '127.0.0.42',
      port: String(ep2.port),
      path: '/r',
      protocol: 'http-post',
      url1: b.url,
    });
    assert.equal(no.status, 200);
    assert.equal(no.headers['retry-after'], '3600');
    assert.equal(
      no.body,
      xmlAnswer(
        'notifyResult',
        false,
        "Can't accept the subscription because 127.0.0.1 has already asked for 1 subscriptions here (RSSCLOUD_MAX_PER_REQUESTER).",
      ),
    );
    assert.equal(ep2.hits.length, 0, 'the refused endpoint was never asked');
    assert.equal(feeds.hits(new URL(b.url).pathname).length, 0, 'the refused feed was never fetched');
  } finally {
    await ep2.close();
    await small.close();
  }
});

test('Subscriptions expire after their 25 hours: the sweep deletes them', async () => {
  const feed = serveFeed(feeds);
  const r = await form(t, '/rsscloud/pleaseNotify', {
    domain: '127.0.0.41',
    port: String(ep.port),
    path: '/exp',
    protocol: 'http-post',
    url1: feed.url,
  });
  assert.equal(r.status, 200);
  await t.app.db.query(`update rsscloud_subscriptions set expires_at = now() - interval '1 second' where resource_url = $1`, [feed.url]);
  assert.ok((await t.app.rsscloud.sweep()) >= 1);
  assert.equal(await subscription(feed.url), undefined);
});
