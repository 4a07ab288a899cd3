// Owns the hardening benchmark's fan-out cases about the WebSub hub: what one client's subscribers cost
// everyone else. Two classes, each against its own pingd with its callback hosts on loopback addresses
// (127.0.4.x healthy, 127.0.5.x hostile, 127.0.6.x the list's) and intake measured meanwhile (an open loop of
// weblogUpdates.ping to new weblogs, ~20/s: p50/p99 and the acknowledged count):
//   fanout-websub          healthy subscribers beside slow ones (hanging, dripping 1 B/s, answering 50 MB):
//                          healthy deliveries per second; 400 hanging verifications from one client: a
//                          legitimate subscriber's verification delay; one client's subscribe flood from one
//                          callback host and its unsubscribes of unknown pairs: what gets in, what is sent;
//   fanout-subscriptions   16 concurrent readers of GET /api/websub/subscriptions at 5,700 subscriptions:
//                          bytes and ms per answer, intake meanwhile; and the 503 at the subscription cap.
// Works against the earlier pingd (BENCH_PINGD_ROOT) too: settings it lacks are ignored there, and an answer
// it does not give (a page cursor) is reported as such.
import http from 'node:http';
import type { Agent } from 'node:http';
import { cpuMicros } from './cpu.js';
import { envNumber } from './env.js';
import { agent, flood, send, sequential, type HostileRequest } from './hostile-http.js';
import {
  openLoop,
  rpcPing,
  startHost,
  stats,
  type FeedCase,
  type FeedDetail,
  type Host,
  type Sample,
  type Stats,
} from './feed-hardening-cases.js';
import type { Target } from './hardening-cases.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const f1 = (n: number | undefined) =>
  n === undefined || !Number.isFinite(n) ? '–' : n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US');
const between = (xs: Sample[], from: number, to: number) => xs.filter((x) => x.at >= from && x.at < to);
const lat = (s: Stats) => `p50 ${f1(s.p50)} ms, p99 ${f1(s.p99)} ms (${s.n} pings${s.failed ? `, **${s.failed} not acknowledged**` : ''})`;
export const tally = (statuses: Record<string, number>) =>
  Object.entries(statuses)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${v.toLocaleString('en-US')}× ${k}`)
    .join(', ') || 'none';

let intakeSeq = 0;
/** A ping of a new weblog (no throttle, a real insert) on 200 hosts of 127.0.1.0/24 at a port nothing listens on. */
const intakePing = () => {
  const n = ++intakeSeq;
  return rpcPing('Intake', `http://127.0.1.${1 + (n % 200)}:9/w${n.toString(36)}/`);
};
/** The intake load: ~20 pings/s. */
const INTAKE_EVERY_MS = 50;

/** A subscription form to pingd's hub for its own /changes.xml. */
export function websubForm(t: Target, callback: string, mode: 'subscribe' | 'unsubscribe' = 'subscribe'): HostileRequest {
  return {
    method: 'POST',
    path: '/websub',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: Buffer.from(new URLSearchParams({ 'hub.callback': callback, 'hub.mode': mode, 'hub.topic': `${t.url}/changes.xml` }).toString()),
  };
}

/** An answer's status with the bound that gave it, as pingd's reason says (earlier pingd: the status alone). */
function websubKind(status: number, body: string): string {
  if (status === 429) return /from one client/.test(body) ? '429 client pending' : '429 host pending';
  if (status === 503) return /on one host/.test(body) ? '503 host full' : '503 hub full';
  return String(status);
}

/** Subscribes, pacing on 429 (a polite client, 1 s later) until accepted or `untilMs` (performance.now()). */
async function subscribePaced(
  t: Target,
  callback: string,
  via: Agent,
  untilMs: number,
  statuses: Record<string, number>,
): Promise<boolean> {
  for (;;) {
    const a = await send(t.url, websubForm(t, callback), via, 60_000).catch(() => undefined);
    const k = a ? websubKind(a.status, a.body) : 'no answer';
    statuses[k] = (statuses[k] ?? 0) + 1;
    if (a?.status === 202) return true;
    if (a?.status !== 429 || performance.now() > untilMs) return false;
    await sleep(1000);
  }
}

export interface CallbackHost extends Host {
  /** GETs (verifications of intent) and POSTs (deliveries) seen, by arrival time (performance.now()). */
  gets: number[];
  posts: number[];
  /** POSTs open at once, most. */
  maxOpenPosts: number;
}

type PostBehaviour = 'ok' | 'hang' | 'drip' | 'huge';
const FIFTY_MB = 50 * 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 'z');

/** A subscriber host: GETs echo the challenge (or hang), POSTs answer as `post` says. */
export async function callbackHost(address: string, post: PostBehaviour, hangGets = false): Promise<CallbackHost> {
  const gets: number[] = [];
  const posts: number[] = [];
  let open = 0;
  const timers = new Set<NodeJS.Timeout>();
  const h = await startHost(address, (req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    if (req.method !== 'POST') {
      gets.push(performance.now());
      if (hangGets) return void req.resume();
      res.writeHead(200, { 'content-type': 'text/plain' });
      return void res.end(u.searchParams.get('hub.challenge') ?? '');
    }
    posts.push(performance.now());
    open++;
    host.maxOpenPosts = Math.max(host.maxOpenPosts, open);
    res.on('close', () => void open--);
    req.resume();
    req.on('end', () => {
      if (post === 'ok') return void res.writeHead(204).end();
      if (post === 'hang') return;
      if (post === 'drip') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        const timer = setInterval(() => res.write('.'), 1000);
        timers.add(timer);
        res.on('close', () => (clearInterval(timer), timers.delete(timer)));
        return;
      }
      // 50 MB, as fast as the reader takes it.
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': FIFTY_MB });
      let sent = 0;
      const pump = () => {
        while (sent < FIFTY_MB) {
          sent += CHUNK.length;
          if (!res.write(CHUNK)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
  });
  const host: CallbackHost = {
    ...h,
    gets,
    posts,
    maxOpenPosts: 0,
    close: async () => {
      for (const t of timers) clearInterval(t);
      await h.close();
    },
  };
  return host;
}

/** pingd_websub_deliveries_total by outcome, from /metrics. */
async function deliveries(t: Target): Promise<Record<string, number>> {
  const via = agent(1);
  try {
    const text = (await send(t.url, { method: 'GET', path: '/metrics' }, via, 60_000)).body;
    const out: Record<string, number> = {};
    for (const m of text.matchAll(/^pingd_websub_deliveries_total\{outcome="(\w+)"\} (\S+)$/gm)) out[m[1]] = Number(m[2]);
    return out;
  } catch {
    return {};
  } finally {
    via.destroy();
  }
}

const inWindow = (xs: number[], from: number, to: number) => xs.filter((x) => x >= from && x < to).length;

/** The longest stretch of [from, to) with no event of `xs`, in seconds. */
function longestGap(xs: number[], from: number, to: number): number {
  let last = from;
  let gap = 0;
  for (const x of xs.filter((x) => x >= from && x < to).sort((a, b) => a - b)) {
    gap = Math.max(gap, x - last);
    last = x;
  }
  return Math.max(gap, to - last) / 1000;
}

// ---------------------------------------------------------------------------------------------------
// Class 3: one client's subscribers against the hub

const fanoutWebsub: FeedCase = {
  id: 'fanout-websub',
  title: 'W1. One client fills and starves the WebSub hub (slow, hanging, dripping, huge callbacks; subscribe and unsubscribe floods)',
  figure:
    "healthy deliveries/s beside the slow subscribers; a legitimate subscriber's verification delay behind 400 hanging ones; intake p50/p99 baseline → during",
  env: {
    FETCH_ALLOW_ADDRESSES: '127.0.0.0/8',
    FETCH_HOST_INTERVAL_MS: '0',
    PING_HOST_BUDGET: '0',
    PING_MIN_INTERVAL: '0',
    RENDER_SCHEDULER: 'true',
    // A new changes.xml every 2 s while intake runs: a publication for every subscriber each time.
    RENDER_CRON: '*/2 * * * * *',
  },
  method:
    'W1: pingd with `FETCH_ALLOW_ADDRESSES=127.0.0.0/8 FETCH_HOST_INTERVAL_MS=0 RENDER_CRON=*/2 * * * * *` and default hub settings; intake ~20 pings/s of new weblogs throughout (open loop). ' +
    'Healthy subscribers (500 on 127.0.4.1–50, each host subscribing its own from its own address) answer 204; slow ones (100 each on 127.0.5.1 hanging, 127.0.5.2 sending 200 then 1 byte a second, 127.0.5.3 sending 50 MB) are subscribed as a polite client would (429: again 1 s later, for up to 60 s); ' +
    'deliveries are counted by the subscribers for BENCH_WEBSUB_SECONDS (60) of renders. Then 400 subscribes from one address (127.0.5.9) whose callbacks (127.0.5.4) never answer the verification, and a legitimate subscriber (127.0.4.200) right after: the delay until its verification GET arrives (at most 150 s). ' +
    'Then one address floods BENCH_WEBSUB_FLOOD (2,000) subscribes for callbacks on one host (127.0.5.5, confirming), 16 in flight, and as many unsubscribes of pairs never subscribed (callbacks on 127.0.5.6): answers tallied (each 202 is a request to the callback promised), requests the hosts received within 30 s after; a refused subscribe timed alone (50).',
  async run(t, _s, log) {
    const seconds = envNumber('BENCH_WEBSUB_SECONDS', 60);
    const healthyCount = Math.round(envNumber('BENCH_WEBSUB_HEALTHY', 500));
    const slowPerHost = Math.round(envNumber('BENCH_WEBSUB_SLOW_PER_HOST', 100));
    const floodSize = Math.round(envNumber('BENCH_WEBSUB_FLOOD', 2000));
    const hosts: CallbackHost[] = [];
    const details: FeedDetail[] = [];
    const loop = openLoop(t.url, intakePing, INTAKE_EVERY_MS);
    try {
      await sleep(3000); // warm-up, not counted
      const b0 = performance.now();
      await sleep(10_000);
      const b1 = performance.now();

      // Healthy subscribers, 10 per host, each host its own client.
      const healthyHosts: CallbackHost[] = [];
      for (let i = 1; i <= 50; i++) healthyHosts.push(await callbackHost(`127.0.4.${i}`, 'ok'));
      hosts.push(...healthyHosts);
      const subStatuses: Record<string, number> = {};
      const until = performance.now() + 60_000;
      await Promise.all(
        healthyHosts.map(async (h, i) => {
          const via = agent(1, `127.0.4.${i + 1}`);
          for (let k = 0; k < Math.ceil(healthyCount / healthyHosts.length); k++)
            await subscribePaced(t, `${h.origin}/h${k}`, via, until, subStatuses);
          via.destroy();
        }),
      );
      const healthyGets = () => healthyHosts.reduce((n, h) => n + h.gets.length, 0);
      while (healthyGets() < healthyCount && performance.now() < until + 30_000) await sleep(250);
      log(`  healthy: ${healthyGets()} verified of ${healthyCount}; answers ${tally(subStatuses)}`);

      // Slow subscribers: 100 per host, each host its own client, paced on 429.
      const slow = {
        hang: await callbackHost('127.0.5.1', 'hang'),
        drip: await callbackHost('127.0.5.2', 'drip'),
        huge: await callbackHost('127.0.5.3', 'huge'),
      };
      hosts.push(...Object.values(slow));
      const slowStatuses: Record<string, number> = {};
      const slowAccepted: Record<string, number> = {};
      const sUntil = performance.now() + 60_000;
      await Promise.all(
        Object.entries(slow).map(async ([kind, h], i) => {
          const via = agent(1, `127.0.5.${i + 1}`);
          let ok = 0;
          for (let k = 0; k < slowPerHost; k++) if (await subscribePaced(t, `${h.origin}/s${k}`, via, sUntil, slowStatuses)) ok++;
          slowAccepted[kind] = ok;
          via.destroy();
        }),
      );
      await sleep(3000);
      log(`  slow: accepted ${JSON.stringify(slowAccepted)}; answers ${tally(slowStatuses)}`);

      // Deliveries: renders every 2 s for `seconds`.
      const d0 = await deliveries(t);
      const p0 = performance.now();
      await sleep(seconds * 1000);
      const p1 = performance.now();
      const d1 = await deliveries(t);
      const healthyPosts = healthyHosts.flatMap((h) => h.posts);
      const perSec = inWindow(healthyPosts, p0, p1) / ((p1 - p0) / 1000);
      const gap = longestGap(healthyPosts, p0, p1);
      const reachedHealthy = healthyHosts.reduce((n, h) => n + (h.posts.some((x) => x >= p0 && x < p1) ? 1 : 0), 0);
      const outcome = (k: string) => f1((d1[k] ?? 0) - (d0[k] ?? 0));
      const slowPosts = Object.fromEntries(
        Object.entries(slow).map(([k, h]) => [k, `${inWindow(h.posts, p0, p1)} POSTs (≤${h.maxOpenPosts} at once)`]),
      );
      log(
        `  deliveries: healthy ${perSec.toFixed(1)}/s, longest gap ${gap.toFixed(1)} s; outcomes delivered ${outcome('delivered')}, failed ${outcome('failed')}; slow ${JSON.stringify(slowPosts)}`,
      );

      // 400 hanging verifications from one client, then a legitimate subscriber.
      const hanging = await callbackHost('127.0.5.4', 'hang', true);
      const legit = await callbackHost('127.0.4.200', 'ok');
      hosts.push(hanging, legit);
      const viaHang = agent(16, '127.0.5.9');
      const hangStatuses: Record<string, number> = {};
      let next = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < 400) {
            const a = await send(t.url, websubForm(t, `${hanging.origin}/v${next++}`), viaHang, 60_000).catch(() => undefined);
            const k = a ? websubKind(a.status, a.body) : 'no answer';
            hangStatuses[k] = (hangStatuses[k] ?? 0) + 1;
          }
        }),
      );
      viaHang.destroy();
      const viaLegit = agent(1, '127.0.4.200');
      const l0 = performance.now();
      const la = await send(t.url, websubForm(t, `${legit.origin}/legit`), viaLegit, 60_000).catch(() => undefined);
      viaLegit.destroy();
      const legitLimit = 150_000;
      while (legit.gets.length === 0 && performance.now() - l0 < legitLimit) await sleep(100);
      const l1 = performance.now();
      const legitDelay = legit.gets.length ? (legit.gets[0] - l0) / 1000 : undefined;
      log(
        `  hanging: answers ${tally(hangStatuses)}; legit ${la?.status ?? 'no answer'}, verified after ${legitDelay === undefined ? `> ${legitLimit / 1000}` : legitDelay.toFixed(1)} s; the hanging host got ${hanging.gets.length} GETs`,
      );

      // One client's floods: subscribes for one callback host, unsubscribes of unknown pairs.
      const floodHost = await callbackHost('127.0.5.5', 'ok');
      const unsubHost = await callbackHost('127.0.5.6', 'ok');
      hosts.push(floodHost, unsubHost);
      let fn = 0;
      const f0 = performance.now();
      const subFlood = await flood(t.url, () => websubForm(t, `${floodHost.origin}/f${fn++}`), floodSize, 16, 120);
      let un = 0;
      const unsubFlood = await flood(t.url, () => websubForm(t, `${unsubHost.origin}/u${un++}`, 'unsubscribe'), floodSize, 16, 120);
      const f1t = performance.now();
      await sleep(30_000);
      let rn = 0;
      const refused = await sequential(t.url, t.pid, () => websubForm(t, `${floodHost.origin}/r${rn++}`), 50, 30, t.queries, 0);
      log(
        `  flood: subscribes ${tally(subFlood.statuses)} → ${floodHost.gets.length} verification GETs; unsubscribes ${tally(unsubFlood.statuses)} → ${unsubHost.gets.length} GETs; a refused subscribe ${f1(refused.p50)} ms (${tally(refused.statuses)})`,
      );

      const samples = await loop.stop();
      const base = stats(between(samples, b0, b1));
      const during = stats(between(samples, p0, p1));
      const hangWindow = stats(between(samples, l0, l1));
      const floodWindow = stats(between(samples, f0, f1t));
      details.push(
        { what: 'intake, baseline (no subscribers), 10 s', figure: lat(base), outcome: '' },
        {
          what: `${healthyCount} healthy subscribers (50 hosts) beside ${slowPerHost * 3} slow ones (hanging, 1 B/s, 50 MB), ${seconds} s of renders every 2 s`,
          figure: `healthy deliveries **${f1(perSec)}/s**, longest stretch with none **${f1(gap)} s**, ${reachedHealthy}/50 healthy hosts reached; intake ${lat(during)}`,
          outcome: `hub outcomes: delivered ${outcome('delivered')}, failed ${outcome('failed')}; slow hosts: hang ${slowPosts.hang}, drip ${slowPosts.drip}, huge ${slowPosts.huge}; slow subscribes accepted ${JSON.stringify(slowAccepted)} (${tally(slowStatuses)})`,
        },
        {
          what: '400 subscribes from one client whose callbacks never answer the verification, then a legitimate subscriber',
          figure: `legitimate subscriber verified after **${legitDelay === undefined ? `> ${legitLimit / 1000}` : f1(legitDelay)} s**; intake meanwhile ${lat(hangWindow)}`,
          outcome: `the 400: ${tally(hangStatuses)}; verification GETs to the hanging host ${hanging.gets.length}`,
        },
        {
          what: `one client: ${floodSize.toLocaleString('en-US')} subscribes for callbacks on one host, then ${floodSize.toLocaleString('en-US')} unsubscribes of pairs never subscribed (16 in flight)`,
          figure: `subscribe answers ${tally(subFlood.statuses)} (${f1(subFlood.seconds)} s) → **${floodHost.gets.length}** verification GETs; unsubscribe answers ${tally(unsubFlood.statuses)} → **${unsubHost.gets.length}** GETs; intake ${lat(floodWindow)}`,
          outcome: `a refused subscribe sent alone: ${f1(refused.p50)} ms p50, pingd CPU ${f1(refused.cpuMs)} ms (${tally(refused.statuses)})`,
        },
      );
      return {
        label: `${healthyCount} healthy and ${slowPerHost * 3} slow subscribers; 400 hanging verifications; ${floodSize.toLocaleString('en-US')}-request subscribe and unsubscribe floods from one client`,
        headline: `**${f1(perSec)}/s** healthy deliveries (longest gap ${f1(gap)} s); legit verified after **${legitDelay === undefined ? `> ${legitLimit / 1000}` : f1(legitDelay)} s**; intake ${f1(base.p50)} / ${f1(base.p99)} → **${f1(during.p50)} / ${f1(during.p99)}** ms`,
        outcome: `flood: ${floodHost.gets.length} verification GETs for ${floodSize} subscribes, ${unsubHost.gets.length} GETs for ${floodSize} unknown unsubscribes`,
        details,
      };
    } finally {
      await loop.stop();
      for (const h of hosts) await h.close();
    }
  },
};

// ---------------------------------------------------------------------------------------------------
// Class 4: the subscriptions list

const BENCH_ADMIN_TOKEN = 'bench-websub-admin-token-0123456789';

type ListAnswer = { status: number; bytes: number; ms: number; next: string | null | undefined; rows: number };

/** GET a list answer: status, bytes, ms, and the next page's cursor (undefined: the answer has none). */
function getList(base: string, path: string, via: Agent): Promise<ListAnswer> {
  const u = new URL(base);
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path, headers: { authorization: `Bearer ${BENCH_ADMIN_TOKEN}` }, agent: via },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => {
          const body = Buffer.concat(parts);
          let next: string | null | undefined;
          let rows = 0;
          try {
            const j = JSON.parse(body.toString('utf8')) as { next?: string | null; subscriptions?: unknown[] };
            next = j.next;
            rows = j.subscriptions?.length ?? 0;
          } catch {
            next = undefined;
          }
          resolve({ status: res.statusCode ?? 0, bytes: body.length, ms: performance.now() - t0, next, rows });
        });
        res.on('error', reject);
      },
    );
    req.setTimeout(120_000, () => req.destroy(new Error('no answer in 120 s')));
    req.on('error', reject);
    req.end();
  });
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};

const fanoutSubscriptions: FeedCase = {
  id: 'fanout-subscriptions',
  title: 'W2. GET /api/websub/subscriptions at 5,700 subscriptions, 16 readers at once',
  figure: 'bytes and ms per answer; intake p50/p99 baseline → with 16 readers',
  env: {
    FETCH_ALLOW_ADDRESSES: '127.0.0.0/8',
    FETCH_HOST_INTERVAL_MS: '0',
    PING_HOST_BUDGET: '0',
    PING_MIN_INTERVAL: '0',
    RENDER_SCHEDULER: 'false',
    ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
    // Filled by one client on 57 hosts, to the cap: the per-host and per-client bounds are not what is measured here.
    WEBSUB_MAX_SUBSCRIPTIONS: String(Math.round(envNumber('BENCH_WEBSUB_SUBSCRIPTIONS', 5700))),
    WEBSUB_MAX_PER_HOST: '1000000',
    WEBSUB_MAX_PENDING: '1000000',
    WEBSUB_CONCURRENCY: '16',
    WEBSUB_HOST_CONCURRENCY: '4',
  },
  method:
    'W2: `ADMIN_TOKEN` set; `WEBSUB_MAX_SUBSCRIPTIONS=5700` (and the per-host and per-client bounds lifted), filled by one client with callbacks on 127.0.6.1–57 that confirm, 32 in flight. ' +
    'A subscribe for a new pair at the cap is timed alone (50: the 503). Intake ~20 pings/s (open loop): 10 s baseline, then BENCH_WEBSUB_READ_SECONDS (20) with 16 readers, each walking the whole list back to back (following `next` with the default page size where pingd pages; one answer where it does not). ' +
    'Per answer: bytes and wall ms (median over all answers), pingd CPU per answer and per walk (/proc).',
  async run(t, _s, log) {
    const total = Math.round(envNumber('BENCH_WEBSUB_SUBSCRIPTIONS', 5700));
    const readSeconds = envNumber('BENCH_WEBSUB_READ_SECONDS', 20);
    const hosts: CallbackHost[] = [];
    const details: FeedDetail[] = [];
    try {
      for (let i = 1; i <= 57; i++) hosts.push(await callbackHost(`127.0.6.${i}`, 'ok'));
      const s0 = performance.now();
      let n = 0;
      const fill = await flood(t.url, () => websubForm(t, `${hosts[n % hosts.length].origin}/l${n++}`), total, 32, 300);
      const verified = () => hosts.reduce((k, h) => k + h.gets.length, 0);
      while (verified() < total && performance.now() - s0 < 300_000) await sleep(500);
      await sleep(2000);
      log(`  filled: ${tally(fill.statuses)}; ${verified()} verified in ${((performance.now() - s0) / 1000).toFixed(0)} s`);

      let fn = 0;
      const full = await sequential(
        t.url,
        t.pid,
        () => websubForm(t, `http://127.0.7.${1 + (fn % 200)}:9/full${fn++}`),
        50,
        30,
        t.queries,
        0,
      );
      log(`  at the cap: ${tally(full.statuses)}, ${f1(full.p50)} ms p50, pingd CPU ${f1(full.cpuMs)} ms`);

      const loop = openLoop(t.url, intakePing, INTAKE_EVERY_MS);
      await sleep(3000);
      const b0 = performance.now();
      await sleep(10_000);
      const b1 = performance.now();
      const answers: { bytes: number; ms: number; status: number }[] = [];
      let walks = 0;
      let stop = false;
      const c0 = cpuMicros(t.pid);
      const r0 = performance.now();
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          const via = agent(1);
          while (!stop) {
            let after: string | null | undefined = null;
            do {
              const a: ListAnswer | undefined = await getList(
                t.url,
                `/api/websub/subscriptions${after ? `?after=${encodeURIComponent(after)}` : ''}`,
                via,
              ).catch(() => undefined);
              if (!a) break;
              answers.push(a);
              after = a.status === 200 ? a.next : undefined;
            } while (after && !stop);
            if (after === null || after === undefined) walks++;
            if (performance.now() - r0 > readSeconds * 1000) stop = true;
          }
          via.destroy();
        }),
      );
      const r1 = performance.now();
      const cpu = (cpuMicros(t.pid) - c0) / 1000;
      const samples = await loop.stop();
      const base = stats(between(samples, b0, b1));
      const during = stats(between(samples, r0, r1));
      const ok = answers.filter((a) => a.status === 200);
      const bytes = median(ok.map((a) => a.bytes));
      const ms = median(ok.map((a) => a.ms));
      const perWalk = walks ? ok.length / walks : NaN;
      const statuses: Record<string, number> = {};
      for (const a of answers) statuses[String(a.status)] = (statuses[String(a.status)] ?? 0) + 1;
      log(
        `  readers: ${answers.length} answers (${tally(statuses)}), ${walks} whole walks; ${f1(bytes)} bytes, ${f1(ms)} ms per answer; pingd CPU ${f1(cpu / Math.max(1, ok.length))} ms per answer; intake ${f1(base.p50)}/${f1(base.p99)} → ${f1(during.p50)}/${f1(during.p99)} ms`,
      );
      details.push(
        {
          what: `${total.toLocaleString('en-US')} subscriptions filled by one client (57 callback hosts)`,
          figure: `answers ${tally(fill.statuses)}; ${verified()} verified`,
          outcome: '',
        },
        {
          what: 'a new subscriber at the cap (WEBSUB_MAX_SUBSCRIPTIONS=5700), sent alone',
          figure: `**${f1(full.p50)} ms** p50, pingd CPU **${f1(full.cpuMs)} ms** per refusal`,
          outcome: tally(full.statuses),
        },
        { what: 'intake, baseline, 10 s', figure: lat(base), outcome: '' },
        {
          what: `16 readers walking the whole list for ${readSeconds} s`,
          figure: `**${f1(bytes)} bytes**, **${f1(ms)} ms** per answer (median of ${ok.length}); ${f1(perWalk)} answers per walk; pingd CPU ${f1(cpu / Math.max(1, ok.length))} ms per answer, ${f1(walks ? cpu / walks : NaN)} ms per walk`,
          outcome: `intake ${lat(during)}; answers ${tally(statuses)}`,
        },
      );
      return {
        label: `16 concurrent readers of the subscriptions list at ${total.toLocaleString('en-US')} subscriptions`,
        headline: `${f1(bytes)} bytes, ${f1(ms)} ms per answer; intake ${f1(base.p50)} / ${f1(base.p99)} → **${f1(during.p50)} / ${f1(during.p99)}** ms`,
        outcome: `${walks} whole walks (${f1(perWalk)} answers each); the cap's 503 ${f1(full.p50)} ms`,
        details,
      };
    } finally {
      for (const h of hosts) await h.close();
    }
  },
};

export const WEBSUB_CASES: FeedCase[] = [fanoutWebsub, fanoutSubscriptions];
