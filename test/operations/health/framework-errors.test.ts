// Answers given before any route runs: short plain text with the request id, never an echo of the path.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, type TestApp } from '../../helpers/app.js';

let t: TestApp;
after(async () => t?.close());

test('an over-long path segment gets 414 with the request id, without echoing 8 kB of path (REGRESSION: the whole path came back as JSON)', async () => {
  t = await startApp({});
  for (const [method, url] of [
    ['GET', `/${'a'.repeat(8000)}.xml`],
    ['GET', `/2026/${'1'.repeat(8000)}/01/01.xml`],
    ['POST', `/rssping/${'x'.repeat(8000)}`],
  ] as const) {
    const r = await t.app.inject({ method, url });
    assert.equal(r.statusCode, 414, url.slice(0, 20));
    assert.equal(r.body, 'The request path is too long.\n');
    assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8');
    assert.match(String(r.headers['x-request-id']), /^[0-9a-f-]{36}$/);
  }
});
