// The errors no route of a protocol answered itself (a body too large or not decodable, a wrong
// Content-Type, a request the schema refuses, a handler that threw), in each protocol's own form, byte for
// byte: XML-RPC faults on /RPC2, RSS Ping's <response> and its token route's text, rssCloud's <result> and
// WebSub's text. Every scope takes its decision from the root's errorAnswer (a 4xx keeps its message, any
// other failure is hidden and logged) and only formats it; these answers pin that formatting.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, type TestApp } from '../helpers/app.js';
import type { RawPing } from '../../src/intake/ping/validate.js';

let t: TestApp;
before(async () => {
  t = await startApp({ BODY_LIMIT: 4096, RSSPING_BODY_LIMIT: 4096, RENDER_SCHEDULER: false });
});
after(async () => {
  await t.close();
});

/** Makes intake throw (as a bug or a driver would) while `fn` runs: the scopes' 5xx path. */
async function whileIntakeThrows<T>(fn: () => Promise<T>): Promise<T> {
  const pings = t.app.pings as unknown as { admit(raw: RawPing): never };
  pings.admit = () => {
    throw new Error('secret: connection to /srv/pingd/data refused');
  };
  try {
    return await fn();
  } finally {
    delete (pings as { admit?: unknown }).admit;
  }
}

interface Answer {
  status: number;
  type: string | undefined;
  retryAfter?: string;
  body: string;
}

async function send(method: 'GET' | 'POST', url: string, contentType?: string, payload?: string | Buffer): Promise<Answer> {
  const r = await t.app.inject({ method, url, headers: contentType ? { 'content-type': contentType } : {}, payload });
  const retryAfter = r.headers['retry-after'] as string | undefined;
  return {
    status: r.statusCode,
    type: r.headers['content-type'] as string | undefined,
    ...(retryAfter ? { retryAfter } : {}),
    body: r.body,
  };
}

const XMLRPC_TYPE = 'text/xml; charset=utf-8';
const fault = (code: number, msg: string) =>
  `<?xml version="1.0"?>\n<methodResponse><fault><value><struct><member><name>faultCode</name><value><int>${code}</int></value></member><member><name>faultString</name><value><string>${msg}</string></value></member></struct></value></fault></methodResponse>`;

test('XML-RPC: a body over BODY_LIMIT is a 413 fault; a handler that throws is an HTTP 200 fault that hides why', async () => {
  const big = await send('POST', '/RPC2', 'text/xml', `<methodCall>${'x'.repeat(5000)}</methodCall>`);
  assert.deepEqual(big, { status: 413, type: XMLRPC_TYPE, body: `${fault(-32600, 'Request body larger than 4096 bytes.')}\n` });
  const call =
    '<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName><params><param><value>A</value></param><param><value>http://errors.example/a</value></param></params></methodCall>';
  const boom = await whileIntakeThrows(() => send('POST', '/RPC2', 'text/xml', call));
  assert.deepEqual(boom, { status: 200, type: XMLRPC_TYPE, body: `${fault(-32603, 'Internal error; please try again later.')}\n` });
});

const RSSPING_TYPE = 'text/xml; charset=utf-8';
const rssPingFault = (msg: string) =>
  `<?xml version="1.0" encoding="utf-8"?>\n<rss_ping_response><flerror>1</flerror><message>${msg}</message></rss_ping_response>\n`;

test('RSS Ping: a body over RSSPING_BODY_LIMIT is a 413 <response>; a handler that throws is a 500 that hides why', async () => {
  const big = await send('POST', '/rssping', 'text/xml', `<rss_ping>${'x'.repeat(5000)}</rss_ping>`);
  assert.deepEqual(big, { status: 413, type: RSSPING_TYPE, body: rssPingFault('The rss_ping is larger than 4096 bytes.') });
  const ping = `<?xml version="1.0"?><rss_ping version="2"><site_uri>http://errors.example/r</site_uri><site_name>R</site_name><feed_uri>http://errors.example/r/feed</feed_uri><payload type="rss"><item><title>T</title><link>http://errors.example/r/1</link></item></payload></rss_ping>`;
  const boom = await whileIntakeThrows(() => send('POST', '/rssping', 'text/xml', ping));
  assert.deepEqual(boom, { status: 500, type: RSSPING_TYPE, body: rssPingFault('Internal error; please try again later.') });
});

test('RSS Ping token: a query the schema refuses is a 400 with its reason as text', async () => {
  const r = await send('GET', `/rssping/token?site_uri=${'a'.repeat(9000)}`);
  assert.deepEqual(r, {
    status: 400,
    type: 'text/plain; charset=utf-8',
    body: 'querystring/site_uri must NOT have more than 8192 characters, querystring/site_uri/0 must NOT have more than 8192 characters, querystring/site_uri must match a schema in anyOf',
  });
});

const RSSCLOUD_TYPE = 'text/xml; charset=utf-8';
const RSSCLOUD_XML = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>';

test('rssCloud: not a form (415), too large (413), not UTF-8 (a refusal: 200), a handler that throws (500), each a <result>', async () => {
  const cases: [Answer, Answer][] = [
    [
      await send('POST', '/rsscloud/ping', 'text/xml', '<x/>'),
      {
        status: 415,
        type: RSSCLOUD_TYPE,
        body: `${RSSCLOUD_XML}\n<result success="false" msg="Send the parameters as application/x-www-form-urlencoded."/>`,
      },
    ],
    [
      await send('POST', '/rsscloud/pleaseNotify', 'application/x-www-form-urlencoded', `url1=${'x'.repeat(70_000)}`),
      {
        status: 413,
        type: RSSCLOUD_TYPE,
        body: `${RSSCLOUD_XML}\n<notifyResult success="false" msg="The request body is larger than 65536 bytes."/>`,
      },
    ],
    [
      // A refusal of the form's parameters is the protocol's: HTTP 200, as rsscloud-server answers every refusal.
      await send('POST', '/rsscloud/ping', 'application/x-www-form-urlencoded', 'url=%FF'),
      {
        status: 200,
        type: RSSCLOUD_TYPE,
        body: `${RSSCLOUD_XML}\n<result success="false" msg="the parameter url is not UTF-8 once percent-decoded: a URL's own escapes are sent escaped again (%25FF for %FF)"/>`,
      },
    ],
    [
      await whileIntakeThrows(() =>
        send('POST', '/rsscloud/ping', 'application/x-www-form-urlencoded', 'url=http%3A%2F%2Ferrors.example%2Fc'),
      ),
      {
        status: 500,
        type: RSSCLOUD_TYPE,
        body: `${RSSCLOUD_XML}\n<result success="false" msg="Internal error; please try again later."/>`,
      },
    ],
  ];
  for (const [got, want] of cases) assert.deepEqual(got, want);
});

const WEBSUB_TYPE = 'text/plain; charset=utf-8';

test('WebSub: not a form (415), too large (413), not UTF-8 (400), a handler that throws (500), each a line of text', async () => {
  const cases: [Answer, Answer][] = [
    [
      await send('POST', '/websub', 'text/xml', '<x/>'),
      { status: 415, type: WEBSUB_TYPE, body: 'send the parameters as application/x-www-form-urlencoded (WebSub §5.1)\n' },
    ],
    [
      await send('POST', '/websub', 'application/x-www-form-urlencoded', `hub.mode=publish&hub.url=${'x'.repeat(70_000)}`),
      { status: 413, type: WEBSUB_TYPE, body: 'Request body is too large\n' },
    ],
    [
      await send('POST', '/websub', 'application/x-www-form-urlencoded', 'hub.mode=publish&hub.url=%FF'),
      {
        status: 400,
        type: WEBSUB_TYPE,
        body: "the parameter hub.url is not UTF-8 once percent-decoded: a URL's own escapes are sent escaped again (%25FF for %FF)\n",
      },
    ],
    [
      await whileIntakeThrows(() =>
        send('POST', '/websub', 'application/x-www-form-urlencoded', 'hub.mode=publish&hub.url=http%3A%2F%2Ferrors.example%2Fw'),
      ),
      { status: 500, type: WEBSUB_TYPE, body: 'the hub cannot take requests right now; try again later\n' },
    ],
  ];
  for (const [got, want] of cases) assert.deepEqual(got, want);
});
