// PUBLIC_URL and the documents' links: WebSub discovery headers (rel=hub, rel=self) on every answer of the
// live documents, absolute from PUBLIC_URL or the request's Host, and the absolute channel link of
// /updates.xml.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, type TestApp } from '../../helpers/app.js';
import { loadConfig } from '../../../src/platform/config.js';
import { requestBase } from '../../../src/platform/public-url.js';

const apps: TestApp[] = [];
after(async () => {
  for (const a of apps) await a.close();
});

async function app(overrides: Record<string, unknown> = {}): Promise<TestApp> {
  const t = await startApp({ RENDER_SCHEDULER: false, ...overrides });
  apps.push(t);
  await t.app.renderer.tick({});
  return t;
}

test("without PUBLIC_URL the Link header is built from the request's Host, on 200 and on 304", async () => {
  const t = await app();
  for (const path of ['/changes.xml', '/shortChanges.xml', '/updates.xml']) {
    const r = await t.app.inject({ method: 'GET', url: path, headers: { host: 'ping.example.net:8080' } });
    assert.equal(r.statusCode, 200, path);
    assert.equal(r.headers.link, `<http://ping.example.net:8080/websub>; rel="hub", <http://ping.example.net:8080${path}>; rel="self"`);
    const again = await t.app.inject({
      method: 'GET',
      url: path,
      headers: { host: 'ping.example.net:8080', 'if-none-match': String(r.headers.etag) },
    });
    assert.equal(again.statusCode, 304);
    assert.equal(again.headers.link, r.headers.link);
  }
  // A Host that is not a plain name is not repeated into a public response.
  const odd = await t.app.inject({ method: 'GET', url: '/changes.xml', headers: { host: 'evil.example>; rel="hub"' } });
  assert.equal(odd.headers.link, '<http://localhost:8080/websub>; rel="hub", <http://localhost:8080/changes.xml>; rel="self"');
  // The channel link of /updates.xml is absolute even so.
  const updates = await t.app.inject({ method: 'GET', url: '/updates.xml' });
  assert.match(updates.body, /<channel>\n<title>RSS Ping updates<\/title>\n<link>http:\/\/localhost:8080\/<\/link>/);
});

test('with PUBLIC_URL every link is absolute under it, whatever Host the request named', async () => {
  const t = await app({ PUBLIC_URL: 'https://ping.example.com/pingd' });
  const r = await t.app.inject({ method: 'GET', url: '/changes.xml', headers: { host: 'internal:8080' } });
  assert.equal(
    r.headers.link,
    '<https://ping.example.com/pingd/websub>; rel="hub", <https://ping.example.com/pingd/changes.xml>; rel="self"',
  );
  const updates = await t.app.inject({ method: 'GET', url: '/updates.xml' });
  assert.match(updates.body, /<link>https:\/\/ping\.example\.com\/pingd\/<\/link>/);
});

test('PUBLIC_URL is checked at start: a plain http(s) origin with an optional path, kept without a trailing slash', () => {
  assert.equal(loadConfig({ PUBLIC_URL: 'https://ping.example.com/' }).PUBLIC_URL, 'https://ping.example.com');
  assert.equal(loadConfig({ PUBLIC_URL: '' }).PUBLIC_URL, undefined);
  assert.throws(() => loadConfig({ PUBLIC_URL: 'ftp://ping.example.com' }), {
    message: 'PUBLIC_URL must be an http(s) URL, got "ftp://ping.example.com"',
  });
  assert.throws(() => loadConfig({ PUBLIC_URL: 'https://ping.example.com/?a=1' }), {
    message:
      'PUBLIC_URL must be a plain origin with an optional path (no query, fragment or credentials), got "https://ping.example.com/?a=1"',
  });
  assert.equal(requestBase(undefined, 8080, { protocol: 'https', host: '[::1]:8443' }), 'https://[::1]:8443');
});
