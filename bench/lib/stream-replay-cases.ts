// Owns the hardening benchmark's replay-throughput case of the stream:
//   stream-replay  1M stored pings (bulk-inserted in SQL before pingd starts: INSERT … SELECT generate_series),
//                  then /stream?since=0&until=live to 1 client, and to 50 clients at once, while intake runs
//                  (weblogUpdates.ping of new weblogs, ~20/s, open loop): events/s per client, pingd CPU per
//                  event delivered, intake acknowledged/offered and p50/p99 (baseline → during), the load
//                  average (uptime) at each figure, rows read and windows shared.
// The clients run in a child process (this file, run directly) so that reading gigabytes does not stall the
// event loop that times intake. `?until=live` ends each response at the end of the replay: a client is done
// when its response ends.
//
//   node --import tsx bench/lib/stream-replay-cases.ts <base url> <clients> <path>   (the clients)
import http from 'node:http';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import pg from 'pg';
import { agent, send } from './hostile-http.js';
import { openLoop, rpcPing, stats, type FeedCase, type FeedDetail, type Sample, type Stats } from './feed-hardening-cases.js';
import { cpuMicros } from './cpu.js';
import { envNumber } from './env.js';
import { isMain } from './run-direct.js';
import { track } from './servers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const f1 = (n: number | undefined) =>
  n === undefined || !Number.isFinite(n) ? 'n/a' : n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US');
const load = () =>
  `load ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`;
const between = (xs: Sample[], from: number, to: number) => xs.filter((x) => x.at >= from && x.at < to);

// ---------------------------------------------------------------------------------------------------
// The clients (child process)

interface ClientResult {
  status: number;
  events: number;
  bytes: number;
  /** From the request to the end of the response (the end of the replay). */
  ms: number;
  ended: boolean;
}

function runClients(base: string, n: number, path: string): void {
  if (!/^http:\/\/127\.\d{1,3}\.\d{1,3}\.\d{1,3}:\d+$/.test(base))
    throw new Error(`stream clients connect to loopback only, not to ${base}`);
  const via = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const mark = Buffer.from('\nevent: ping\n');
  const results: ClientResult[] = [];
  let left = n;
  const cpu0 = process.cpuUsage();
  const report = () => {
    const c = process.cpuUsage(cpu0);
    return `${JSON.stringify({ results, cpuUs: c.user + c.system })}\n`;
  };
  const finish = () => {
    if (--left === 0) process.stdout.write(report());
  };
  for (let i = 0; i < n; i++) {
    const r: ClientResult = { status: 0, events: 0, bytes: 0, ms: NaN, ended: false };
    results.push(r);
    const t0 = performance.now();
    http
      .get(`${base}${path}`, { agent: via, headers: { accept: 'text/event-stream' } }, (res) => {
        r.status = res.statusCode ?? 0;
        res.on('data', (chunk: Buffer) => {
          r.bytes += chunk.length;
          for (let at = chunk.indexOf(mark); at >= 0; at = chunk.indexOf(mark, at + mark.length)) r.events++;
        });
        res.on('end', () => {
          r.ended = true;
          r.ms = performance.now() - t0;
          finish();
        });
        res.on('error', () => finish());
      })
      .on('error', () => finish());
  }
  process.stdin.on('end', () => {
    process.stdout.write(report());
    process.exit(0);
  });
  process.stdin.resume();
}

interface ClientsReport {
  results: ClientResult[];
  /** The clients' process CPU, µs. */
  cpuUs: number;
}

function startClients(base: string, n: number, path: string): { done: Promise<ClientsReport>; stop(): void } {
  const p = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), base, String(n), path], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  track(p);
  const lines = createInterface({ input: p.stdout! });
  const done = new Promise<ClientsReport>((resolve) => {
    lines.once('line', (l) => resolve(JSON.parse(l) as ClientsReport));
    p.once('exit', () => resolve({ results: [], cpuUs: NaN }));
  });
  return { done, stop: () => p.stdin!.end() };
}

// ---------------------------------------------------------------------------------------------------
// Seeding: before pingd starts, straight into its database (migrated by then)

/** N pings of 10,000 weblogs, received over the last N ms (one a millisecond, an hour ago), ids in time order. */
const SEED = `insert into pings (weblog_id, received_at, method, name, url, tags)
  select 1 + i % 10000, now() - interval '1 hour' + i * interval '1 millisecond', 'ping', 'Stored weblog ' || (i % 10000),
         'http://w' || (i % 10000) || '.replay.example.org/', case when i % 3 = 0 then array['tech'] end
    from generate_series(1, $1::int) i`;

export async function seed(env: Record<string, string>, n: number): Promise<void> {
  if (env.DATABASE_URL) {
    const c = new pg.Client({ connectionString: env.DATABASE_URL });
    await c.connect();
    try {
      await c.query(SEED, [n]);
      await c.query('analyze pings');
    } finally {
      await c.end();
    }
    return;
  }
  const { PGlite } = await import('@electric-sql/pglite');
  const db = new PGlite(join(env.DATA_DIR, 'pgdata'));
  try {
    await db.query(SEED, [n]);
    await db.query('analyze pings');
  } finally {
    await db.close();
  }
}

// ---------------------------------------------------------------------------------------------------
// Measuring

async function metrics(url: string): Promise<{ rows: number; positions: number; shared: number }> {
  const via = agent(1);
  try {
    const text = (await send(url, { method: 'GET', path: '/metrics' }, via, 60_000)).body;
    const one = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
    return {
      rows: one(/^pingd_stream_replay_read_total\{what="rows"\} (\S+)$/m),
      positions: one(/^pingd_stream_replay_read_total\{what="positions"\} (\S+)$/m),
      shared: one(/^pingd_stream_replay_shared_total (\S+)$/m),
    };
  } finally {
    via.destroy();
  }
}

let seq = 0;
const newWeblog = () => {
  const n = ++seq;
  return rpcPing('Replay intake', `http://127.0.8.${1 + (n % 200)}:9/s${n.toString(36)}/`);
};

interface Run {
  clients: number;
  base: Stats;
  during: Stats;
  offered: number;
  results: ClientResult[];
  seconds: number;
  cpuUsPerEvent: number;
  cpuPercent: number;
  /** The clients' process, % of a core. */
  clientCpuPercent: number;
  rows: number;
  shared: number;
  loadStart: string;
  loadEnd: string;
}

async function measure(url: string, pid: number, clients: number, path: string, log: (s: string) => void): Promise<Run> {
  const rate = envNumber('BENCH_STREAM_REPLAY_RATE', 20);
  const baseSeconds = envNumber('BENCH_STREAM_REPLAY_BASELINE_SECONDS', 10);
  const cap = envNumber('BENCH_STREAM_REPLAY_SECONDS', 240);
  const loop = openLoop(url, newWeblog, 1000 / rate);
  await sleep(2000);
  const b0 = performance.now();
  await sleep(baseSeconds * 1000);
  const loadStart = load();
  const h0 = performance.now();
  const c0 = cpuMicros(pid);
  const m0 = await metrics(url);
  const run = startClients(url, clients, path);
  const early = await Promise.race([run.done, sleep(cap * 1000).then(() => undefined)]);
  if (early === undefined) run.stop();
  const report = early ?? (await run.done);
  const all = report.results;
  const h1 = performance.now();
  const c1 = cpuMicros(pid);
  const m1 = await metrics(url);
  const loadEnd = load();
  const samples = await loop.stop();
  const base = stats(between(samples, b0, h0));
  const during = stats(between(samples, h0, h1));
  const events = all.reduce((n, r) => n + r.events, 0);
  const seconds = (h1 - h0) / 1000;
  const r: Run = {
    clients,
    base,
    during,
    offered: Math.round(((h1 - h0) / 1000) * rate),
    results: all,
    seconds,
    cpuUsPerEvent: (c1 - c0) / Math.max(1, events),
    cpuPercent: (c1 - c0) / 10 / (h1 - h0),
    clientCpuPercent: report.cpuUs / 10 / (h1 - h0),
    rows: m1.rows - m0.rows,
    shared: m1.shared - m0.shared,
    loadStart,
    loadEnd,
  };
  log(`  ${clients} client(s): ${summary(r)}`);
  return r;
}

function perClient(r: Run): { min: number; median: number; max: number } {
  const rates = r.results.map((c) => c.events / ((Number.isFinite(c.ms) ? c.ms : r.seconds * 1000) / 1000)).sort((a, b) => a - b);
  return { min: rates[0] ?? NaN, median: rates[Math.floor(rates.length / 2)] ?? NaN, max: rates[rates.length - 1] ?? NaN };
}

function summary(r: Run): string {
  const pc = perClient(r);
  const ended = r.results.filter((c) => c.ended).length;
  return (
    `${ended}/${r.clients} finished in ${r.seconds.toFixed(1)} s; events/s per client min/median/max ${f1(pc.min)}/${f1(pc.median)}/${f1(pc.max)}; ` +
    `pingd ${r.cpuUsPerEvent.toFixed(2)} µs CPU per event (${f1(r.cpuPercent)}% of a core; the clients ${f1(r.clientCpuPercent)}%); rows read ${f1(r.rows)}, windows shared ${f1(r.shared)}; ` +
    `intake ${r.during.n - r.during.failed}/${r.offered} acknowledged, p50/p99 ${r.base.p50.toFixed(1)}/${r.base.p99.toFixed(1)} → ${r.during.p50.toFixed(1)}/${r.during.p99.toFixed(1)} ms; ${r.loadStart} → ${r.loadEnd}`
  );
}

const stored = () => Math.round(envNumber('BENCH_STREAM_REPLAY_EVENTS', 1_000_000));

const streamReplay: FeedCase = {
  id: 'stream-replay',
  title: 'S2. /stream?since=0 over 1M stored pings to 1 and to 50 clients, intake running',
  figure: 'events/s per client (min / median), intake p99 ms during',
  method:
    'S2: BENCH_STREAM_REPLAY_EVENTS (1,000,000) pings bulk-inserted before pingd starts (`INSERT … SELECT … FROM generate_series`, 10,000 weblogs, one ping a millisecond an hour ago); pingd with `RENDER_SCHEDULER=false PING_HOST_BUDGET=0` and the stream settings at their defaults (BENCH_PINGD_<VAR> overrides); ' +
    'intake of ~20 new weblogs a second in an open loop (BENCH_STREAM_REPLAY_RATE), a baseline of BENCH_STREAM_REPLAY_BASELINE_SECONDS (10), then `/stream?since=0&until=live` to 1 client, then to BENCH_STREAM_REPLAY_CLIENTS (50) at once, from a child process, until every response ends (the end of the replay) or BENCH_STREAM_REPLAY_SECONDS (240). ' +
    'Events/s per client = ping events it received / its time to the end; pingd CPU per event = pingd process CPU (its threads: the embedded database too) / events delivered to all clients; load average (`uptime`) at the start and end of each.',
  env: { RENDER_SCHEDULER: 'false', PING_HOST_BUDGET: '0' },
  seed: (env) => seed(env, stored()),
  async run(t, _s, log) {
    const n = Math.round(envNumber('BENCH_STREAM_REPLAY_CLIENTS', 50));
    const path = '/stream?since=0&until=live';
    const runs = [await measure(t.url, t.pid, 1, path, log), await measure(t.url, t.pid, n, path, log)];
    const details: FeedDetail[] = runs.map((r) => {
      const pc = perClient(r);
      return {
        what: `${r.clients} × ${path} over ${stored().toLocaleString('en-US')} stored pings`,
        figure: `events/s per client min/median **${f1(pc.min)} / ${f1(pc.median)}**; ${f1(r.cpuUsPerEvent)} µs pingd CPU per event (${f1(r.cpuPercent)}% of a core; the clients' process ${f1(r.clientCpuPercent)}%); intake p50/p99 ${f1(r.base.p50)}/${f1(r.base.p99)} → **${f1(r.during.p50)}/${f1(r.during.p99)}** ms, ${r.during.n - r.during.failed}/${r.offered} acknowledged`,
        outcome: `${r.results.filter((c) => c.ended).length}/${r.clients} finished in ${f1(r.seconds)} s; rows read ${f1(r.rows)}, windows shared ${f1(r.shared)}; ${r.loadStart} → ${r.loadEnd}`,
      };
    });
    const [one, many] = runs;
    return {
      label: `/stream?since=0&until=live over ${stored().toLocaleString('en-US')} stored pings: 1 client; ${n} at once`,
      headline: `${f1(perClient(one).median)} events/s, p99 ${f1(one.during.p99)} ms; ${n}×: min ${f1(perClient(many).min)} events/s each, p99 ${f1(many.during.p99)} ms`,
      outcome: runs.map((r) => `${r.clients}: ${summary(r)}`).join('; '),
      details,
    };
  },
};

export const STREAM_REPLAY_CASES: FeedCase[] = [streamReplay];

// The clients' process: node --import tsx bench/lib/stream-replay-cases.ts <base url> <clients> <path>
if (isMain(import.meta.url)) {
  const [base, clients, path] = process.argv.slice(2);
  runClients(base, Number(clients), path);
}
