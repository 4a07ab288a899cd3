// rsscloud-server's answers as pure functions: the XML bytes xmlbuilder writes, and the choice of XML or
// JSON as Express's req.accepts('xml', 'json') makes it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { negotiate, resultXml, resultJson } from '../../../src/push/rsscloud/answers.js';

test('resultXml escapes as xmlbuilder does: &, < and " as references, the apostrophe kept, controls removed', () => {
  assert.equal(
    resultXml('result', true, 'Thanks for the ping.'),
    '<?xml version="1.0"?>\n<result success="true" msg="Thanks for the ping."/>',
  );
  assert.equal(
    resultXml('notifyResult', false, `Don't <b>"x"</b> & y\u0001\n`),
    '<?xml version="1.0"?>\n<notifyResult success="false" msg="Don\'t &lt;b>&quot;x&quot;&lt;/b> &amp; y&#xA;"/>',
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
  ];
  for (const [accept, want] of cases) assert.equal(negotiate(accept), want, String(accept));
});
