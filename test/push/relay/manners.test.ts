// The relay's manners and loop guards: a target's rate (RELAY_FILE's rate_per_min) as the target sees it,
// Retry-After on 503 and 429 honoured, pingd's own PUBLIC_URL left out of its targets, and two instances
// that list each other settling after one hop.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { freePort } from '../../faults/private-postgres.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';
import { targetStatus } from '../../../src/push/relay/target-repository.js';
import { derivedAll, httpPing, startBusyTarget, startTarget, type Target } from './helpers.js';
import { waitFor } from '../../helpers/wait.js';

const ALLOW = parseCidrList('127.0.0.0/8');
let dir: string;
let target: Target;
let busy503: Awaited<ReturnType<typeof startBusyTarget>>;
let busy429: Awaited<ReturnType<typeof startBusyTarget>>;
let t: TestApp;
let base: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'pingd-relay-'));
  target = await startTarget('127.0.0.46');
  busy503 = await startBusyTarget('127.0.0.47', 503, '3');
  busy429 = await startBusyTarget('127.0.0.48', 429, '3');
  const file = join(dir, 'relay.yaml');
  writeFileSync(
    file,
    `targets:\n  - url: ${target.url}\n    rate_per_min: 120\n  - url: ${busy503.url}\n  - url: ${busy429.url}\n  - url: http://127.0.0.49:9/RPC2\n    enabled: false\n`,
  );
  t = await startApp({ RELAY_FILE: file, RELAY_RATE_PER_MIN: 6000, FETCH_ALLOW_ADDRESSES: ALLOW, FETCH_TIMEOUT_MS: 2000 });
  Object.assign(t.app.relay.timing, { retryBaseMs: 100, retryMaxMs: 200, breakerAfter: 100, pollMs: 100, deriveGapMs: 20, flushMs: 20 });
  base = await t.listen();
});

after(async () => {
  await t?.close();
  await target?.close();
  await busy503?.close();
  await busy429?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('RELAY_FILE: per-target options, and a disabled target is not sent to', () => {
  assert.deepEqual(
    t.app.relay.targets.map((x) => [x.url, x.ratePerMin]),
    [
      [target.url, 120],
      [busy503.url, 6000],
      [busy429.url, 6000],
    ],
  );
});

test('the target sees relays no closer together than its rate allows (120 a minute: 500 ms)', async () => {
  // One relay first: relays keep their connection to the target (4 s idle), so only the first pays the
  // connect, which under CI load took ~170 ms and made the next arrival look 330 ms after it.
  const warm = uniqueUrl('rate-warm');
  assert.equal(await httpPing(base, 'Rate', warm), 200);
  await target.until((calls) => calls.some((c) => c.params[1] === warm), 10_000);
  const urls = Array.from({ length: 5 }, () => uniqueUrl('rate'));
  for (const u of urls) assert.equal(await httpPing(base, 'Rate', u), 200);
  await target.until((calls) => urls.every((u) => calls.some((c) => c.params[1] === u)), 10_000);
  const times = target.calls.filter((c) => urls.includes(c.params[1])).map((c) => c.t * 1000);
  // Requests leave at least 500 ms apart (REGRESSION: turns were kept only as handed out, so a request
  // that left late brought the next one closer: gaps of 205 ms on a busy machine). What the target
  // records also includes each request's own connect and hand-over time, which varies under load: one gap
  // of 346 ms beside longer ones on a slow CI machine (2026-11-29), so a single gap may lose 200 ms to that
  // jitter, still above the regression's 205 ms, and their sum holds the pace.
  const gaps = times.slice(1).map((x, i) => Math.round(x - times[i]));
  assert.ok(times[times.length - 1] - times[0] >= 4 * 500 - 150, `gaps ${gaps.join(', ')} ms`);
  assert.ok(
    gaps.every((g) => g >= 300),
    `gaps ${gaps.join(', ')} ms`,
  );
});

test('503 and 429 with Retry-After: 3 are not asked again for 3 seconds (though the retry backoff is 100 ms)', async () => {
  const n503 = busy503.hits.length;
  const n429 = busy429.hits.length;
  assert.equal(await httpPing(base, 'Busy', uniqueUrl('busy')), 200);
  await waitFor(() => busy503.hits.length >= n503 + 2 && busy429.hits.length >= n429 + 2, {
    timeoutMs: 10_000,
    what: 'a second attempt at both',
  });
  for (const hits of [busy503.hits, busy429.hits]) {
    // Requests already on their way when the answer came (the target's concurrency) arrive together;
    // none is sent in the 3 s after it (a margin for a late arrival: the embedded database shares this
    // thread). Without Retry-After the 100 ms backoff would bring one every few hundred milliseconds.
    const gaps = hits.slice(1).map((h, i) => h - hits[i]);
    assert.ok(
      gaps.every((g) => g < 300 || g >= 2500),
      `gaps ${gaps.join(', ')} ms`,
    );
    assert.ok(
      gaps.some((g) => g >= 2500),
      `gaps ${gaps.join(', ')} ms`,
    );
  }
  const of503 = async () => (await targetStatus(t.app.db, 100)).find((x) => x.url === busy503.url)!;
  // Outcomes are written in batches, a moment after the answers.
  await waitFor(async () => (await of503()).failed >= 2, { timeoutMs: 5000, what: 'the failures recorded' });
  assert.match((await of503()).lastError ?? '', /HTTP 503/);
});

test('two instances listing each other (and themselves) settle after one hop', async () => {
  const [pa, pb] = [await freePort(), await freePort()];
  const [ua, ub] = [`http://127.0.0.44:${pa}`, `http://127.0.0.45:${pb}`];
  const common = { FETCH_ALLOW_ADDRESSES: ALLOW, RELAY_RATE_PER_MIN: 6000, RELAY_TARGETS: [`${ua}/RPC2`, `${ub}/RPC2`] };
  const a = await startApp({ ...common, PUBLIC_URL: ua });
  const b = await startApp({ ...common, PUBLIC_URL: ub });
  try {
    for (const x of [a, b]) Object.assign(x.app.relay.timing, { pollMs: 100, deriveGapMs: 20, flushMs: 20 });
    await a.app.listen({ host: '127.0.0.44', port: pa });
    await b.app.listen({ host: '127.0.0.45', port: pb });
    assert.deepEqual(
      a.app.relay.targets.map((x) => x.url),
      [`${ub}/RPC2`],
      'its own PUBLIC_URL is left out',
    );
    const url = uniqueUrl('loop');
    assert.equal(await httpPing(ua, 'Loop', url), 200);
    const pingsOf = async (x: TestApp) =>
      x.app.db.query<{ user_agent: string | null }>('select user_agent from pings where url = $1', [url]);
    await waitFor(async () => (await pingsOf(b)).length === 1, { timeoutMs: 10_000, what: 'the relay at B' });
    assert.match((await pingsOf(b))[0].user_agent ?? '', /^pingd-relay\//);
    // Barrier: B has derived the relayed ping (its cursor is past it, committed with any job it made): a
    // relay back to A would be a job at B now. With none, nothing more reaches A.
    await derivedAll(b.app.db);
    const [jobsAtB] = await b.app.db.query<{ n: number }>('select count(*)::int as n from relay_jobs');
    assert.equal(Number(jobsAtB.n), 0, 'B queued no relay of it');
    assert.equal((await pingsOf(a)).length, 1, 'A got the ping once: B did not relay it back');
    assert.equal((await pingsOf(b)).length, 1);
  } finally {
    await a.close();
    await b.close();
  }
});
