// canonicalAddress answers an already canonical IPv4 address without ipaddr.js (the hot path of every ping):
// that shortcut must agree with the full canonicalisation on every spelling, canonical or not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { canonicalAddress, isCanonicalIPv4 } from '../../../src/platform/net/ip.js';
import { clientKey } from '../../../src/intake/abuse/rate-limit.js';

test('isCanonicalIPv4: dotted decimal without leading zeros, four octets 0-255, nothing else', () => {
  for (const s of ['0.0.0.0', '1.2.3.4', '10.0.0.1', '127.0.0.50', '255.255.255.255', '192.168.100.200'])
    assert.equal(isCanonicalIPv4(s), true, s);
  for (const s of [
    '',
    '1.2.3',
    '1.2.3.4.',
    '.1.2.3',
    '1..2.3',
    '01.2.3.4',
    '1.2.3.04',
    '00.0.0.0',
    '256.1.1.1',
    '1.2.3.999',
    '1.2.3.4 ',
    ' 1.2.3.4',
    '1.2.3.4%eth0',
    '::1',
    '1.2.3.4/8',
    '1.2.3.1234',
    'a.b.c.d',
    '1.2.3.-4',
  ]) {
    assert.equal(isCanonicalIPv4(s), false, s);
  }
});

test('canonicalAddress with the IPv4 shortcut equals the full canonical form on many spellings', () => {
  const full = (s: string) => {
    let t = s.trim();
    if (t.startsWith('[') && t.endsWith(']')) t = t.slice(1, -1);
    t = t.replace(/%.*$/, '');
    return isIP(t) ? ipaddr.process(t).toString() : null;
  };
  const spellings = [
    '1.2.3.4',
    ' 1.2.3.4 ',
    '01.2.3.4',
    '1.2.3.4%x',
    '[1.2.3.4]',
    '::ffff:1.2.3.4',
    '::FFFF:10.0.0.1',
    '2001:DB8::1',
    '0.0.0.0',
    '255.255.255.255',
    '256.0.0.1',
    '1.2.3',
    'x',
  ];
  for (let i = 0; i < 2000; i++) spellings.push([0, 0, 0, 0].map(() => String(Math.floor(Math.random() * 300))).join('.'));
  for (const s of spellings) assert.equal(canonicalAddress(s), full(s), s);
});

test('clientKey: a canonical IPv4 is its own key; IPv6 by /64; anything else one shared key', () => {
  assert.equal(clientKey('203.0.113.9'), '203.0.113.9');
  assert.equal(clientKey('::ffff:203.0.113.9'), '203.0.113.9');
  assert.equal(clientKey('2001:db8:0:2::7'), '2001:db8:0:2::/64');
  assert.equal(clientKey('not an address'), 'unknown');
  assert.equal(clientKey(null), 'unknown');
});
