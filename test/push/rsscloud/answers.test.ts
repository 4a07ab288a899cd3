// rsscloud-server's answers as pure functions: the XML bytes xmlbuilder writes, and the choice of XML or
// JSON as Express's req.accepts('xml', 'json') makes it (the negotiator package).
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
