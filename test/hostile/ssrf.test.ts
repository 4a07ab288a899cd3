// SSRF from the attacker's side: every spelling of a forbidden address a URL or a DNS answer can carry,
// against the outbound guard (src/fetch). A reference built on node:net's BlockList, independent of the
// guard's own parser, checks random addresses in every IPv6 embedding; literal hosts in their sneakiest
// spellings and hostile DNS answers go through SafeFetcher itself and must be refused before any connection.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BlockList } from 'node:net';
import fc from 'fast-check';
import { checkAddress, checkAddresses } from '../../src/platform/fetch/address-policy.js';
import { SafeFetcher, FetchError } from '../../src/platform/fetch/safe-fetch.js';
import { FUZZ_SEED, runs } from './generators.js';

// What the issue names, at least: loopback, private, link-local, CGNAT, multicast, cloud metadata,
// unspecified; IPv4 and IPv6.
const MUST_BLOCK_V4 = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '224.0.0.0/4',
  '240.0.0.0/4',
  '255.255.255.255/32',
  '192.0.0.0/24',
];
const MUST_BLOCK_V6 = ['::/128', '::1/128', 'fc00::/7', 'fe80::/10', 'fec0::/10', 'ff00::/8', '64:ff9b:1::/48'];

const ref4 = new BlockList();
for (const r of MUST_BLOCK_V4) {
  const [a, p] = r.split('/');
  ref4.addSubnet(a, Number(p), 'ipv4');
}
const ref6 = new BlockList();
for (const r of MUST_BLOCK_V6) {
  const [a, p] = r.split('/');
  ref6.addSubnet(a, Number(p), 'ipv6');
}

const v4bytes = (a: string) => a.split('.').map(Number);
const hex = (b: number[]) => [((b[0] << 8) | b[1]).toString(16), ((b[2] << 8) | b[3]).toString(16)];
/** The IPv6 spellings that carry an IPv4 address to the same destination. */
function embeddings(v4: string): string[] {
  const b = v4bytes(v4);
  const [hi, lo] = hex(b);
  const six = `${((b[0] << 8) | b[1]).toString(16).padStart(4, '0')}:${((b[2] << 8) | b[3]).toString(16).padStart(4, '0')}`;
  return [
    `::ffff:${v4}`, // IPv4-mapped, dotted
    `::ffff:${hi}:${lo}`, // IPv4-mapped, hex (what WHATWG URL writes)
    `0:0:0:0:0:FFFF:${v4}`, // uncompressed, upper case
    `::ffff:0:${hi}:${lo}`, // IPv4-translated (SIIT)
    `64:ff9b::${v4}`, // NAT64 well-known prefix
    `64:ff9b::${hi}:${lo}`,
    `2002:${six}::1`, // 6to4
  ];
}

test('every address the issue names is refused, in every IPv6 embedding, whatever the spelling (property, vs a BlockList reference)', (ctx) => {
  let blocked = 0;
  const n = runs(5000);
  // Mostly addresses inside the forbidden ranges, so that the property has something to bite on.
  const inRange = fc.constantFrom(...MUST_BLOCK_V4).chain((r) => {
    const [a, p] = r.split('/');
    const base = v4bytes(a).reduce((x, y) => x * 256 + y, 0);
    return fc.integer({ min: 0, max: 2 ** (32 - Number(p)) - 1 }).map((off) => {
      const n32 = base + off;
      return [n32 >>> 24, (n32 >>> 16) & 255, (n32 >>> 8) & 255, n32 & 255].join('.');
    });
  });
  fc.assert(
    fc.property(fc.oneof(inRange, fc.ipV4()), (v4) => {
      if (!ref4.check(v4, 'ipv4')) return;
      blocked++;
      assert.equal(checkAddress(v4).allowed, false, v4);
      for (const six of embeddings(v4)) assert.equal(checkAddress(six).allowed, false, `${six} (${v4})`);
    }),
    { seed: FUZZ_SEED, numRuns: n },
  );
  fc.assert(
    fc.property(
      fc.oneof(
        fc.ipV6(),
        fc.constantFrom(
          '::',
          '::1',
          'fe80::1%eth0',
          'FE80::1',
          'fc00::',
          'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
          'ff02::1',
          'fec0::1',
          'fd00:ec2::254',
          '0:0:0:0:0:0:0:1',
          '0000:0000:0000:0000:0000:0000:0000:0001',
        ),
      ),
      (v6) => {
        if (!ref6.check(v6.replace(/%.*$/, ''), 'ipv6')) return;
        blocked++;
        assert.equal(checkAddress(v6).allowed, false, v6);
      },
    ),
    { seed: FUZZ_SEED + 1, numRuns: n },
  );
  ctx.diagnostic(
    `${2 * n} addresses generated, ${blocked} in forbidden ranges, each also checked in ${embeddings('1.2.3.4').length} IPv6 embeddings`,
  );
});

test('range boundaries: first and last address inside are refused, the neighbours outside are allowed', () => {
  const cases: [string, boolean][] = [
    ['9.255.255.255', true],
    ['10.0.0.0', false],
    ['10.255.255.255', false],
    ['11.0.0.0', true],
    ['100.63.255.255', true],
    ['100.64.0.0', false],
    ['100.127.255.255', false],
    ['100.128.0.0', true],
    ['126.255.255.255', true],
    ['127.0.0.0', false],
    ['127.255.255.255', false],
    ['128.0.0.0', true],
    ['169.253.255.255', true],
    ['169.254.0.0', false],
    ['169.254.255.255', false],
    ['169.255.0.0', true],
    ['172.15.255.255', true],
    ['172.16.0.0', false],
    ['172.31.255.255', false],
    ['172.32.0.0', true],
    ['192.167.255.255', true],
    ['192.168.0.0', false],
    ['192.168.255.255', false],
    ['192.169.0.0', true],
    ['223.255.255.255', true],
    ['224.0.0.0', false],
    ['239.255.255.255', false],
    ['0.255.255.255', false],
    ['1.0.0.0', true],
    ['fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true],
    ['fc00::', false],
    ['fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', false],
    ['fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true],
    ['fe80::', false],
    ['febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', false],
    ['feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', false],
    ['ff00::', false],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', false],
    ['::2', false],
    ['::ffff:9.255.255.255', true],
    ['::ffff:10.0.0.0', false],
    ['64:ff9b::a00:0', false],
    ['64:ff9b::909:909', true],
    ['2002:0a00:0000::', false],
    ['2002:0909:0909::', true],
  ];
  for (const [ip, allowed] of cases) assert.equal(checkAddress(ip).allowed, allowed, ip);
});

test('cloud metadata endpoints, IPv4 and IPv6, in every spelling', () => {
  for (const a of [
    '169.254.169.254',
    '::ffff:169.254.169.254',
    '::ffff:a9fe:a9fe',
    '64:ff9b::a9fe:a9fe',
    '2002:a9fe:a9fe::',
    'fd00:ec2::254',
    'FD00:EC2:0:0:0:0:0:254',
    '169.254.170.2',
    '100.100.100.200',
  ]) {
    assert.equal(checkAddress(a).allowed, false, a);
  }
});

test('a DNS answer is judged whole: one forbidden record among public ones refuses the host', () => {
  fc.assert(
    fc.property(
      fc.array(fc.constantFrom('93.184.216.34', '2606:4700::1111', '8.8.8.8'), { maxLength: 4 }),
      fc.constantFrom('127.0.0.1', '::1', '10.1.1.1', '::ffff:192.168.0.1', 'fe80::1', '169.254.169.254'),
      fc.nat(),
      (pub, bad, at) => {
        const list: string[] = [...pub];
        list.splice(at % (list.length + 1), 0, bad);
        assert.equal(checkAddresses(list).allowed, false, list.join(','));
      },
    ),
    { seed: FUZZ_SEED + 2, numRuns: runs(500) },
  );
});

test('SafeFetcher refuses sneaky literal hosts and hostile DNS answers before connecting anywhere', async () => {
  const resolved: string[] = [];
  const dnsAnswers: Record<string, string[]> = {
    'localtest.example': ['127.0.0.1'],
    'rebind.example': ['93.184.216.34', '127.0.0.1'],
    'metadata.example': ['169.254.169.254'],
    'v6local.example': ['::1'],
    'mapped.example': ['::ffff:10.0.0.1'],
    'nat64.example': ['64:ff9b::7f00:1'],
    'ula.example': ['fd12:3456::1'],
    'cgnat.example': ['100.64.1.1'],
    'multicast.example': ['224.0.0.1'],
    'zero.example': ['0.0.0.0'],
  };
  const fetcher = new SafeFetcher({
    userAgent: 'pingd-test',
    timeoutMs: 2000,
    lookup: async (host) => {
      resolved.push(host);
      const a = dnsAnswers[host];
      if (!a) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
      return a;
    },
  });
  const literals = [
    'http://127.0.0.1/',
    'http://127.1/',
    'http://0x7f.0.0.1/',
    'http://0177.0.0.1/',
    'http://2130706433/',
    'http://0x7f000001/',
    'http://[::1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[0:0:0:0:0:ffff:7f00:1]/',
    'http://[::ffff:a9fe:a9fe]/latest/meta-data/',
    'http://169.254.169.254/latest/meta-data/',
    'http://[fd00:ec2::254]/',
    'http://0.0.0.0:8080/',
    'http://[::]/',
    'http://10.0.0.1./',
    'http://[fe80::1%25eth0]/',
    'http://192.168.1.1:22/',
    'http://100.64.0.1/',
    'http://[64:ff9b::a00:1]/',
    'http://[2002:7f00:1::]/',
    'https://127.0.0.1:443/',
    'http://①②⑦.0.0.1/',
  ];
  for (const url of literals) {
    await assert.rejects(
      fetcher.get(url),
      (e: unknown) => e instanceof FetchError && (e.code === 'FETCH_ADDRESS_BLOCKED' || e.code === 'FETCH_URL_INVALID'),
      url,
    );
  }
  assert.deepEqual(resolved, [], 'literal addresses are checked as they are, never looked up');
  for (const host of Object.keys(dnsAnswers)) {
    await assert.rejects(
      fetcher.get(`http://${host}/feed`),
      (e: unknown) => e instanceof FetchError && e.code === 'FETCH_ADDRESS_BLOCKED' && e.message.includes(host),
      host,
    );
  }
});
