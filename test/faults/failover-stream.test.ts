// Two /stream clients follow the stream while the primary crashes (`pg_ctl stop -m immediate`) and the
// synchronous standby is promoted, pingd on a multi-host DATABASE_URL and never restarted, pings sent
// before, during and after. One keeps its connection throughout; the other's connection drops right after
// the crash (a proxy restarted, a network blip), so it reconnects in the gap (asked to come back later),
// then after the promotion with its Last-Event-ID, as an EventSource does. Checked, for each: every ping
// acknowledged arrives exactly once (counting all its connections), ids only go up (no duplicate, no
// reordering), and no reset frame (the server never read the client's position as unknown). The promoted
// server's sequence may skip up to 32 values (sequences log 32 ahead; a crash or promotion resumes after
// the logged value): ids jump there, and neither the live read nor the replay may stall on the jump or
// take it for lost events. Issue 41, item 4.
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

test(
  'a /stream client gets every acknowledged ping once across a failover, an id jump and its reconnects',
  { skip: replicatedPairSkip(BACKEND), timeout: 60_000 },
  async (ctx) => {
    const pair = await startReplicatedPair();
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

    const l = load(base, 4, 'stream-failover');
    try {
      await waitFor(() => l.acked() >= 40 && steady.events().length >= 20 && dropped.events().length >= 20, {
        what: () =>
          `40 pings acknowledged and streamed before the crash (${l.acked()}, ${steady.events().length}, ${dropped.events().length})`,
      });
      const before = l.sent.length;

      await pair.primary.crash();
      const crashed = performance.now();
      dropped.drop();
      await waitFor(() => l.sent.some((s) => s.start > crashed && s.flerror === true), { what: 'a ping refused after the crash' });
      // The dropped client's reconnection in the gap is asked to come back later (a 200 stream ending with
      // retry: and `event: refused`); its Last-Event-ID stays what it was.
      await waitFor(() => dropped.connections.slice(1).some((c) => c.events.some((e) => e.event === 'refused')), {
        what: 'the dropped client refused while no server takes writes',
      });

      await pair.standby.promote();
      const promoted = performance.now();
      await waitFor(() => l.sent.find((s) => s.start >= promoted && s.flerror === false), {
        what: 'a ping sent after the promotion to be stored',
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

      const acked = l.sent.filter((s) => s.flerror === false).map((s) => s.url);
      const refused = new Set(l.sent.filter((s) => s.flerror !== false).map((s) => s.url));
      const a = received(steady, acked);
      const b = received(dropped, acked);
      const refusedStreamed = a.pings.filter((p) => refused.has(p.url)).length;
      // The figures first: a failure below is read against them.
      ctx.diagnostic(
        `${before} pings before the crash, ${l.sent.length} in all; ${acked.length} acknowledged, ${refused.size} refused ` +
          `(${refusedStreamed} of them streamed all the same: a commit whose answer the crash cut off); ` +
          `steady client: ${a.connections} connection(s), ${a.pings.length} pings, largest id step ${a.jump}; ` +
          `dropped client: ${b.connections} connections (${b.refusals} refused), ${b.pings.length} pings, largest id step ${b.jump}`,
      );
      for (const [name, r] of [
        ['steady', a],
        ['dropped', b],
      ] as const) {
        assert.deepEqual(r.missing, [], `${name}: acknowledged and never streamed`);
        assert.deepEqual(r.twice, [], `${name}: streamed twice`);
        assert.deepEqual(r.outOfOrder, [], `${name}: ids that did not go up`);
        assert.deepEqual(r.resets, [], `${name}: reset frames`);
      }
      assert.ok(b.connections >= 3, 'the dropped client connected, was refused in the gap, and resumed');
    } finally {
      await l.stop();
    }
  },
);
