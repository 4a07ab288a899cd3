// Verifications per second: `pingd serve` (a child process) takes a burst of N pings of distinct weblogs
// on loopback weblog hosts and verifies each against a real HTTP server; the clock runs from the first
// ping until the queue is empty, read from /metrics. Cases: with the feed named in the ping (one fetch per
// verification), by autodiscovery (homepage + feed: two fetches), and at the default politeness
// (FETCH_HOST_INTERVAL_MS=1000: the host count bounds the rate).
//
//   node --import tsx bench/verify.ts [--write]
//
// Environment: BENCH_VERIFY_PINGS (pings per case, 2000), BENCH_VERIFY_HOSTS (weblog hosts, 16),
// BENCH_VERIFY_BACKENDS (pglite,postgres), BENCH_DATABASE_URL (as npm run bench), BENCH_VERIFY_CONCURRENCY (8).
import { startPingd, createPgliteDatabase, createPostgresDatabase, type Child } from './lib/servers.js';
import { startFeedHosts, type FeedHosts } from './lib/feed-hosts.js';
import { runLoad, type LoadSpec } from './lib/load.js';
import { isRpcAck, isUnsure } from './lib/scenarios.js';
import { recordRun } from './lib/results.js';
import { cpuMicros } from './lib/cpu.js';

const env = process.env;
const N = Number(env.BENCH_VERIFY_PINGS ?? 2000);
const HOSTS = Number(env.BENCH_VERIFY_HOSTS ?? 16);
const CONCURRENCY = env.BENCH_VERIFY_CONCURRENCY ?? '8';
const BACKENDS = (env.BENCH_VERIFY_BACKENDS ?? 'pglite,postgres').split(',').map((s) => s.trim()) as ('pglite' | 'postgres')[];
const DB_URL = env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const log = (s: string) => process.stderr.write(`${s}\n`);

interface Case {
  name: string;
  withFeed: boolean;
  hostIntervalMs: number;
  pings: number;
}

let seq = 0;
function spec(hosts: FeedHosts, withFeed: boolean): LoadSpec {
  return {
    method: 'POST',
    path: '/RPC2',
    headers: { 'content-type': 'text/xml' },
    makeBody: () => {
      const i = ++seq;
      const blog = `${hosts.origins[i % hosts.origins.length]}/v${i.toString(36)}/`;
      const params = withFeed ? [blog, blog, `${blog}feed.xml`] : [blog];
      return Buffer.from(
        `<?xml version="1.0"?><methodCall><methodName>weblogUpdates.${withFeed ? 'extendedPing' : 'ping'}</methodName><params><param><value>Bench</value></param>${params
          .map((p) => `<param><value>${p}</value></param>`)
          .join('')}</params></methodCall>`,
      );
    },
    isAck: isRpcAck,
    isUnsure,
  };
}

async function metric(pingd: Child, re: RegExp): Promise<number> {
  const text = await (await fetch(`${pingd.url}/metrics`)).text();
  const m = re.exec(text);
  return m ? Number(m[1]) : NaN;
}

async function runCase(backend: 'pglite' | 'postgres', hosts: FeedHosts, c: Case): Promise<string> {
  const db = backend === 'postgres' ? await createPostgresDatabase(DB_URL) : await createPgliteDatabase();
  let pingd: Child | undefined;
  try {
    pingd = await startPingd({
      // BENCH_VERIFY_PROFILE=<dir>: pingd under --cpu-prof (summarise with bench/profile-summary.ts).
      nodeArgs: env.BENCH_VERIFY_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${env.BENCH_VERIFY_PROFILE}`] : [],
      env: {
        ...db.env,
        VERIFY_PINGS: 'mark',
        VERIFY_CONCURRENCY: CONCURRENCY,
        VERIFY_FEED_INTERVAL: '0',
        FETCH_ALLOW_PRIVATE: 'true',
        FETCH_HOST_INTERVAL_MS: String(c.hostIntervalMs),
        PING_MIN_INTERVAL: '0',
        RENDER_SCHEDULER: 'false',
      },
    });
    const served0 = hosts.served.pages + hosts.served.feeds;
    const cpu0 = cpuMicros(pingd.proc.pid!);
    const t0 = performance.now();
    const load = await runLoad(pingd.url, spec(hosts, c.withFeed), { connections: 32, amount: c.pings });
    const tIntake = performance.now() - t0;
    for (;;) {
      const depth = await metric(pingd, /^pingd_verify_queue\{measure="depth"\} (\S+)$/m);
      if (depth === 0) break;
      if (performance.now() - t0 > 30 * 60_000) throw new Error('verification did not finish in 30 minutes');
      await new Promise((r) => setTimeout(r, 100));
    }
    const ms = performance.now() - t0;
    const cpuMs = (cpuMicros(pingd.proc.pid!) - cpu0) / 1000;
    const verified = await metric(pingd, /^pingd_verifications_total\{outcome="verified"\} (\S+)$/m);
    const fetches = hosts.served.pages + hosts.served.feeds - served0;
    const rate = load.acks / (ms / 1000);
    const line = `| ${backend} | ${c.name} | ${load.acks} | ${verified} | ${fetches} | ${(tIntake / 1000).toFixed(1)} | ${(ms / 1000).toFixed(1)} | **${rate.toFixed(0)}** | ${((cpuMs * 1000) / load.acks).toFixed(0)} |`;
    log(line);
    return line;
  } finally {
    await pingd?.stop();
    await db.drop();
  }
}

async function main(): Promise<void> {
  const hosts = await startFeedHosts(HOSTS, 40);
  const started = new Date();
  const cases: Case[] = [
    { name: `feed in the ping, no host gap`, withFeed: true, hostIntervalMs: 0, pings: N },
    { name: `autodiscovery (2 fetches), no host gap`, withFeed: false, hostIntervalMs: 0, pings: N },
    {
      name: `feed in the ping, FETCH_HOST_INTERVAL_MS=1000 (${HOSTS} hosts)`,
      withFeed: true,
      hostIntervalMs: 1000,
      pings: Math.min(N, HOSTS * 10),
    },
  ];
  const lines: string[] = [];
  try {
    for (const backend of BACKENDS) for (const c of cases) lines.push(await runCase(backend, hosts, c));
  } finally {
    await hosts.close();
  }
  const md = [
    `### Verification throughput ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `\`node --import tsx bench/verify.ts\`: a burst of pings of distinct weblogs on ${HOSTS} loopback hosts (32 connections), VERIFY_CONCURRENCY=${CONCURRENCY}; time from the first ping until the verification queue is empty. pingd, PostgreSQL and the weblog hosts share the machine's 2 cores.`,
    '',
    '| backend | case | pings | verified | requests served | intake s | total s | verifications/s | pingd CPU µs per verified ping |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...lines,
    '',
  ].join('\n');
  console.log(md);
  if (process.argv.includes('--write')) {
    log(
      `written to ${recordRun({ scenario: 'verify', title: 'Verification throughput', started, markdown: md, backends: BACKENDS }).join(', ')}`,
    );
  }
}

main().then(
  () => process.exit(0),
  (err: Error) => {
    console.error(`bench failed: ${err.stack ?? err.message}`);
    process.exit(1);
  },
);
