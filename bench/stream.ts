// The live stream under intake load: `pingd serve` (a child process) takes pings at the load the intake
// benchmark applies (autocannon, 32 connections, XML-RPC pings of distinct weblogs) while N consumers (their
// own process) read /stream; reported: intake with and without the consumers, and ping-to-event latency
// (receivedAt to arrival) p50/p99. Then the memory of idle connections: the app built in this process (so
// the heap can be collected before each reading), its heap and RSS before and after BENCH_STREAM_IDLE
// connections that receive nothing.
//
//   node --expose-gc --import tsx bench/stream.ts [--write]
//
// Environment: BENCH_STREAM_CLIENTS (100), BENCH_STREAM_SECONDS (8), BENCH_STREAM_IDLE (1000),
// BENCH_STREAM_BACKENDS (pglite,postgres), BENCH_DATABASE_URL (as npm run bench).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { startPingd, createPgliteDatabase, createPostgresDatabase, ROOT, type Child } from './lib/servers.js';
import { runLoad } from './lib/load.js';
import { pingSpec } from './lib/scenarios.js';
import { cpuMicros } from './lib/cpu.js';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/platform/config.js';
import { recordRun } from './lib/results.js';

const env = process.env;
const CLIENTS = Number(env.BENCH_STREAM_CLIENTS ?? 100);
const SECONDS = Number(env.BENCH_STREAM_SECONDS ?? 8);
const IDLE = Number(env.BENCH_STREAM_IDLE ?? 1000);
const BACKENDS = (env.BENCH_STREAM_BACKENDS ?? 'pglite,postgres').split(',').map((s) => s.trim()) as ('pglite' | 'postgres')[];
const DB_URL = env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const log = (s: string) => process.stderr.write(`${s}\n`);

interface Clients {
  ready: Promise<void>;
  finish(): Promise<Record<string, number>>;
}

function startClients(url: string, n: number): Clients {
  const proc = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'bench/lib/stream-clients.ts'), url, String(n)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: proc.stdout! });
  let onReady: () => void = () => undefined;
  let onResult: (r: Record<string, number>) => void = () => undefined;
  const ready = new Promise<void>((r) => (onReady = r));
  const result = new Promise<Record<string, number>>((r) => (onResult = r));
  lines.on('line', (l) => {
    const o = JSON.parse(l) as Record<string, number> & { ready?: boolean };
    if (o.ready) onReady();
    else onResult(o);
  });
  return {
    ready,
    async finish() {
      proc.stdin!.end();
      return result;
    },
  };
}

function memory(): { rss: number; heap: number } {
  for (let i = 0; i < 3; i++) (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed + m.external };
}

/** Memory per idle connection, on the app built in this process. */
async function idleMemory(backend: string, dbEnv: Record<string, string>): Promise<string> {
  const app = await buildApp({
    config: loadConfig({
      ...dbEnv,
      LOG_LEVEL: 'silent',
      VERIFY_PINGS: 'off',
      RENDER_SCHEDULER: 'false',
      STREAM_MAX_CLIENTS: String(IDLE + 10),
    }),
    logger: false,
  });
  try {
    await app.listen({ host: '127.0.0.1', port: 0 });
    const addr = app.server.address();
    const url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
    // A first connection warms the route and the hub.
    const warm = startClients(url, 1);
    await warm.ready;
    await new Promise((r) => setTimeout(r, 500));
    const m0 = memory();
    const idle = startClients(url, IDLE);
    await idle.ready;
    await new Promise((r) => setTimeout(r, 2000));
    const m1 = memory();
    const clients = app.stream.size;
    await idle.finish();
    await warm.finish();
    return `| ${backend} | ${IDLE} idle | heap+external ${((m1.heap - m0.heap) / IDLE / 1024).toFixed(1)} KiB/connection | RSS ${((m1.rss - m0.rss) / IDLE / 1024).toFixed(1)} KiB/connection | ${clients} served |`;
  } finally {
    await app.close();
  }
}

async function intake(pingd: Child): Promise<{ rps: number; cpuUs: number; acks: number }> {
  const cpu0 = cpuMicros(pingd.proc.pid!);
  const r = await runLoad(pingd.url, pingSpec(), { connections: 64, duration: SECONDS });
  return { rps: r.acks / r.seconds, cpuUs: (cpuMicros(pingd.proc.pid!) - cpu0) / Math.max(1, r.acks), acks: r.acks };
}

async function runBackend(backend: 'pglite' | 'postgres'): Promise<string[]> {
  const db = backend === 'postgres' ? await createPostgresDatabase(DB_URL) : await createPgliteDatabase();
  let pingd: Child | undefined;
  const rows: string[] = [];
  try {
    // As the intake benchmark runs it (npm run bench): no render ticks competing for the embedded session.
    pingd = await startPingd({ env: { ...db.env, PING_MIN_INTERVAL: '0', RENDER_SCHEDULER: 'false' } });
    await intake(pingd); // warm-up
    const alone = await intake(pingd);
    const clients = startClients(pingd.url, CLIENTS);
    await clients.ready;
    const withStreams = await intake(pingd);
    await new Promise((r) => setTimeout(r, 1000));
    const lat = await clients.finish();
    rows.push(
      `| ${backend} | ${alone.rps.toFixed(0)} (${alone.cpuUs.toFixed(0)} µs) | ${withStreams.rps.toFixed(0)} (${withStreams.cpuUs.toFixed(0)} µs) | ${CLIENTS} | ${lat.events} | **${lat.p50}** | ${lat.p90} | **${lat.p99}** | ${lat.max} |`,
    );
    log(rows[rows.length - 1]);

    await pingd.stop();
    pingd = undefined;
    rows.push(await idleMemory(backend, db.env));
    log(rows[rows.length - 1]);
  } finally {
    await pingd?.stop();
    await db.drop();
  }
  return rows;
}

async function main(): Promise<void> {
  const started = new Date();
  const out: string[] = [];
  for (const b of BACKENDS) out.push(...(await runBackend(b)));
  const md = [
    `# Stream benchmark (${new Date().toISOString().slice(0, 10)})`,
    '',
    `Intake: autocannon, 64 connections (as \`npm run bench\`), ${SECONDS} s, XML-RPC pings of distinct weblogs (accepted/s, pingd CPU µs per ping), first without and then with ${CLIENTS} consumers on /stream. Latency: a ping's receivedAt (the database's now(), i.e. its transaction's start) to the arrival of its event at a consumer, ms, sampled on 20 of the consumers.`,
    '',
    '| backend | intake alone | intake with streams | streams | events sampled | p50 ms | p90 ms | p99 ms | max ms |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...out.filter((l) => !l.includes(' idle |')),
    '',
    'Idle connections: the app in the bench process, heap (+ external) and RSS after a forced collection, before and after the connections opened, per connection.',
    '',
    '| backend | connections | heap | RSS | |',
    '| --- | --- | --- | --- | --- |',
    ...out.filter((l) => l.includes(' idle |')),
    '',
  ].join('\n');
  process.stdout.write(md);
  if (process.argv.includes('--write')) {
    const written = recordRun({ scenario: 'stream', title: 'The stream under intake', started, markdown: md, backends: BACKENDS });
    console.error(`results written to ${written.join(', ')}`);
  }
}

await main();
