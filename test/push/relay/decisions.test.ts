// The relay's pure decisions: which targets (RELAY_TARGETS, RELAY_FILE, never PUBLIC_URL), which call a
// ping becomes, text the npm xmlrpc serializer would throw on, and answers read through own properties only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isSelf, loadTargets, parseTargetFile } from '../../../src/push/relay/targets.js';
import { callFor, readAnswer, xmlText } from '../../../src/push/relay/sender.js';
import { ConfigError } from '../../../src/platform/config.js';

const base = { RELAY_FILE: undefined, RELAY_RATE_PER_MIN: 60, PUBLIC_URL: 'https://Ping.Example.com' };

test('PUBLIC_URL and its /RPC2 are pingd itself, whatever the spelling', () => {
  for (const u of [
    'https://ping.example.com',
    'https://ping.example.com/',
    'HTTPS://PING.example.com:443/RPC2',
    'https://ping.example.com/rpc2/',
  ])
    assert.equal(isSelf(u, 'https://ping.example.com'), true, u);
  for (const u of [
    'http://ping.example.com/RPC2',
    'https://ping.example.com:8443/RPC2',
    'https://other.example.com/RPC2',
    'https://ping.example.com/other',
  ])
    assert.equal(isSelf(u, 'https://ping.example.com'), false, u);
  assert.equal(isSelf('https://ping.example.com/', undefined), false);
});

test('RELAY_TARGETS and RELAY_FILE merge: the file wins for a URL, enabled: false removes one, self is left out', () => {
  const file = `targets:\n  - url: http://a.example/RPC2\n    rate_per_min: 5\n    method: ping\n  - http://c.example/\n  - url: http://b.example/\n    enabled: false\n`;
  const r = loadTargets(
    { ...base, RELAY_TARGETS: ['http://a.example/RPC2', 'http://b.example/', 'https://ping.example.com/RPC2'], RELAY_FILE: 'relay.yaml' },
    () => file,
  );
  assert.deepEqual(r.self, ['https://ping.example.com/RPC2']);
  assert.deepEqual(
    r.targets.map((t) => [t.url, t.method, t.ratePerMin, t.concurrency]),
    [
      ['http://a.example/RPC2', 'ping', 5, 2],
      ['http://c.example/', 'extendedPing', 60, 2],
    ],
  );
  // JSON is YAML too.
  assert.equal(parseTargetFile('[{"url": "http://j.example/"}]', 'f.json', { ratePerMin: 1 }).targets[0].url, 'http://j.example/');
});

test('a bad RELAY_FILE names the file and the entry', () => {
  for (const [text, msg] of [
    ['targets: [{url: "ftp://x"}]', /target 1: url must be an http\(s\) URL/],
    ['targets: [{url: "http://x/", method: "weblogUpdates.ping"}]', /method must be extendedPing or ping/],
    ['targets: [{url: "http://x/", rate_per_min: 0}]', /rate_per_min must be a whole number/],
    ['just text', /expected a list of targets/],
  ] as const) {
    assert.throws(
      () => parseTargetFile(text, 'relay.yaml', { ratePerMin: 60 }),
      (e: Error) => e instanceof ConfigError && /RELAY_FILE relay\.yaml/.test(e.message) && msg.test(e.message),
    );
  }
  assert.throws(() => loadTargets({ ...base, RELAY_TARGETS: [], RELAY_FILE: '/nonexistent/relay.yaml' }), /cannot be read: ENOENT/);
});

test('a ping with a feed becomes extendedPing (tags |-joined), without one ping; pingOnly forces ping', () => {
  const p = { name: 'N', url: 'http://b.example/', changesUrl: null, rssUrl: 'http://b.example/feed', tags: ['x', 'y'] };
  assert.deepEqual(callFor(p, false), {
    method: 'weblogUpdates.extendedPing',
    params: ['N', 'http://b.example/', 'http://b.example/', 'http://b.example/feed', 'x|y'],
  });
  assert.deepEqual(callFor(p, true), { method: 'weblogUpdates.ping', params: ['N', 'http://b.example/'] });
  assert.deepEqual(callFor({ ...p, rssUrl: null, name: '' }, false), {
    method: 'weblogUpdates.ping',
    params: ['http://b.example/', 'http://b.example/'],
  });
});

test('characters XML cannot carry are stripped before the serializer sees them', () => {
  assert.equal(xmlText('a\u0000b\u0008c\u000Bd\u001Fe\uFFFEf\uD800g\tok\n'), 'abcdefg\tok\n');
  assert.equal(xmlText('emoji \uD83D\uDE00 stays'), 'emoji \uD83D\uDE00 stays');
});

test('an answer is read through its own properties: a __proto__ member cannot supply flerror', () => {
  const hostile = Object.create({ flerror: true, message: 'from the prototype' }) as object;
  assert.deepEqual(readAnswer(hostile), { flerror: false, message: '' });
  assert.deepEqual(readAnswer({ flerror: true, message: 'Slow down.' }), { flerror: true, message: 'Slow down.' });
  assert.deepEqual(readAnswer({ flerror: false }), { flerror: false, message: '' });
  assert.deepEqual(readAnswer('ok'), { flerror: false, message: '' });
});
