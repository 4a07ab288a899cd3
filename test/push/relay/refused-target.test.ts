// Regression: a relay target the address policy refuses (a loopback or intranet ping server, which the
// relay reference itself suggests relaying to) failed each relay with an info line that did not name
// FETCH_ALLOW_ADDRESSES, and nothing warned at start.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildApp } from '../../../src/app.js';
import { refusedTargets } from '../../../src/push/relay/plugin.js';
import { DEFAULT_POLICY, type AddressPolicy } from '../../../src/platform/fetch/address-policy.js';
import { SafeFetcher } from '../../../src/platform/fetch/safe-fetch.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';
import { createTestDatabase, testConfig } from '../../helpers/app.js';

test('refusedTargets: literal and resolved addresses the policy refuses, each with its range', async () => {
  const lookup = async (host: string) =>
    host === 'intranet.example' ? ['10.1.2.3'] : host === 'public.example' ? ['93.184.216.34'] : Promise.reject(new Error('ENOTFOUND'));
  // The fetcher's own lookup and policy (the ones every relay goes through), no traffic.
  const fetcher = (policy: AddressPolicy) => new SafeFetcher({ policy, lookup, userAgent: 'test', timeoutMs: 1000 });
  const urls = ['http://127.0.0.1:8080/RPC2', 'http://intranet.example/RPC2', 'http://public.example/RPC2', 'http://nowhere.example/RPC2'];
  assert.deepEqual(await refusedTargets(urls, fetcher(DEFAULT_POLICY)), [
    { url: 'http://127.0.0.1:8080/RPC2', address: '127.0.0.1', range: 'loopback' },
    { url: 'http://intranet.example/RPC2', address: '10.1.2.3', range: 'private' },
  ]);
  assert.deepEqual(await refusedTargets(urls, fetcher({ allowPrivate: false, allow: parseCidrList('127.0.0.1,10.0.0.0/8') })), []);
});

test('a refused relay target is warned about at start, naming FETCH_ALLOW_ADDRESSES', async () => {
  const tdb = await createTestDatabase({ migrated: true });
  const lines: { level: number; msg: string; target?: string }[] = [];
  let seen: () => void = () => undefined;
  const warned = new Promise<void>((r) => (seen = r));
  const stream = {
    write(chunk: string) {
      for (const l of chunk.split('\n')) {
        if (!l.trim()) continue;
        const line = JSON.parse(l);
        lines.push(line);
        if (typeof line.msg === 'string' && line.msg.startsWith('relay: target')) seen();
      }
    },
  };
  const app = await buildApp({
    config: testConfig(tdb, { LOG_LEVEL: 'warn', RELAY_TARGETS: ['http://127.0.0.1:9/RPC2'], FETCH_ALLOW_PRIVATE: false }),
    logStream: stream,
  });
  try {
    await app.ready();
    await warned;
    const w = lines.find((l) => l.msg.startsWith('relay: target'));
    assert.equal(w?.level, 40);
    assert.equal(
      w?.msg,
      'relay: target http://127.0.0.1:9/RPC2 is at 127.0.0.1 (loopback), which the address policy refuses: every relay to it fails until FETCH_ALLOW_ADDRESSES includes it (e.g. FETCH_ALLOW_ADDRESSES=127.0.0.1)',
    );
  } finally {
    await app.close();
    await tdb.drop();
  }
});
