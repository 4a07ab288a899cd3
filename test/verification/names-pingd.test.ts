// Whether a feed names this server as its hub or cloud (src/verification/names-pingd.ts): the hub is
// PUBLIC_URL/websub, compared with scheme and host in any case, the default port and a trailing slash
// ignored; the cloud is PUBLIC_URL's host and port with rssCloud's REST or XML-RPC registration path. Another
// hub, another path, another port, or PUBLIC_URL unset: not pingd.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { comparableUrl, namesPingd, ownEndpoints } from '../../src/verification/names-pingd.js';
import type { FeedCloud } from '../../src/verification/feed-parser.js';
import { loadConfig } from '../../src/platform/config.js';

const own = ownEndpoints('https://ping.example.com');
const cloud = (c: Partial<FeedCloud>): FeedCloud => ({
  domain: 'ping.example.com',
  port: 443,
  path: '/rsscloud/pleaseNotify',
  registerProcedure: null,
  protocol: 'https-post',
  ...c,
});
const hubs = (...h: string[]) => namesPingd({ hubs: h, cloud: null }, own);

test("the hub: PUBLIC_URL's /websub, scheme and host in any case, :443 and a trailing slash ignored", () => {
  assert.equal(hubs('https://ping.example.com/websub'), true);
  assert.equal(hubs('HTTPS://Ping.Example.COM:443/websub/'), true);
  assert.equal(hubs('https://pubsubhubbub.appspot.com/', 'https://ping.example.com/websub#x'), true, 'any of its hubs');
  assert.equal(hubs('https://ping.example.com/WebSub'), false, 'the path as routed: case matters');
  assert.equal(hubs('http://ping.example.com/websub'), false, 'another scheme is another URL');
  assert.equal(hubs('https://ping.example.com:8443/websub'), false);
  assert.equal(hubs('https://ping.example.com/websub?x=1'), false);
  assert.equal(hubs('https://ping.example.com.evil.example/websub', '/websub', 'not a url'), false);
  assert.equal(hubs(), false);
});

test('PUBLIC_URL with a path prefix and a port: the hub and the cloud are under it', () => {
  const prefixed = ownEndpoints(loadConfig({}, { PUBLIC_URL: 'http://Example.org:8080/pingd/' }).PUBLIC_URL);
  assert.equal(namesPingd({ hubs: ['http://example.org:8080/pingd/websub'], cloud: null }, prefixed), true);
  assert.equal(namesPingd({ hubs: ['http://example.org:8080/websub'], cloud: null }, prefixed), false);
  const c = (path: string, port = 8080) =>
    namesPingd({ hubs: [], cloud: cloud({ domain: 'example.org', port, path, protocol: 'http-post' }) }, prefixed);
  assert.equal(c('/pingd/rsscloud/pleaseNotify'), true);
  assert.equal(c('/pingd/RPC2'), true);
  assert.equal(c('/pingd/'), true, "XML-RPC's `/` under the prefix");
  assert.equal(c('/rsscloud/pleaseNotify'), false);
  assert.equal(c('/pingd/rsscloud/pleaseNotify', 80), false);
});

test("the cloud: PUBLIC_URL's host (any case) and port, the REST or an XML-RPC path; protocol and procedure not read", () => {
  const c = (x: Partial<FeedCloud>) => namesPingd({ hubs: [], cloud: cloud(x) }, own);
  assert.equal(c({}), true);
  assert.equal(c({ domain: 'PING.example.com.', path: '/rsscloud/pleaseNotify/' }), true);
  assert.equal(c({ path: '/RPC2', protocol: 'xml-rpc', registerProcedure: 'rssCloud.pleaseNotify' }), true);
  assert.equal(c({ path: '/rpc2', protocol: 'xml-rpc' }), true);
  assert.equal(c({ port: null }), true, 'no port: https-post says 443');
  assert.equal(c({ port: null, protocol: 'http-post' }), false, 'no port: http-post says 80');
  assert.equal(c({ port: 80 }), false);
  assert.equal(c({ domain: 'rpc.rsscloud.io' }), false);
  assert.equal(c({ path: '/rsscloud/ping' }), false, 'the ping path is not where readers register');
  assert.equal(c({ path: '/websub' }), false);
});

test('PUBLIC_URL unset: nothing names pingd', () => {
  assert.equal(ownEndpoints(undefined), null);
  assert.equal(namesPingd({ hubs: ['http://localhost:8080/websub'], cloud: cloud({ domain: 'localhost', port: 8080 }) }, null), false);
});

test('comparableUrl: only absolute http(s) URLs, lower-case origin, no default port, no trailing slash or fragment', () => {
  assert.equal(comparableUrl('HTTP://A.Example:80/x//#f'), 'http://a.example/x');
  assert.equal(comparableUrl('https://a.example'), 'https://a.example');
  assert.equal(comparableUrl('ftp://a.example/'), null);
  assert.equal(comparableUrl('/websub'), null);
});
