// Form bodies whose percent-escapes are not UTF-8 (issue 43): `hub.topic=…%FF`, a publish, an rssCloud
// ping and pleaseNotify were accepted (202/204/200) and stored the undecoded text. A client that means a
// URL with `%FF` in it sends `%25FF`; anything else is refused naming the parameter, in each
// surface's own form (WebSub: a 400 and text; rssCloud: a 200 and its <result>), and nothing is stored.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { TestApp } from '../helpers/app.js';
import { hubApp, PUBLIC } from '../push/websub/helpers.js';
import { xmlAnswer } from '../push/rsscloud/helpers.js';
import { strictFormParse } from '../../src/platform/http-form.js';

let t: TestApp;
before(async () => {
  t = await hubApp();
});
after(async () => {
  await t.close();
});

const post = (url: string, payload: string | Buffer) =>
  t.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload });

async function stored(): Promise<number[]> {
  const counts: number[] = [];
  for (const table of ['pings', 'websub_tasks', 'websub_subscriptions', 'rsscloud_subscriptions']) {
    const [r] = await t.app.db.query<{ n: number }>(`select count(*)::int as n from ${table}`);
    counts.push(r.n);
  }
  return counts;
}

const badTopic = 'http%3A%2F%2Fa.example%2F%FFfeed';
const NOT_UTF8 = (what: string) => `${what} is not UTF-8 once percent-decoded: a URL's own escapes are sent escaped again (%25FF for %FF)`;

test('strictFormParse: decodes UTF-8 escapes and +, keeps repeats as arrays, refuses what is not UTF-8', () => {
  assert.deepEqual({ ...strictFormParse('a=%E2%82%AC+x&b=1&b=2&c&=v') }, { a: '€ x', b: ['1', '2'], c: '', '': 'v' });
  assert.equal(Object.getPrototypeOf(strictFormParse('__proto__=x')), null);
  assert.equal(strictFormParse('url=http%3A%2F%2Fa.example%2F%2525FF').url, 'http://a.example/%25FF');
  assert.throws(() => strictFormParse(`hub.topic=${badTopic}`), {
    message: NOT_UTF8('the parameter hub.topic'),
    statusCode: 400,
  } as object);
  assert.throws(() => strictFormParse('x%C3=1'), { message: NOT_UTF8('a parameter name') } as object);
  assert.throws(() => strictFormParse('url=%E2%82'), { message: NOT_UTF8('the parameter url') } as object);
  assert.throws(() => strictFormParse('url=%'), { message: NOT_UTF8('the parameter url') } as object);
  assert.throws(() => strictFormParse('url=\uFFFD'), {
    message: 'the request body is not UTF-8: percent-encode what is not ASCII',
  } as object);
});

test('WebSub subscribe and publish with a topic that is not UTF-8: 400 naming the parameter, nothing stored', async () => {
  const before = await stored();
  const cb = encodeURIComponent('http://127.0.0.39:9/cb');
  for (const [body, what] of [
    [`hub.callback=${cb}&hub.mode=subscribe&hub.topic=${badTopic}`, 'the parameter hub.topic'],
    [`hub.callback=${cb}&hub.mode=unsubscribe&hub.topic=${badTopic}`, 'the parameter hub.topic'],
    [
      `hub.callback=http%3A%2F%2F127.0.0.39%2F%C0%AF&hub.mode=subscribe&hub.topic=${encodeURIComponent(`${PUBLIC}/changes.xml`)}`,
      'the parameter hub.callback',
    ],
    [`hub.mode=publish&hub.url=${badTopic}`, 'the parameter hub.url'],
    [`hub.mode=publish&hub.url=${encodeURIComponent('https://ok.example/feed')}&hub.url=${badTopic}`, 'the parameter hub.url'],
  ]) {
    const r = await post('/websub', body);
    assert.equal(r.statusCode, 400, body);
    assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(r.body, `${NOT_UTF8(what)}\n`);
  }
  // Raw bytes that are not UTF-8 (Latin-1 é) in the body itself.
  const raw = await post(
    '/websub',
    Buffer.concat([Buffer.from('hub.mode=publish&hub.url=https://caf'), Buffer.from([0xe9]), Buffer.from('.example/feed')]),
  );
  assert.equal(raw.statusCode, 400);
  assert.equal(raw.body, 'the request body is not UTF-8: percent-encode what is not ASCII\n');
  assert.deepEqual(await stored(), before);
});

// rssCloud refuses with 200 and success="false", as rsscloud-server 4.0.0 does (docs/reference/rsscloud.md).
test('rssCloud ping and pleaseNotify with a URL that is not UTF-8: <result success="false"> naming it, nothing stored', async () => {
  const before = await stored();
  const ping = await post('/rsscloud/ping', `url=${badTopic}`);
  assert.equal(ping.statusCode, 200);
  assert.equal(ping.body, xmlAnswer('result', false, NOT_UTF8('the parameter url')));
  const notify = await post('/rsscloud/pleaseNotify', `port=9&path=%2Fx&protocol=http-post&domain=127.0.0.41&url1=${badTopic}`);
  assert.equal(notify.statusCode, 200);
  assert.equal(notify.body, xmlAnswer('notifyResult', false, NOT_UTF8('the parameter url1')));
  assert.deepEqual(await stored(), before);
});

test('a URL with an escaped %FF in it (sent as %25FF) is taken as that URL', async () => {
  const r = await post('/websub', `hub.mode=publish&hub.url=${encodeURIComponent('https://pct.example/feed%FF')}`);
  assert.equal(r.statusCode, 204, r.body);
  const rows = await t.app.db.query<{ rss_url: string }>("select rss_url from pings where method = 'websub' order by id desc limit 1");
  assert.equal(rows[0].rss_url, 'https://pct.example/feed%FF');
});
