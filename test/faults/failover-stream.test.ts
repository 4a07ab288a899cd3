// Two /stream clients follow the stream while the primary crashes (`pg_ctl stop -m immediate`) and the
// standby is promoted, pingd on a multi-host DATABASE_URL and never restarted, pings sent before, during
// and after. One keeps its connection throughout; the other's connection drops right after the crash (a
// proxy restarted, a network blip), so it reconnects in the gap (asked to come back later), then after the
// promotion with its Last-Event-ID, as an EventSource does. Checked, for each: every ping acknowledged and
// on the promoted server arrives exactly once (counting all its connections), ids only go up (no
// duplicate, no reordering), and no reset frame (the server never read the client's position as unknown).
// The promoted server's sequence may skip up to 32 values (sequences log 32 ahead; a crash or promotion
// resumes after the logged value): ids jump there, and neither the live read nor the replay may stall on
// the jump or take it for lost events. Once with a synchronous standby (every acknowledged ping is on it),
// once asynchronous with the standby's WAL late, so that it lacks pings both clients were already sent:
// every ping acknowledged after the promotion must still reach them (the positions were raised past those
// ids; a client resuming from a lost ping's id before anything newer is stored may be told `reset`
// `unknown`). Issue 41, item 4.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startApp, uniqueUrl, type TestApp } from '../helpers/app.js';
import { followStream, dataOf, type StreamFollower } from '../helpers/sse-client.js';
import { waitFor } from '../helpers/wait.js';
import { replicatedPairSkip, startReplicatedPair, type ReplicatedPair } from './private-postgres.js';
import { load, ping } from './failover-load.js';

const DB_TIMEOUT_MS = 5000;

const pairs: ReplicatedPair[] = [];
const apps: TestApp[] = [];
const followers: StreamFollower[] = [];
after(async () => {
  for (const f of followers) f.close();
  for (const t of apps) await t.close().catch(() => {});
  for (const p of pairs) await p.destroy();
});

interface PingData {
  id: number;
  url: string;
}

/** What one client received, against what was acknowledged. */
function received(f: StreamFollower, acked: readonly string[]) {
  const events = f.events();
  const pings = dataOf<PingData>(events, 'ping');
  const ids = events.filter((e) => e.event === 'ping').map((e) => Number(e.id));
  const times = new Map<string, number>();
  for (const p of pings) times.set(p.url, (times.get(p.url) ?? 0) + 1);
  const missing = acked.filter((u) => !times.has(u));
  const twice = [...times].filter(([, n]) => n > 1).map(([u]) => u);
  const outOfOrder = ids.filter((id, i) => i > 0 && id <= ids[i - 1]);
  let jump = 0;
  for (let i = 1; i < ids.length; i++) jump = Math.max(jump, ids[i] - ids[i - 1]);
  return {
    pings,
    missing,
    twice,
    outOfOrder,
    jump,
    resets: events.filter((e) => e.event === 'reset'),
    refusals: events.filter((e) => e.event === 'refused').length,
    connections: f.connections.length,
  };
}

/** What a case checks against: the pings the promoted server has (asynchronous: not every acknowledged one). */
interface Case {
  synchronous: boolean;
  /** The standby's WAL this much late (private-postgres.ts linkDelayMs): what is on its way at the crash is lost. */
  linkDelayMs?: number;
}

async function failoverStream(ctx: { diagnostic(s: string): void }, c: Case): Promise<void> {
  const pair = await startReplicatedPair({ synchronous: c.synchronous, linkDelayMs: c.linkDelayMs });
  pairs.push(pair);
  const url = `postgres://postgres@127.0.0.1:${pair.primary.port},127.0.0.1:${pair.standby.port}/postgres?target_session_attrs=read-write&connect_timeout=2`;
  // STREAM_RETRY_MS 500: the dropped client comes back within the gap.
  const t = await startApp(
    { DB_TIMEOUT_MS, DB_POOL_MAX: 4, STREAM_RETRY_MS: 500 },
    { config: { DATABASE_URL: url }, drop: async () => {} },
  );
  apps.push(t);
  const base = await t.listen();
  // Both answered before the first ping: each starts at "now", so every ping acknowledged after is theirs.
  const steady = await followStream(`${base}/stream?types=ping`);
  const dropped = await followStream(`${base}/stream?types=ping`);
  followers.push(steady, dropped);
  assert.equal(steady.connections[0]?.status, 200);
  assert.equal(dropped.connections[0]?.status, 200);
  // The schema on the standby before any ping: a late standby crashed right after the migrations would
  // lack tables, not only pings.
  await pair.replayed();

  const l = load(base, 4, 'stream-failover');
  try {
    await waitFor(() => l.acked() >= 40 && steady.events().length >= 20 && dropped.events().length >= 20, {
      what: () =>
        `40 pings acknowledged and streamed before the crash (${l.acked()}, ${steady.events().length}, ${dropped.events().length})`,
    });
    // A late standby has some of them: it lacks only the last ones, as after a real crash.
    if (c.linkDelayMs) {
      await waitFor(async () => (await pair.standby.query<{ n: number }>('select count(*)::int as n from pings'))[0].n > 0, {
        what: 'the standby to have received pings',
      });
      // The case this test is for, before the crash: the clients were sent pings the late standby lacks. On a
      // loaded CI machine the load pinged so slowly that the late WAL had caught up (44 pings before the
      // crash, none lost), where a quiet run lost 191 of 210.
      await waitFor(
        async () => {
          const [r] = await pair.standby.query<{ id: number }>('select coalesce(max(id), 0)::int as id from pings');
          const sent = steady.events().filter((e) => e.event === 'ping');
          return sent.length > 0 && Number(sent.at(-1)!.id) > Number(r.id) + 2;
        },
        { what: 'the steady client to be sent pings the late standby lacks' },
      );
    }
    const before = l.sent.length;

    await pair.primary.crash();
    const crashed = performance.now();
    // The highest id the steady client was sent by the old primary (its last ones may be lost, asynchronously).
    const sentBeforeCrash = Math.max(
      ...steady
        .events()
        .filter((e) => e.event === 'ping')
        .map((e) => Number(e.id)),
    );
    dropped.drop();
    await waitFor(() => l.sent.some((s) => s.start > crashed && s.flerror === true), { what: 'a ping refused after the crash' });
    // The dropped client's reconnection in the gap is asked to come back later (a 200 stream ending with
    // retry: and `event: refused`); its Last-Event-ID stays what it was.
    await waitFor(() => dropped.connections.slice(1).some((x) => x.events.some((e) => e.event === 'refused')), {
      what: 'the dropped client refused while no server takes writes',
    });

    await pair.standby.promote();
    const promoted = performance.now();
    await waitFor(() => l.sent.find((s) => s.start >= promoted && s.flerror === false), {
      what: () => {
        const since = l.sent.filter((s) => s.start >= promoted);
        return `a ping sent after the promotion to be stored (${since.length} answered since, the last: ${since.at(-1)?.message ?? since.at(-1)?.transport})`;
      },
      timeoutMs: 30_000,
    });
    // After the refusal's retry: (5 s) it resumes from its Last-Event-ID: a replay across the jump, then live.
    await waitFor(() => dropped.connections.at(-1)!.live.length > 0, { what: 'the dropped client resumed and live again' });
    const ackedBy = l.acked();
    await waitFor(() => l.acked() >= ackedBy + 40, { what: '40 more pings stored with both clients live' });
    await l.stop();

    // A last ping: positions go up, and each client is sent them in order, so once both have it, every
    // event before it that either will ever get has arrived.
    const sentinel = await ping(base, uniqueUrl('stream-sentinel'));
    assert.equal(sentinel.flerror, false, `the last ping is stored: ${sentinel.message ?? sentinel.transport}`);
    l.sent.push(sentinel);
    for (const [name, f] of [
      ['steady', steady],
      ['dropped', dropped],
    ] as const)
      await waitFor(() => dataOf<PingData>(f.events()).some((p) => p.url === sentinel.url), {
        what: `the ${name} client to receive the last ping`,
      });

    const ackedAll = l.sent.filter((s) => s.flerror === false);
    const refused = new Set(l.sent.filter((s) => s.flerror !== false).map((s) => s.url));
    // What the promoted server has: asynchronously, the pings acknowledged last before the crash may not
    // have reached it (lost, as documented); they are not the stream's to send. Everything else is.
    const stored = new Map(
      (
        await pair.standby.query<{ url: string; id: number }>('select url, id from pings where url = any($1)', [ackedAll.map((s) => s.url)])
      ).map((r) => [r.url, Number(r.id)]),
    );
    const lost = ackedAll.filter((s) => !stored.has(s.url)).map((s) => s.url);
    const acked = ackedAll.filter((s) => stored.has(s.url)).map((s) => s.url);
    const afterPromotion = ackedAll.filter((s) => s.start >= promoted);
    const a = received(steady, acked);
    const b = received(dropped, acked);
    const refusedStreamed = a.pings.filter((p) => refused.has(p.url)).length;
    const lostStreamed = a.pings.filter((p) => lost.includes(p.url)).length;
    const firstAfter = Math.min(...afterPromotion.map((s) => stored.get(s.url) ?? Infinity));
    // The figures first: a failure below is read against them.
    ctx.diagnostic(
      `${before} pings before the crash, ${l.sent.length} in all; ${ackedAll.length} acknowledged (${afterPromotion.length} after the promotion, ` +
        `${lost.length} lost with the old primary, ${lostStreamed} of them streamed), ${refused.size} refused ` +
        `(${refusedStreamed} of them streamed all the same: a commit whose answer the crash cut off); ` +
        `highest id sent before the crash ${sentBeforeCrash}, first id of a ping sent after the promotion ${firstAfter}; ` +
        `steady client: ${a.connections} connection(s), ${a.pings.length} pings, largest id step ${a.jump}; ` +
        `dropped client: ${b.connections} connections (${b.refusals} refused), ${b.pings.length} pings, largest id step ${b.jump}, ` +
        `resets ${JSON.stringify(b.resets.map((e) => e.data))}`,
    );
    assert.deepEqual(
      afterPromotion.filter((s) => !stored.has(s.url)).map((s) => s.url),
      [],
      'acknowledged after the promotion and not on the promoted server',
    );
    if (c.synchronous) assert.deepEqual(lost, [], 'acknowledged and not on the promoted server, with a synchronous standby');
    else
      assert.ok(
        lostStreamed > 0,
        'the case this test is for: the old primary streamed pings the standby never received (the WAL link too quick?)',
      );
    for (const [name, r] of [
      ['steady', a],
      ['dropped', b],
    ] as const) {
      assert.deepEqual(r.missing, [], `${name}: acknowledged, on the promoted server, and never streamed`);
      assert.deepEqual(r.twice, [], `${name}: streamed twice`);
      assert.deepEqual(r.outOfOrder, [], `${name}: ids that did not go up`);
      // A client resuming from an id the promoted server lacks (a lost ping's) before anything newer is
      // stored there is told `reset` (`unknown`) and continues from the newest the server has; only then.
      const unexpected = r.resets.filter((e) => c.synchronous || (JSON.parse(e.data) as { reason: string }).reason !== 'unknown');
      assert.deepEqual(unexpected, [], `${name}: reset frames`);
    }
    assert.ok(b.connections >= 3, 'the dropped client connected, was refused in the gap, and resumed');
  } finally {
    await l.stop();
  }
}

test(
  'a /stream client gets every acknowledged ping once across a failover, an id jump and its reconnects',
  { skip: replicatedPairSkip(BACKEND), timeout: 60_000 },
  (ctx) => failoverStream(ctx, { synchronous: true }),
);

test(
  'asynchronous: pings stored after the promotion never take an id the stream already sent for a ping the standby lacked',
  { skip: replicatedPairSkip(BACKEND), timeout: 60_000 },
  // REGRESSION: the promoted server's sequence resumed below the ids of pings it never received, pings
  // stored after the promotion took those ids, and both clients, past them, never got them (0–16 per run
  // in the failover bench with the WAL 50 ms late). 500 ms late loses more than the 32 values a sequence
  // logs ahead (a few hundred pings a second here), so the promoted sequence always resumes below ids sent.
  (ctx) => failoverStream(ctx, { synchronous: false, linkDelayMs: 500 }),
);
