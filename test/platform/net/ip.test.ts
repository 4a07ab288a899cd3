import { test } from 'node:test';
import assert from 'node:assert/strict';
import { expandIPv6, inRange, parseCidr, parseCidrList, parseIp, slash64Key } from '../../../src/platform/net/ip.js';

const hex = (s: string) => {
  const ip = parseIp(s);
  return ip && `${ip.family}:${Buffer.from(ip.bytes).toString('hex')}`;
};

test('parseIp reads IPv4 and IPv6, with brackets, zone ids and dotted tails', () => {
  assert.equal(hex('203.0.113.9'), '4:cb007109');
  assert.equal(hex(' 10.0.0.1 '), '4:0a000001');
  assert.equal(hex('2001:db8::1'), '6:20010db8000000000000000000000001');
  assert.equal(hex('::'), '6:00000000000000000000000000000000');
  assert.equal(hex('[2001:DB8::1]'), '6:20010db8000000000000000000000001');
  assert.equal(hex('fe80::1%eth0'), '6:fe800000000000000000000000000001');
  assert.equal(hex('[fe80::1%25eth0]'), '6:fe800000000000000000000000000001');
  assert.equal(hex('::ffff:192.0.2.1'), '6:00000000000000000000ffffc0000201', 'IPv4-mapped stays IPv6');
  assert.equal(hex('64:ff9b::10.0.0.1'), '6:0064ff9b00000000000000000a000001');
  // ipaddr.js alone would read this as IPv4-mapped; it is IPv4-compatible.
  assert.equal(hex('::8.8.8.8'), '6:00000000000000000000000008080808');
});

test('parseIp accepts only what node:net accepts: no IPv4 shorthand, no garbage', () => {
  for (const s of [
    '1.2.3',
    '01.2.3.4',
    '0x7f.0.0.1',
    '127.1',
    '2130706433',
    '256.1.1.1',
    '::ffff:01.2.3.4',
    '1::2::3',
    '1:2:3:4:5:6:7:8:9',
    '12345::',
    '::g',
    'example.com',
    '',
    '[]',
    '[1.2.3.4',
    '1.2.3.4/32',
  ]) {
    assert.equal(parseIp(s), null, s);
  }
});

test('parseCidr reads prefixes and refuses bad ones', () => {
  assert.equal(parseCidr('10.0.0.0/8').prefix, 8);
  assert.equal(parseCidr('10.0.0.1').prefix, 32);
  assert.equal(parseCidr('::1').prefix, 128);
  assert.equal(parseCidr('fd00::/8').prefix, 8);
  assert.equal(parseCidr(' 0.0.0.0/0 ').text, '0.0.0.0/0');
  assert.throws(() => parseCidr('10.0.0.0/33'), /invalid prefix length/);
  assert.throws(() => parseCidr('::/129'), /invalid prefix length/);
  assert.throws(() => parseCidr('10.0.0.0/'), /invalid prefix length/);
  assert.throws(() => parseCidr('10.0.0.0/-1'), /invalid prefix length/);
  assert.throws(() => parseCidr('10.0.0.0/8/8'), /invalid prefix length/);
  assert.throws(() => parseCidr('10.0/8'), /not an IP address or CIDR range/);
  assert.throws(() => parseCidr('example.com'), /not an IP address or CIDR range/);
  assert.deepEqual(
    parseCidrList('10.1.0.0/16, fd00::/8  127.0.0.1').map((r) => r.text),
    ['10.1.0.0/16', 'fd00::/8', '127.0.0.1'],
  );
});

test('inRange compares the prefix bits of the same family', () => {
  const r = parseCidr('10.1.0.0/17');
  assert.equal(inRange(parseIp('10.1.127.255')!, r), true);
  assert.equal(inRange(parseIp('10.1.128.0')!, r), false);
  assert.equal(inRange(parseIp('::ffff:10.1.0.1')!, r), false, 'families never mix');
  assert.equal(inRange(parseIp('2001:db8:ffff::1')!, parseCidr('2001:db8::/32')), true);
  assert.equal(inRange(parseIp('1.2.3.4')!, parseCidr('0.0.0.0/0')), true);
});

test('slash64Key: IPv6 by its /64, everything else as is', () => {
  assert.equal(slash64Key('203.0.113.9'), '203.0.113.9');
  assert.equal(slash64Key('2001:db8:1:2::5'), '2001:db8:1:2::/64');
  assert.equal(slash64Key('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64');
  assert.equal(slash64Key('2001:db8::1'), '2001:db8:0:0::/64', 'never compressed');
  assert.equal(slash64Key('fe80::1%eth0'), 'fe80:0:0:0::/64');
  assert.equal(slash64Key('not an address'), 'not an address');
  assert.deepEqual(expandIPv6('::ffff:1.2.3.4'), ['0', '0', '0', '0', '0', 'ffff', '102', '304']);
  assert.equal(expandIPv6('1.2.3.4'), undefined);
});
