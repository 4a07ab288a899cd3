// Owns the hardening benchmark's fan-out cases about the relay:
//   fanout-relay  50 relay targets on loopback (127.0.5.1–50, each a weblogUpdates server answering flerror 0
//                 at once) and 20 pings/s of new weblogs for 60 s: each accepted ping is a job per target,
//                 drained at RELAY_RATE_PER_MIN (60) per target. The relay queue's depth over time, what
//                 the bound dropped, relays delivered, and intake p50/p99 in the first 10 s and the last 20 s.
// Works against pingd before the bound (BENCH_PINGD_ROOT): what it lacks reads "n/a".
import http from 'node:http';
import { agent, send } from './hostile-http.js';
import type { Target } from './hardening-cases.js';
import { openLoop, rpcPing, stats, type FeedCase, type FeedDetail, type Sample } from './feed-hardening-cases.js';
import { envNumber } from './env.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const f1 = (n: number | undefined) =>
  n === undefined || !Number.isFinite(n) ? 'n/a' : n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US');
/** A count: whole, or n/a where this pingd does not report it. */
const count = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? 'n/a' : Math.round(n).toLocaleString('en-US'));

export const TARGETS = Math.round(envNumber('BENCH_RELAY_TARGETS', 50));
if (TARGETS < 1 || TARGETS > 250) throw new Error('BENCH_RELAY_TARGETS: 1 to 250 (one loopback address each)');
/** One port on every target's own address (127.0.5.x): the targets' URLs are in pingd's environment before it starts. */
const PORT = Math.round(envNumber('BENCH_RELAY_PORT', 18_733));
const QUEUE_MAX = String(Math.round(envNumber('BENCH_RELAY_QUEUE_MAX', 500)));
export const targetUrl = (i: number) => `http://127.0.5.${i + 1}:${PORT}/RPC2`;

const OK = Buffer.from(
  '<?xml version="1.0"?><methodResponse><params><param><value><struct><member><name>flerror</name><value><boolean>0</boolean></value></member><member><name>message</name><value><string>Thanks for the ping.</string></value></member></struct></value></param></params></methodResponse>',
);

/** The targets: plain HTTP servers that read the call and answer flerror 0 at once; requests counted. */
export async function startTargets(): Promise<{ requests: () => number; close(): Promise<void> }> {
  let requests = 0;
  const servers: http.Server[] = [];
  for (let i = 0; i < TARGETS; i++) {
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        requests++;
        res.writeHead(200, { 'content-type': 'text/xml', 'content-length': OK.length });
        res.end(OK);
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(PORT, `127.0.5.${i + 1}`, () => resolve());
    });
    servers.push(server);
  }
  return {
    requests: () => requests,
    close: async () => {
      for (const s of servers) {
        s.closeAllConnections();
        await new Promise((r) => s.close(r));
      }
    },
  };
}

export interface RelayFigures {
  depth: number;
  oldest: number;
  delivered: number;
  /** Waiting weblogs dropped at the bound (NaN: this pingd has no bound). */
  dropped: number;
}

/** The relay's figures from /metrics: queue depth and oldest, relays delivered, dropped (pingd_relay_skipped_total, when it exists). */
export async function relayFigures(t: Target): Promise<RelayFigures> {
  const via = agent(1);
  try {
    const text = (await send(t.url, { method: 'GET', path: '/metrics' }, via, 60_000)).body;
    const one = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
    const sum = (re: RegExp) => {
      const xs = [...text.matchAll(re)].map((m) => Number(m[1]));
      return xs.length ? xs.reduce((a, b) => a + b, 0) : NaN;
    };
    return {
      depth: one(/^pingd_relay_queue\{measure="depth"\} (\S+)$/m),
      oldest: one(/^pingd_relay_queue\{measure="oldest_age_seconds"\} (\S+)$/m),
      delivered: sum(/^pingd_relay_total\{[^}]*outcome="delivered"[^}]*\} (\S+)$/gm),
      dropped: sum(/^pingd_relay_skipped_total\{[^}]*reason="dropped"[^}]*\} (\S+)$/gm),
    };
  } catch {
    return { depth: NaN, oldest: NaN, delivered: NaN, dropped: NaN };
  } finally {
    via.destroy();
  }
}

let seq = 0;
/** A ping of a new weblog (no throttle: a real insert and a job per target) on one of 200 loopback hosts (never fetched: VERIFY_PINGS=off). */
export const newWeblog = () => {
  const n = ++seq;
  return rpcPing('Relay load', `http://127.0.6.${1 + (n % 200)}:9/r${n.toString(36)}/`);
};

const between = (xs: Sample[], from: number, to: number) => xs.filter((x) => x.at >= from && x.at < to);
const unacked = (n: number, failed: number) => `${n} pings${failed ? `, **${failed} not acknowledged**` : ''}`;

const fanoutRelay: FeedCase = {
  id: 'fanout-relay',
  title: 'R5. The relay queue with 50 targets at 60/min each, 20 new weblogs/s',
  figure: 'relay jobs waiting at the end of the run (dropped by the bound); intake p50 / p99 ms, first 10 s → last 20 s',
  method:
    `\`RELAY_TARGETS\` = ${TARGETS} loopback servers (127.0.5.1–${TARGETS}:${PORT}) answering flerror 0 at once, default \`RELAY_RATE_PER_MIN\` (60) and \`RELAY_CONCURRENCY\` (8), ` +
    `\`RELAY_QUEUE_MAX=${QUEUE_MAX}\` (BENCH_RELAY_QUEUE_MAX; the default is 1000: ${QUEUE_MAX} is reached within the minute), \`PING_HOST_BUDGET=0\`; ` +
    'weblogUpdates.ping of a new weblog 20 times a second in an open loop (each timed from when it was due) for 60 s (BENCH_RELAY_SECONDS, BENCH_RELAY_RATE); /metrics read every 10 s (pingd_relay_queue, pingd_relay_total, pingd_relay_skipped_total).',
  env: {
    RELAY_TARGETS: Array.from({ length: TARGETS }, (_, i) => targetUrl(i)).join(','),
    RELAY_QUEUE_MAX: QUEUE_MAX,
    FETCH_ALLOW_ADDRESSES: '127.0.0.0/8',
    PING_HOST_BUDGET: '0',
    RENDER_SCHEDULER: 'false',
  },
  async run(t, _s, log) {
    const seconds = envNumber('BENCH_RELAY_SECONDS', 60);
    const rate = envNumber('BENCH_RELAY_RATE', 20);
    const every = 10;
    const targets = await startTargets();
    try {
      const f0 = await relayFigures(t);
      const t0 = performance.now();
      const loop = openLoop(t.url, newWeblog, 1000 / rate);
      const series: { at: number; f: RelayFigures }[] = [];
      for (let k = 1; k * every <= seconds; k++) {
        await sleep(t0 + k * every * 1000 - performance.now());
        const f = await relayFigures(t);
        series.push({ at: k * every, f });
        log(
          `  ${k * every} s: ${count(f.depth)} jobs waiting (oldest ${f1(f.oldest)} s), ${count(f.delivered)} delivered, ${count(f.dropped)} dropped`,
        );
      }
      const t1 = performance.now();
      const samples = await loop.stop();
      const base = stats(between(samples, t0, t0 + 10_000));
      const late = stats(between(samples, t1 - 20_000, t1));
      const all = stats(samples);
      const end = series.at(-1)?.f ?? f0;
      const bounded = Number.isFinite(end.dropped);
      log(
        `  intake p50/p99 first 10 s ${base.p50.toFixed(1)}/${base.p99.toFixed(1)} ms → last 20 s ${late.p50.toFixed(1)}/${late.p99.toFixed(1)} ms; targets answered ${targets.requests()} requests`,
      );
      const details: FeedDetail[] = [
        {
          what: `relay queue every ${every} s (${rate} new weblogs/s × ${TARGETS} targets = ${rate * TARGETS} jobs/s offered, ${TARGETS} relays/s drained at most)`,
          figure: series.map((x) => `${x.at} s: ${count(x.f.depth)}`).join(', '),
          outcome: bounded ? `dropped by the bound: ${series.map((x) => count(x.f.dropped)).join(', ')}` : 'no bound (dropped: n/a)',
        },
        {
          what: 'intake, first 10 s (queue still short)',
          figure: `p50 ${f1(base.p50)} ms, p99 ${f1(base.p99)} ms, max ${f1(base.max)} ms (${unacked(base.n, base.failed)})`,
          outcome: '',
        },
        {
          what: `intake, last 20 s (queue at its deepest)`,
          figure: `p50 **${f1(late.p50)}** ms, p99 **${f1(late.p99)}** ms, max ${f1(late.max)} ms (${unacked(late.n, late.failed)})`,
          outcome: `whole run: ${unacked(all.n, all.failed)}`,
        },
        {
          what: 'relays',
          figure: `${count(end.delivered - (Number.isFinite(f0.delivered) ? f0.delivered : 0))} delivered, ${count(targets.requests())} requests answered by the targets`,
          outcome: `oldest waiting job at the end ${f1(end.oldest)} s`,
        },
      ];
      return {
        label: `${rate} pings/s of new weblogs for ${seconds} s, relayed to ${TARGETS} targets at 60/min each`,
        headline: `**${count(end.depth)}** waiting (${bounded ? `${count(end.dropped)} dropped` : 'dropped n/a'}); ${f1(base.p50)} / ${f1(base.p99)} → **${f1(late.p50)} / ${f1(late.p99)}**`,
        outcome: `depth ${series.map((x) => count(x.f.depth)).join(' → ')}`,
        details,
      };
    } finally {
      await targets.close();
    }
  },
};

export const RELAY_CASES: FeedCase[] = [fanoutRelay];
