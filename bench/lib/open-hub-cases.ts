// Owns the hardening benchmark's open-hub case (WebSub for any feed):
//   open-hub  1,000 subscribers of 100 feed topics (10 subscribers each; feeds on 10 loopback hosts
//             127.0.7.1–10, callbacks on 50, 127.0.8.1–50), subscribed and confirmed first; then rounds in
//             which every feed gets a new entry and its publisher sends a WebSub publish: each round is 100
//             verifications and 1,000 deliveries holding only the new entry. Deliveries per second (first
//             publish to last delivery received), and intake p50/p99 (~20 pings/s of new weblogs, open loop)
//             during the deliveries against a 10 s baseline before them.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { agent, send, type HostileRequest } from './hostile-http.js';
import { openLoop, rpcPing, stats, type FeedCase, type FeedDetail, type Sample } from './feed-hardening-cases.js';
import { envNumber } from './env.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const f1 = (n: number) => (!Number.isFinite(n) ? 'n/a' : n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US'));

const TOPICS = Math.round(envNumber('BENCH_OPEN_HUB_TOPICS', 100));
const SUBSCRIBERS = Math.round(envNumber('BENCH_OPEN_HUB_SUBSCRIBERS', 1000));
const ROUNDS = Math.round(envNumber('BENCH_OPEN_HUB_ROUNDS', 3));
const FEED_HOSTS = 10;
const CALLBACK_HOSTS = 50;

interface Servers {
  topics: string[];
  /** Deliveries received: when (performance.now()) and the topic's index. */
  posts: { at: number; topic: number }[];
  /** Bumps every feed: one new entry each. */
  bump(): void;
  callbacks: string[];
  close(): Promise<void>;
}

async function listen(server: http.Server, host: string): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  return `http://${host}:${(server.address() as AddressInfo).port}`;
}

async function startServers(): Promise<Servers> {
  const servers: http.Server[] = [];
  let entries = 3;
  const feed = (i: number) => {
    const items: string[] = [];
    for (let n = entries; n > Math.max(0, entries - 10); n--)
      items.push(
        `<item><title>Topic ${i}, post ${n}</title><link>https://blog${i}.example/${n}</link><guid>t${i}-${n}</guid><description><![CDATA[<p>post ${n} &amp; more</p>]]></description></item>`,
      );
    return `<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>Topic ${i}</title><link>https://blog${i}.example/</link><description>d</description>${items.join('')}</channel></rss>`;
  };
  const origins: string[] = [];
  for (let h = 0; h < FEED_HOSTS; h++) {
    const s = http.createServer((req, res) => {
      const m = /^\/f(\d+)\.xml/.exec(req.url ?? '');
      if (!m) {
        res.writeHead(404);
        res.end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/rss+xml; charset=utf-8' });
      res.end(feed(Number(m[1])));
    });
    servers.push(s);
    origins.push(await listen(s, `127.0.7.${h + 1}`));
  }
  const topics = Array.from({ length: TOPICS }, (_, i) => `${origins[i % FEED_HOSTS]}/f${i}.xml`);
  const posts: Servers['posts'] = [];
  const cbOrigins: string[] = [];
  for (let h = 0; h < CALLBACK_HOSTS; h++) {
    const s = http.createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET') {
        const c = u.searchParams.get('hub.challenge') ?? '';
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(c);
        return;
      }
      req.resume();
      req.on('end', () => {
        posts.push({ at: performance.now(), topic: Number(u.searchParams.get('t')) });
        res.writeHead(204);
        res.end();
      });
    });
    servers.push(s);
    cbOrigins.push(await listen(s, `127.0.8.${h + 1}`));
  }
  const callbacks = Array.from({ length: SUBSCRIBERS }, (_, i) => `${cbOrigins[i % CALLBACK_HOSTS]}/s${i}?t=${i % TOPICS}`);
  return {
    topics,
    posts,
    callbacks,
    bump: () => void entries++,
    close: async () => {
      for (const s of servers) {
        s.closeAllConnections();
        await new Promise((r) => s.close(r));
      }
    },
  };
}

const form = (f: Record<string, string>): HostileRequest => ({
  method: 'POST',
  path: '/websub',
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
  body: Buffer.from(new URLSearchParams(f).toString()),
});

/** Sends every request, `inFlight` at a time; returns the statuses tallied. */
async function all(base: string, reqs: HostileRequest[], inFlight: number): Promise<Record<number, number>> {
  const via = agent(inFlight);
  const tally: Record<number, number> = {};
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < reqs.length) {
        const r = await send(base, reqs[next++], via, 60_000);
        tally[r.status] = (tally[r.status] ?? 0) + 1;
      }
    }),
  );
  via.destroy();
  return tally;
}

export async function activeSubscriptions(base: string): Promise<number> {
  const via = agent(1);
  try {
    const text = (await send(base, { method: 'GET', path: '/metrics' }, via, 60_000)).body;
    return Number(/^pingd_websub_subscriptions\{state="active"\} (\S+)$/m.exec(text)?.[1] ?? NaN);
  } finally {
    via.destroy();
  }
}

let seq = 0;
const newWeblog = () => rpcPing('Open hub load', `http://127.0.6.${1 + (++seq % 200)}:9/o${seq.toString(36)}/`);
const between = (xs: Sample[], from: number, to: number) => xs.filter((x) => x.at >= from && x.at < to);
const tallyText = (t: Record<number, number>) =>
  Object.entries(t)
    .map(([k, v]) => `${v} × ${k}`)
    .join(', ');

const openHub: FeedCase = {
  id: 'open-hub',
  title: 'H1. The open hub: 1,000 subscribers of 100 feed topics, a new entry in every feed per round',
  figure: 'deliveries per second (median of the rounds); intake p99 during deliveries ÷ before',
  method:
    `pingd with \`VERIFY_PINGS=mark FETCH_ALLOW_ADDRESSES=127.0.0.0/8 FETCH_HOST_INTERVAL_MS=0 VERIFY_FEED_INTERVAL=0 WEBSUB_MAX_PENDING=100000\` and default hub settings (WEBSUB_CONCURRENCY 8, WEBSUB_HOST_CONCURRENCY 1). ` +
    `${TOPICS} RSS feeds (10 entries, CDATA) on ${FEED_HOSTS} loopback hosts; ${SUBSCRIBERS} subscriptions (BENCH_OPEN_HUB_SUBSCRIBERS, BENCH_OPEN_HUB_TOPICS), callbacks on ${CALLBACK_HOSTS} hosts answering 204 at once, subscribed 32 at a time and confirmed (intent, then the topic fetched once) before the measure. ` +
    `Intake ~20 pings/s of new weblogs (open loop) throughout: 10 s baseline, then ${ROUNDS} rounds (BENCH_OPEN_HUB_ROUNDS) in which every feed gets one new entry and a WebSub publish of it is sent (16 at a time); a round ends when its ${SUBSCRIBERS} deliveries have arrived.`,
  env: {
    VERIFY_PINGS: 'mark',
    FETCH_ALLOW_ADDRESSES: '127.0.0.0/8',
    FETCH_HOST_INTERVAL_MS: '0',
    VERIFY_FEED_INTERVAL: '0',
    PING_HOST_BUDGET: '0',
    PING_MIN_INTERVAL: '0',
    RENDER_SCHEDULER: 'false',
    WEBSUB_MAX_PENDING: '100000',
  },
  async run(t, _s, log) {
    const srv = await startServers();
    try {
      const t0 = performance.now();
      const subs = await all(
        t.url,
        srv.callbacks.map((cb, i) => form({ 'hub.mode': 'subscribe', 'hub.callback': cb, 'hub.topic': srv.topics[i % TOPICS] })),
        32,
      );
      while ((await activeSubscriptions(t.url)) < SUBSCRIBERS) {
        if (performance.now() - t0 > 300_000) throw new Error(`only ${await activeSubscriptions(t.url)} subscriptions active after 300 s`);
        await sleep(250);
      }
      const subscribeSec = (performance.now() - t0) / 1000;
      log(`  ${SUBSCRIBERS} subscriptions (${tallyText(subs)}) active after ${subscribeSec.toFixed(1)} s`);

      const loop = openLoop(t.url, newWeblog, 50);
      const b0 = performance.now();
      await sleep(10_000);
      const b1 = performance.now();
      const rounds: { rate: number; seconds: number; from: number; to: number }[] = [];
      for (let r = 1; r <= ROUNDS; r++) {
        srv.bump();
        const r0 = performance.now();
        const pub = await all(
          t.url,
          srv.topics.map((topic) => form({ 'hub.mode': 'publish', 'hub.url': topic })),
          16,
        );
        while (srv.posts.length < r * SUBSCRIBERS) {
          if (performance.now() - r0 > 180_000)
            throw new Error(`round ${r}: ${srv.posts.length - (r - 1) * SUBSCRIBERS} of ${SUBSCRIBERS} deliveries after 180 s`);
          await sleep(50);
        }
        const last = srv.posts[r * SUBSCRIBERS - 1].at;
        const seconds = (last - r0) / 1000;
        rounds.push({ rate: SUBSCRIBERS / seconds, seconds, from: r0, to: last });
        log(
          `  round ${r}: publishes ${tallyText(pub)}; ${SUBSCRIBERS} deliveries in ${seconds.toFixed(2)} s = ${f1(SUBSCRIBERS / seconds)}/s`,
        );
        await sleep(1000);
      }
      const samples = await loop.stop();
      const base = stats(between(samples, b0, b1));
      const during = stats(samples.filter((x) => rounds.some((r) => x.at >= r.from && x.at < r.to)));
      const rates = rounds.map((r) => r.rate).sort((a, b) => a - b);
      const median = rates[Math.floor(rates.length / 2)];
      const ratio = during.p99 / base.p99;
      const extra = srv.posts.length - ROUNDS * SUBSCRIBERS;
      log(
        `  intake p50/p99 before ${base.p50.toFixed(1)}/${base.p99.toFixed(1)} ms, during deliveries ${during.p50.toFixed(1)}/${during.p99.toFixed(1)} ms`,
      );
      const details: FeedDetail[] = [
        {
          what: `subscribing ${SUBSCRIBERS} callbacks to ${TOPICS} topics (verification of intent, then one fetch of each topic)`,
          figure: `${f1(subscribeSec)} s until all active`,
          outcome: tallyText(subs),
        },
        {
          what: `deliveries per round (${TOPICS} publishes → ${TOPICS} verifications → ${SUBSCRIBERS} POSTs holding only the new entry)`,
          figure: rounds.map((r) => `${f1(r.rate)}/s (${r.seconds.toFixed(2)} s)`).join(', '),
          outcome: extra === 0 ? 'each subscriber got each change once' : `**${extra} deliveries more than changes × subscribers**`,
        },
        {
          what: 'intake (~20 pings/s), 10 s before → during the deliveries',
          figure: `p50 ${f1(base.p50)} → ${f1(during.p50)} ms, p99 ${f1(base.p99)} → **${f1(during.p99)}** ms (${during.n} pings${during.failed ? `, **${during.failed} not acknowledged**` : ''})`,
          outcome: `p99 ratio ${ratio.toFixed(2)}`,
        },
      ];
      return {
        label: `${SUBSCRIBERS} subscribers of ${TOPICS} feed topics, ${ROUNDS} rounds of a new entry in every feed`,
        headline: `**${f1(median)}** deliveries/s; intake p99 ×${ratio.toFixed(2)}`,
        outcome: `rounds ${rounds.map((r) => f1(r.rate)).join(', ')}/s`,
        details,
      };
    } finally {
      await srv.close();
    }
  },
};

export const OPEN_HUB_CASES: FeedCase[] = [openHub];
