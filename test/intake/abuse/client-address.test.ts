// What a client can put in X-Forwarded-For costs bounded memory and is never stored as is: the rate limit
// counts parsed addresses (anything else shares one bucket), and only a parsed address is kept with a ping.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { canonicalAddress } from '../../../src/platform/net/ip.js';
import { clientKey } from '../../../src/intake/abuse/rate-limit.js';

let t: TestApp;
after(async () => t?.close());

test('unique 15 kB X-Forwarded-For values are one rate-limit key, not one each (REGRESSION: 100k of them took 3.4 GB)', async () => {
  t = await startApp({ TRUST_PROXY: 1, RATE_LIMIT_PER_IP: 5, PING_MIN_INTERVAL: 0 });
  const statuses: number[] = [];
  for (let i = 0; i < 30; i++) {
    const r = await t.app.inject({
      method: 'GET',
      url: `/ping?name=X&url=${encodeURIComponent(uniqueUrl('xff'))}`,
      headers: { 'x-forwarded-for': `${i}-${'z'.repeat(15_000)}` },
    });
    statuses.push(r.statusCode);
  }
  assert.equal(statuses.filter((s) => s === 200).length, 5, 'the shared bucket allows 5 a minute');
  assert.equal(statuses.filter((s) => s === 429).length, 25);
  const m = await t.app.inject({ method: 'GET', url: '/metrics' });
  assert.match(m.body, /^pingd_rate_limit_tracked_addresses 1$/m);
  const stored = await t.app.db.query<{ client_addr: string | null }>(
    "select distinct client_addr from pings where url like 'http://xff-%'",
  );
  assert.deepEqual(stored, [{ client_addr: null }], 'no header text is stored as a client address');
});

test('addresses are counted and stored in one canonical form', async () => {
  assert.equal(canonicalAddress('::ffff:192.0.2.1'), '192.0.2.1');
  assert.equal(canonicalAddress('[2001:DB8::0001]'), '2001:db8::1');
  assert.equal(canonicalAddress('fe80::1%eth0'), 'fe80::1');
  assert.equal(canonicalAddress('192.0.2.1, 10.0.0.1'), null);
  assert.equal(canonicalAddress('0x7f.1'), null);
  assert.equal(canonicalAddress('x'.repeat(100)), null);
  assert.equal(clientKey('2001:db8:0:2:aaaa::1'), clientKey('2001:DB8:0:2::ffff'));
  assert.equal(clientKey('not an address'), 'unknown');
});

test('behind one proxy the client is the address that proxy appended, not what the client wrote (REGRESSION: TRUST_PROXY=true believed the leftmost entry; 20 of 20 spoofed pings passed a limit of 5)', async () => {
  // `t` (from the first test) trusts one hop.
  const listed = await startApp({ TRUST_PROXY: ['127.0.0.0/8'], RATE_LIMIT_PER_IP: 5, PING_MIN_INTERVAL: 0 });
  try {
    for (const app of [t, listed]) {
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) {
        // The client wrote "198.51.100.<i>"; the proxy (the socket's peer, 127.0.0.1) appended what it saw.
        const r = await app.app.inject({
          method: 'GET',
          url: `/ping?name=X&url=${encodeURIComponent(uniqueUrl('spoof'))}`,
          headers: { 'x-forwarded-for': `198.51.100.${i}, 203.0.113.7` },
        });
        statuses.push(r.statusCode);
      }
      assert.equal(statuses.filter((s) => s === 200).length, 5);
      const [row] = await app.app.db.query<{ client_addr: string }>(
        "select distinct client_addr from pings where url like 'http://spoof-%'",
      );
      assert.equal(row.client_addr, '203.0.113.7');
    }
  } finally {
    await listed.close();
  }
});
