import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkAddress, checkAddresses, classifyAddress, DEFAULT_POLICY } from '../../../src/platform/fetch/address-policy.js';
import { parseCidr, parseCidrList, parseIp } from '../../../src/platform/net/ip.js';

test('parseIp reads IPv4, IPv6 with ::, brackets, zones and dotted tails', () => {
  const hex = (s: string) => Buffer.from(parseIp(s)!.bytes).toString('hex');
  assert.equal(hex('192.168.1.20'), 'c0a80114');
  assert.equal(hex('::1'), '00000000000000000000000000000001');
  assert.equal(hex('[fe80::1%eth0]'), 'fe800000000000000000000000000001');
  assert.equal(hex('::ffff:127.0.0.1'), '00000000000000000000ffff7f000001');
  assert.equal(hex('2001:db8:0:0:1:0:0:1'), '20010db8000000000001000000000001');
  assert.equal(parseIp('example.com'), null);
  assert.equal(parseIp('1.2.3'), null);
  assert.equal(parseIp('::g'), null);
});

test('every special-purpose IPv4 range is named', () => {
  const cases: [string, string][] = [
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['10.20.30.40', 'private'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['100.127.255.254', 'carrier-grade NAT'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['169.254.1.1', 'link-local'],
    ['169.254.169.254', 'cloud metadata'],
    ['100.100.100.200', 'cloud metadata'],
    ['168.63.129.16', 'cloud metadata'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.0.0.192', 'reserved'],
    ['192.0.2.1', 'documentation'],
    ['192.168.0.1', 'private'],
    ['198.18.0.1', 'reserved'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.9', 'documentation'],
    ['224.0.0.251', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
  ];
  for (const [ip, range] of cases) assert.equal(classifyAddress(ip), range, ip);
});

test('ordinary public addresses, including neighbours of blocked ranges, are allowed', () => {
  for (const ip of [
    '8.8.8.8',
    '1.1.1.1',
    '172.15.255.255',
    '172.32.0.0',
    '100.63.255.255',
    '100.128.0.0',
    '169.253.255.255',
    '11.0.0.0',
    '223.255.255.255',
    '2606:4700:4700::1111',
    '2001:4860:4860::8888',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
  ]) {
    assert.equal(classifyAddress(ip), null, ip);
    assert.deepEqual(checkAddress(ip), { allowed: true }, ip);
  }
});

test('every special-purpose IPv6 range is named, and embedded IPv4 is judged by its own range', () => {
  const cases: [string, string][] = [
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
    ['::ffff:7f00:1', 'IPv4-mapped loopback'],
    ['::ffff:10.0.0.1', 'IPv4-mapped private'],
    ['::ffff:169.254.169.254', 'IPv4-mapped cloud metadata'],
    ['::ffff:0:a00:1', 'IPv4-translated private'],
    ['::127.0.0.1', 'IPv4-compatible (deprecated)'],
    ['64:ff9b::7f00:1', 'NAT64 loopback'],
    ['64:ff9b:1::1', 'reserved'],
    ['2002:c0a8:0101::1', '6to4 private'],
    ['2001:db8::1', 'documentation'],
    ['2001::1', 'reserved'],
    ['fc00::1', 'unique local'],
    ['fd12:3456::1', 'unique local'],
    ['fd00:ec2::254', 'cloud metadata'],
    ['fe80::1', 'link-local'],
    ['febf::1', 'link-local'],
    ['fec0::1', 'site-local'],
    ['ff02::1', 'multicast'],
  ];
  for (const [ip, range] of cases) assert.equal(classifyAddress(ip), range, ip);
});

test('checkAddress refuses by default, FETCH_ALLOW_PRIVATE allows all, an allowlist allows exactly its ranges', () => {
  assert.deepEqual(checkAddress('127.0.0.1', DEFAULT_POLICY), { allowed: false, range: 'loopback' });
  assert.deepEqual(checkAddress('not-an-ip', DEFAULT_POLICY), { allowed: false, range: 'not an IP address' });
  assert.deepEqual(checkAddress('10.0.0.1', { allowPrivate: true, allow: [] }), { allowed: true });
  const one = { allowPrivate: false, allow: parseCidrList('127.0.0.1') };
  assert.deepEqual(checkAddress('127.0.0.1', one), { allowed: true });
  assert.deepEqual(checkAddress('::ffff:127.0.0.1', one), { allowed: true }, 'the mapped form of an allowed address');
  assert.deepEqual(checkAddress('127.0.0.2', one), { allowed: false, range: 'loopback' });
  assert.deepEqual(checkAddress('::1', one), { allowed: false, range: 'loopback' });
  const net = { allowPrivate: false, allow: parseCidrList('10.1.0.0/16, fd00::/8') };
  assert.deepEqual(checkAddress('10.1.200.3', net), { allowed: true });
  assert.deepEqual(checkAddress('10.2.0.1', net), { allowed: false, range: 'private' });
  assert.deepEqual(checkAddress('fd00::5', net), { allowed: true });
  assert.deepEqual(checkAddress('fc00::5', net), { allowed: false, range: 'unique local' });
});

test('the redirect hop decision: a name whose addresses include one private address is refused whole', () => {
  // What the client decides for a redirect target after resolving it (the first hop was allowed).
  const policy = { allowPrivate: false, allow: parseCidrList('127.0.0.1') };
  assert.deepEqual(checkAddresses(['127.0.0.1'], policy), { allowed: true });
  assert.deepEqual(checkAddresses(['10.0.0.7'], policy), { allowed: false, address: '10.0.0.7', range: 'private' });
  assert.deepEqual(checkAddresses(['93.184.216.34', '192.168.1.1'], policy), { allowed: false, address: '192.168.1.1', range: 'private' });
  assert.deepEqual(checkAddresses(['2606:2800:220:1:248:1893:25c8:1946', '::ffff:169.254.169.254'], policy), {
    allowed: false,
    address: '::ffff:169.254.169.254',
    range: 'IPv4-mapped cloud metadata',
  });
  assert.deepEqual(checkAddresses([], policy), { allowed: false, address: '', range: 'no address' });
});

test('parseCidr validates prefixes', () => {
  assert.equal(parseCidr('10.0.0.0/8').prefix, 8);
  assert.equal(parseCidr('::1').prefix, 128);
  assert.throws(() => parseCidr('10.0.0.0/33'), /invalid prefix length/);
  assert.throws(() => parseCidr('example.com'), /not an IP address or CIDR range/);
  assert.deepEqual(parseCidrList(' ,  '), []);
});
