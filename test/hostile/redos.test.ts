// Regressions for the algorithmic-complexity bugs the pumping fuzzer found (one token repeated up to the
// body limit at every position of the seed requests): each input below took seconds to hours of event
// loop before its fix. The limits are raised so that the old behaviour would run far past this test's
// timeout (a hang detector, not a speed measurement); each input gets its exact refusal.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, methodCall, readReply, type TestApp } from '../helpers/app.js';

let t: TestApp;
before(async () => {
  t = await startApp({ BODY_LIMIT: 2 * 1024 * 1024, RSSPING_BODY_LIMIT: 4 * 1024 * 1024 });
});
after(async () => {
  await t.close();
});

const ping = methodCall('weblogUpdates.ping', ['N', 'http://redos.example.com/']);
const rssMessage = (body: string) =>
  /<message>([^<]*)<\/message>/
    .exec(body)?.[1]
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&apos;/g, "'");

test(
  'XML-RPC: a megabyte of whitespace after "<" (the DOCTYPE/prototype pre-check split it quadratically: ~5 s per 64 kB)',
  { timeout: 60_000 },
  async () => {
    for (const [from, to] of [
      ['<value>', `<${'\n'.repeat(1_000_000)}value>`],
      ['</value>', `</${'\t'.repeat(1_000_000)}value>`],
    ]) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/RPC2',
        headers: { 'content-type': 'text/xml' },
        payload: ping.replace(from, to),
      });
      const r = readReply(res.statusCode, res.body);
      assert.equal(r.faultCode, -32700);
      assert.match(r.faultString ?? '', /^Parse error: not well-formed XML \(Invalid space after '<'\. at line 2, column (72|98)\)\.$/);
    }
  },
);

test(
  'XML-RPC: 200,000 entity and character references without a DTD are decoded in linear time, then refused by the name rule',
  { timeout: 60_000 },
  async () => {
    // A name of no-break spaces only is whitespace: "missing".
    for (const [ref, message] of [
      ['&amp;', 'longer'],
      ['&#x1F600;', 'longer'],
      ['&amp;amp;', 'longer'],
      ['&lt;', 'longer'],
      ['&nbsp;', 'missing'],
    ]) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/RPC2',
        headers: { 'content-type': 'text/xml' },
        payload: methodCall('weblogUpdates.ping', ['x', 'http://refs.example.com/']).replace(
          '<string>x</string>',
          `<string>${ref.repeat(200_000)}</string>`,
        ),
      });
      const r = readReply(res.statusCode, res.body);
      assert.equal(r.flerror, true, ref);
      assert.equal(
        r.message,
        message === 'longer' ? 'The weblog name is longer than 1024 characters.' : 'The weblog name is missing.',
        ref,
      );
    }
  },
);

test(
  'RSS Ping: 40 processing instructions before the root (the first-element regex backtracked exponentially)',
  { timeout: 60_000 },
  async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/rssping',
      headers: { 'content-type': 'text/xml' },
      payload: '<?a?>'.repeat(40) + '!',
    });
    assert.equal(res.statusCode, 400);
    assert.equal(rssMessage(res.body), 'The request is not an XML document: POST an rss_ping document.');
    const res2 = await t.app.inject({
      method: 'POST',
      url: '/rssping',
      headers: { 'content-type': 'text/xml' },
      payload: '<!--a-->'.repeat(40) + '<x/>',
    });
    assert.equal(res2.statusCode, 400);
    assert.equal(rssMessage(res2.body), 'The document element must be <rss_ping>, not <x>.');
  },
);

test(
  'RSS Ping: 100,000 "</payload>" inside the payload (the one-payload check was quadratic: 1.5 s for 16,000)',
  { timeout: 60_000 },
  async () => {
    const body = `<rss_ping version="2"><site_name>R</site_name><site_uri>http://redos-rss.example.com/</site_uri><feed_uri>http://redos-rss.example.com/feed</feed_uri><payload>${'</payload>'.repeat(100_000)}</payload></rss_ping>`;
    const res = await t.app.inject({ method: 'POST', url: '/rssping', headers: { 'content-type': 'text/xml' }, payload: body });
    assert.equal(res.statusCode, 400);
    assert.equal(rssMessage(res.body), "The payload is not well-formed XML (Closing tag 'payload' has not been opened., line 1).");
  },
);

test('RSS Ping: 250,000 "&lt;" in an HTML description (tag stripping was quadratic: 2 s for 60,000)', { timeout: 60_000 }, async () => {
  const body = `<rss_ping version="2"><site_name>R</site_name><site_uri>http://redos-rss2.example.com/</site_uri><feed_uri>http://redos-rss2.example.com/feed</feed_uri><payload><item><title>T</title><description>${'&lt;'.repeat(250_000)}</description><link>http://redos-rss2.example.com/p</link></item></payload></rss_ping>`;
  const res = await t.app.inject({ method: 'POST', url: '/rssping', headers: { 'content-type': 'text/xml' }, payload: body });
  assert.equal(res.statusCode, 200);
  assert.match(res.body, /<flerror>0<\/flerror>/);
});
