// rsscloud-server's answers as pure functions: the XML bytes xmlbuilder writes, and the choice of XML or
// JSON as Express's req.accepts('xml', 'json') makes it (the negotiator package).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { negotiate, resultXml, resultJson } from '../../../src/push/rsscloud/answers.js';
import { notifyBody, notifyCallXml } from '../../../src/push/rsscloud/notification.js';

test('resultXml is rsscloud-server 4.0.0\'s bytes, escaped as xmlbuilder does: &, < and " as references, the apostrophe kept, controls removed', () => {
  // The bytes xml2js 0.6.2's Builder (rsscloud-server 4.0.0, packages/core rest-dispatcher.ts) writes for
  // {result: {$: {success: 'true', msg: 'Thanks for the ping.'}}}, and for a message with every special.
  assert.equal(
    resultXml('result', true, 'Thanks for the ping.'),
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<result success="true" msg="Thanks for the ping."/>',
  );
  assert.equal(
    resultXml('notifyResult', false, `a&b<c>"d'e\tf\ng`),
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<notifyResult success="false" msg="a&amp;b&lt;c>&quot;d\'e&#x9;f&#xA;g"/>',
  );
  assert.equal(
    resultXml('notifyResult', false, `Don't <b>"x"</b> & y\u0001\n`),
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<notifyResult success="false" msg="Don\'t &lt;b>&quot;x&quot;&lt;/b> &amp; y&#xA;"/>',
  );
  assert.equal(resultJson(false, 'a "b"'), '{"success":false,"msg":"a \\"b\\""}');
});

test('negotiate: XML by default and for wildcards, JSON when preferred or listed first, null when neither', () => {
  const cases: [string | undefined, 'xml' | 'json' | null][] = [
    [undefined, 'xml'],
    ['', 'xml'],
    ['*/*', 'xml'],
    ['application/json', 'json'],
    ['application/json, text/xml', 'json'],
    ['text/xml, application/json', 'xml'],
    ['application/json;q=0.5, text/xml', 'xml'],
    ['text/*;q=0.2, application/json', 'json'],
    ['application/*', 'xml'],
    ['*/*;q=0.1, application/json;q=0', 'xml'],
    ['image/png', null],
    ['text/html', null],
    ['garbage', null],
    // The negotiator package's rules, as Express applies them: the more specific range wins a tie of quality,
    // a range's own parameters must match the type offered, text/xml is offered as well as application/xml.
    ['*/*, application/json', 'json'],
    ['application/json;q=0.9, */*', 'xml'],
    ['text/xml;q=0, application/xml', 'xml'],
    ['text/xml;q=0, application/xml;q=0, */*', 'json'],
    ['application/json; charset=utf-8', null],
    ['application/json;q=0', null],
    ['   ', 'xml'],
    // Only the first 64 ranges are read.
    [`${'image/png, '.repeat(64)}application/json`, null],
    [`${'image/png, '.repeat(63)}application/json`, 'json'],
  ];
  for (const [accept, want] of cases) assert.equal(negotiate(accept), want, String(accept));
});

test('what a subscriber is sent: a form for http-post and https-post, the XML-RPC call xml2js writes for xml-rpc', () => {
  // xml2js 0.6.2's Builder for {methodCall: {methodName, params: {param: {value: url}}}} (rsscloud-server
  // 4.0.0, xml-rpc-plugin.ts buildNotifyCall): an untyped value, two-space indent, &, < and > escaped.
  assert.equal(
    notifyCallXml('river.feedUpdated', 'http://x/a?b=1&c=<2>'),
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<methodCall>\n  <methodName>river.feedUpdated</methodName>\n  <params>\n    <param>\n      <value>http://x/a?b=1&amp;c=&lt;2&gt;</value>\n    </param>\n  </params>\n</methodCall>',
  );
  const rpc = notifyBody({ protocol: 'xml-rpc', notifyProcedure: 'river.feedUpdated' }, 'https://b.example/feed');
  assert.equal(rpc.contentType, 'text/xml');
  assert.equal(rpc.body.toString(), notifyCallXml('river.feedUpdated', 'https://b.example/feed'));
  for (const protocol of ['http-post', 'https-post'] as const) {
    const form = notifyBody({ protocol, notifyProcedure: null }, 'https://b.example/feed?a=1');
    assert.equal(form.contentType, 'application/x-www-form-urlencoded');
    assert.equal(form.body.toString(), 'url=https%3A%2F%2Fb.example%2Ffeed%3Fa%3D1');
  }
});
