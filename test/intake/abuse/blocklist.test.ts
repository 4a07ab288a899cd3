import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import fc from 'fast-check';
import { parseBlocklist, globMatch, blocklistHost, plainAddress } from '../../../src/intake/abuse/blocklist.js';
import { BlocklistFile, BlocklistFileError } from '../../../src/intake/abuse/blocklist-file.js';
import { RateLimiter, clientKey } from '../../../src/intake/abuse/rate-limit.js';
import { expandIPv6 } from '../../../src/platform/net/ip.js';
import type { Blocklist } from '../../../src/intake/abuse/blocklist.js';
import { waitFor } from '../../helpers/wait.js';

const FILE = `# spam hosts
spam.example
host:*.casino.test          # a wildcard means the domain
https://Paste.Example.ORG/some/page
host:例え.jp
host:203.0.113.0/24
host:[2001:db8:bad::]/48
url:*/wp-content/uploads/*.exe
url:HTTP://*.blogspot.test/*cheap-pills*
name:*viagra*
name:buy * now
client:198.51.100.7
client:2001:db8:c0::/48

not a host name
client:999.1.1.1
host:10.0.0.0/33
`;

test('parse: every rule kind, comments, wildcards, URLs and IDN hosts; bad lines reported with their number', () => {
  const { list, problems } = parseBlocklist(FILE);
  assert.deepEqual(list.counts(), { host: 6, url: 2, name: 2, client: 2 });
  assert.deepEqual([...list.hosts.keys()].sort(), ['casino.test', 'paste.example.org', 'spam.example', 'xn--r8jz45g.jp']);
  assert.deepEqual(
    problems.map((p) => p.line),
    [15, 16, 17],
  );
  assert.match(problems[0].message, /^not a host name: "not a host name"$/);
  assert.match(problems[1].message, /^not an IP address or CIDR range/);
});

test('match: hosts and their subdomains only, never a suffix that is not a label boundary', () => {
  const { list } = parseBlocklist(FILE);
  const host = (url: string) => list.match({ urls: [url] })?.kind;
  assert.equal(host('http://spam.example/'), 'host');
  assert.equal(host('https://a.b.spam.example/x'), 'host');
  assert.equal(host('http://SPAM.example.:8080/'), 'host', 'a trailing dot and upper case do not slip past');
  assert.equal(host('http://notspam.example/'), undefined);
  assert.equal(host('http://spam.example.org/'), undefined);
  assert.equal(host('http://x.casino.test/'), 'host');
  assert.equal(host('http://casino.test/'), 'host');
  assert.equal(host('http://paste.example.org/other'), 'host', 'a URL rule line means its host');
  assert.equal(host(new URL('http://例え.jp/').href), 'host', 'IDN rules match punycode hosts');
  assert.equal(host('http://203.0.113.99/'), 'host');
  assert.equal(host('http://[2001:db8:bad:1::5]/'), 'host');
  assert.equal(host(new URL('http://[::ffff:203.0.113.5]/').href), 'host', 'IPv4-mapped IPv6 host');
  assert.equal(host('http://203.0.114.1/'), undefined);
});

test('match: URL and name patterns are whole-value, case-insensitive globs', () => {
  const { list } = parseBlocklist(FILE);
  assert.equal(list.match({ urls: ['http://ok.example.com/wp-content/uploads/2020/x.exe'] })?.kind, 'url');
  assert.equal(list.match({ urls: ['http://ok.example.com/wp-content/uploads/2020/x.exe.txt'] }), undefined);
  assert.equal(list.match({ urls: ['http://a.blogspot.test/2024/Cheap-Pills-here'] })?.kind, 'url');
  // Every URL of the ping is screened (changes and RSS URLs too).
  assert.equal(list.match({ urls: ['http://fine.example.com/', 'http://spam.example/feed'] })?.kind, 'host');
  assert.equal(list.match({ urls: ['http://fine.example.com/'], name: 'Cheap VIAGRA here' })?.rule, 'name:*viagra*');
  assert.equal(list.match({ urls: ['http://fine.example.com/'], name: 'Buy it now' })?.kind, 'name');
  assert.equal(list.match({ urls: ['http://fine.example.com/'], name: 'Buy it now please' }), undefined);
  assert.equal(list.match({ urls: ['http://fine.example.com/'], name: 'Fine' }), undefined);
});

test('match: client addresses and ranges, IPv4-mapped too', () => {
  const { list } = parseBlocklist(FILE);
  assert.equal(list.match({ clientAddr: '198.51.100.7', urls: [] })?.kind, 'client');
  assert.equal(list.match({ clientAddr: '::ffff:198.51.100.7', urls: [] })?.kind, 'client');
  assert.equal(list.match({ clientAddr: '2001:db8:c0:ffff::1', urls: [] })?.kind, 'client');
  assert.equal(list.match({ clientAddr: '198.51.100.8', urls: [] }), undefined);
  assert.equal(list.match({ clientAddr: 'garbage', urls: [] }), undefined);
});

test('globMatch agrees with a regular expression and stays fast on adversarial patterns', () => {
  const re = (p: string) =>
    new RegExp(
      `^${p
        .split('*')
        .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('[\\s\\S]*')}$`,
    );
  fc.assert(
    fc.property(fc.stringMatching(/^[ab*]{0,12}$/), fc.stringMatching(/^[ab]{0,20}$/), (p, s) => globMatch(p, s) === re(p).test(s)),
    { seed: 7, numRuns: 3000 },
  );
  // A pattern that makes a backtracking regex explode: this finishes because the matcher is O(p × t).
  assert.equal(globMatch('*a*a*a*a*a*a*a*a*a*a*a*b', 'a'.repeat(2048)), false);
});

test('blocklistHost and plainAddress', () => {
  assert.equal(blocklistHost('http://Example.COM.../x'), 'example.com');
  assert.equal(blocklistHost('http://[::1]:80/'), '::1');
  assert.equal(blocklistHost('not a url'), undefined);
  assert.equal(plainAddress('::ffff:10.1.2.3'), '10.1.2.3');
  assert.equal(plainAddress('0:0:0:0:0:ffff:10.1.2.3'), '10.1.2.3');
  assert.equal(plainAddress('2001:db8::1'), '2001:db8::1');
});

test('rate limiter: a token bucket per key, Retry-After until the next token, refills with time', () => {
  let now = 1_000_000;
  const rl = new RateLimiter(3, () => now);
  try {
    assert.deepEqual([rl.take('a'), rl.take('a'), rl.take('a')], [{ ok: true }, { ok: true }, { ok: true }]);
    assert.deepEqual(rl.take('a'), { ok: false, retryAfterSec: 20 });
    assert.deepEqual(rl.take('b'), { ok: true }, 'keys are independent');
    now += 10_000;
    assert.deepEqual(rl.take('a'), { ok: false, retryAfterSec: 10 });
    now += 10_000;
    assert.deepEqual(rl.take('a'), { ok: true });
    now += 120_000;
    rl.sweep();
    assert.equal(rl.tracked, 0, 'full buckets are forgotten');
  } finally {
    rl.close();
  }
});

test('rate limiter keys: IPv4 as is, IPv4-mapped as IPv4, IPv6 per /64', () => {
  assert.equal(clientKey('203.0.113.9'), '203.0.113.9');
  assert.equal(clientKey('::ffff:203.0.113.9'), '203.0.113.9');
  assert.equal(clientKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
  assert.equal(clientKey('2001:db8:1:2:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64');
  assert.notEqual(clientKey('2001:db8:1:3::1'), clientKey('2001:db8:1:2::1'));
  assert.equal(clientKey(undefined), 'unknown');
  assert.deepEqual(expandIPv6('::'), ['0', '0', '0', '0', '0', '0', '0', '0']);
  assert.deepEqual(expandIPv6('64:ff9b::10.0.0.1'), ['64', 'ff9b', '0', '0', '0', '0', 'a00', '1']);
  assert.equal(expandIPv6('1::2::3'), undefined);
  assert.equal(expandIPv6('1:2:3:4:5:6:7:8:9'), undefined);
});

test('blocklist file: loaded at start, reloaded on change (rewrite, replace by rename), kept when unreadable', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pingd-blocklist-'));
  const path = join(dir, 'blocklist.txt');
  writeFileSync(path, 'one.example\n');
  const loads: Blocklist[] = [];
  const failures: Error[] = [];
  const f = new BlocklistFile(path, { loaded: (l) => loads.push(l), failed: (e) => failures.push(e) }, 100);
  const until = (cond: () => boolean, what: string) => waitFor(cond, { what, timeoutMs: 5000, intervalMs: 50 });
  try {
    f.start();
    assert.equal(loads.length, 1);
    assert.ok(loads[0].hosts.has('one.example'));
    writeFileSync(path, 'one.example\ntwo.example\n');
    await until(() => loads.length === 2, 'reloaded after a rewrite');
    assert.ok(loads[1].hosts.has('two.example'));
    // Editors and deploy tools write a new file and rename it over the old one.
    writeFileSync(join(dir, 'next.txt'), 'three.example\n');
    renameSync(join(dir, 'next.txt'), path);
    await until(() => loads.length === 3, 'reloaded after a replace');
    assert.deepEqual([...loads[2].hosts.keys()], ['three.example']);
    rmSync(path);
    await until(() => failures.length === 1, 'a missing file is reported');
    assert.ok(failures[0] instanceof BlocklistFileError);
    assert.match(failures[0].message, /^cannot read BLOCKLIST_FILE .*blocklist\.txt: ENOENT/);
    assert.equal(loads.length, 3, 'the previous list stays in force');
    writeFileSync(path, 'four.example\n');
    await until(() => loads.length === 4, 'picked up again when the file returns');
  } finally {
    f.close();
    rmSync(dir, { recursive: true, force: true });
  }
  assert.throws(
    () => new BlocklistFile(join(dir, 'nope.txt'), { loaded() {}, failed() {} }).start(),
    (e: unknown) => e instanceof BlocklistFileError && /cannot read BLOCKLIST_FILE .*nope\.txt/.test((e as Error).message),
  );
});
