// The hub's pure decisions: which topics are ours, the lease granted, the callback URL with the hub.*
// parameters, the hub link, the signature (against an HMAC computed here), what an echo means, and the
// retry schedule.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { grantedLease, hubBase, parseSubscriptionRequest, topicPath, withParams } from '../../../src/push/websub/request.js';
import { websubLinks } from '../../../src/platform/public-url.js';
import { signature } from '../../../src/push/websub/signature.js';
import { DEFAULT_TIMING, judgeEcho, retryDelayMs } from '../../../src/push/websub/outcomes.js';

const PATHS = ['/changes.xml', '/shortChanges.xml', '/updates.xml'];

test('a topic is ours when it is exactly base + a document path (case of the host and default ports aside)', () => {
  assert.deepEqual(topicPath('http://ping.example/changes.xml', 'http://ping.example', PATHS), { ok: true, path: '/changes.xml' });
  assert.deepEqual(topicPath('HTTP://Ping.Example:80/updates.xml', 'http://ping.example', PATHS), { ok: true, path: '/updates.xml' });
  assert.deepEqual(topicPath('https://h.example/pingd/shortChanges.xml', 'https://h.example/pingd', PATHS), {
    ok: true,
    path: '/shortChanges.xml',
  });
  for (const other of [
    'https://ping.example/changes.xml',
    'http://ping.example:8080/changes.xml',
    'http://ping.example/changes.xml?since=1',
    'http://ping.example/changes.xml#x',
    'http://ping.example/Changes.xml',
    'http://ping.example/pingd/changes.xml',
  ]) {
    const r = topicPath(other, 'http://ping.example', PATHS);
    assert.equal(r.ok, false, other);
  }
  assert.deepEqual(topicPath('http://x.example/a', 'http://ping.example', ['/a.xml']), {
    ok: false,
    reason: 'not a topic of this hub; the topics are http://ping.example/a.xml',
  });
});

test('the lease granted is the one asked for within the bounds, else the default', () => {
  const b = { min: 3600, max: 86400, default: 7200 };
  assert.equal(grantedLease(undefined, b), 7200);
  assert.equal(grantedLease(1, b), 3600);
  assert.equal(grantedLease(5000, b), 5000);
  assert.equal(grantedLease(1e30, b), 86400);
});

test('the parsed request keeps the normalised callback and topic', () => {
  const r = parseSubscriptionRequest({
    'hub.callback': ' HTTP://Sub.Example/cb?a=1 ',
    'hub.mode': 'subscribe',
    'hub.topic': 'http://PING.example/changes.xml',
    'hub.lease_seconds': '007',
    'hub.secret': '',
  });
  assert.deepEqual(r, {
    ok: true,
    request: {
      callback: 'http://sub.example/cb?a=1',
      mode: 'subscribe',
      topic: 'http://ping.example/changes.xml',
      leaseSeconds: 7,
      secret: undefined,
    },
  });
});

test('hub.* parameters are added to the callback without touching its own query', () => {
  const p = { 'hub.mode': 'subscribe', 'hub.topic': 'http://ping.example/changes.xml?x=1&y' };
  assert.equal(
    withParams('http://s.example/cb', p),
    'http://s.example/cb?hub.mode=subscribe&hub.topic=http%3A%2F%2Fping.example%2Fchanges.xml%3Fx%3D1%26y',
  );
  assert.equal(withParams('http://s.example/cb?t=a%2Bb+c', { 'hub.mode': 'denied' }), 'http://s.example/cb?t=a%2Bb+c&hub.mode=denied');
  assert.equal(withParams('http://s.example/cb?', { 'hub.mode': 'denied' }), 'http://s.example/cb?hub.mode=denied');
  assert.equal(withParams('http://s.example/cb?a=1&', { 'hub.mode': 'denied' }), 'http://s.example/cb?a=1&hub.mode=denied');
});

test("the hub link: under PUBLIC_URL (its path included), else at the topic's origin", () => {
  assert.equal(
    websubLinks(hubBase('https://h.example/pingd', 'http://other/changes.xml'), 'http://other/changes.xml'),
    '<https://h.example/pingd/websub>; rel="hub", <http://other/changes.xml>; rel="self"',
  );
  assert.equal(
    websubLinks(hubBase(undefined, 'http://127.0.0.1:8080/changes.xml'), 'http://127.0.0.1:8080/changes.xml'),
    '<http://127.0.0.1:8080/websub>; rel="hub", <http://127.0.0.1:8080/changes.xml>; rel="self"',
  );
  assert.equal(websubLinks('http://h', 'http://h/changes.xml'), '<http://h/websub>; rel="hub", <http://h/changes.xml>; rel="self"');
});

test('X-Hub-Signature is sha256= and the hex HMAC of the exact bytes', () => {
  const body = Buffer.from([0x3c, 0x78, 0x3e, 0xc3, 0xa9, 0x00, 0xff]);
  assert.equal(signature('s3cret', body), `sha256=${createHmac('sha256', 's3cret').update(body).digest('hex')}`);
  // A published test vector (RFC 4231 test case 2): key "Jefe", "what do ya want for nothing?".
  assert.equal(
    signature('Jefe', Buffer.from('what do ya want for nothing?')),
    'sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
  );
});

test('only a 2xx echoing the challenge exactly confirms; 5xx and 429 are asked again', () => {
  assert.equal(judgeEcho(200, Buffer.from('abc'), 'abc'), 'confirmed');
  assert.equal(judgeEcho(204, Buffer.from('abc'), 'abc'), 'confirmed');
  assert.equal(judgeEcho(200, Buffer.from('abc\n'), 'abc'), 'not_confirmed');
  assert.equal(judgeEcho(200, Buffer.from(''), 'abc'), 'not_confirmed');
  assert.equal(judgeEcho(404, Buffer.from('abc'), 'abc'), 'not_confirmed');
  assert.equal(judgeEcho(301, Buffer.from('abc'), 'abc'), 'not_confirmed');
  assert.equal(judgeEcho(503, Buffer.from('abc'), 'abc'), 'retry');
  assert.equal(judgeEcho(429, Buffer.from(''), 'abc'), 'retry');
});

test('the retry schedule: 1 min doubling, then hourly from the sixth failure', () => {
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 30].map((f) => retryDelayMs(f, DEFAULT_TIMING) / 60_000),
    [1, 2, 4, 8, 16, 60, 60, 60],
  );
});
