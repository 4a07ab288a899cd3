// Owns the hardening benchmark's fan-out cases about the stream:
//   fanout-replay  ~100k stored events (pinged in over HTTP first), then 200 clients opening /stream?since=0 at
//                  once, twice: taking every event, and with a ?host= filter that matches none of them. Intake
//                  p50/p99 (weblogUpdates.ping of new weblogs, ~20/s, open loop) in a baseline period and while
//                  the replays run, and what the replays cost: how long they take to finish, events per
//                  second they deliver, bytes the clients got, rows/positions pingd read for them.
// The 200 clients run in a child process (this file, run directly), so that reading gigabytes does not
// stall the event loop that times intake. Works against pingd before the bound (BENCH_PINGD_ROOT): what it
// lacks reads "n/a".
//
//   node --import tsx bench/lib/fanout-stream-cases.ts <base url> <clients> <path> <sentinel>   (the clients)
import http from 'node:http';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { agent, send } from './hostile-http.js';
import type { Target } from './hardening-cases.js';
import { openLoop, rpcPing, stats, type FeedCase, type FeedDetail, type Sample, type Stats } from './feed-hardening-cases.js';
import { runLoad } from './load.js';
import { isRpcAck, pingSpec } from './scenarios.js';
import { cpuMicros } from './cpu.js';
import { envNumber } from './env.js';
import { isMain } from './run-direct.js';
import { track } from './servers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const f1 = (n: number | undefined) =>
  n === undefined || !Number.isFinite(n) ? 'n/a' : n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US');
const count = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? 'n/a' : Math.round(n).toLocaleString('en-US'));
const bytes = (n: number) =>
  n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(2)} GiB` : n >= 2 ** 20 ? `${(n / 2 ** 20).toFixed(1)} MiB` : `${(n / 1024).toFixed(1)} KiB`;
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const between = (xs: Sample[], from: number, to: number) => xs.filter((x) => x.at >= from && x.at < to);
const unacked = (s: Stats) => (s.failed ? `, **${s.failed} not acknowledged**` : '');

/** The filter host: no filled weblog is on it, only each variant's sentinel ping. */
const SENTINEL_HOST = 'replay-sentinel.example.net';

// ---------------------------------------------------------------------------------------------------
// The clients (child process)

/** What the clients saw: one JSON line when all have their answer's headers, one at the end. */
export interface ClientsReport {
  served: number;
  refused: number;
  failed: number;
  bytes: number;
  events: number;
  /** Clients that received the sentinel (their replay is over). */
  done: number;
  /** From the first connection to the last sentinel received, when all served clients got it. */
  allDoneMs: number | null;
}

function runClients(base: string, n: number, path: string, sentinel: string): void {
  if (!/^http:\/\/127\.\d{1,3}\.\d{1,3}\.\d{1,3}:\d+$/.test(base))
    throw new Error(`stream clients connect to loopback only, not to ${base}`);
  const via = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const needle = Buffer.from(sentinel);
  const mark = Buffer.from('\nevent: ');
  const r: ClientsReport = { served: 0, refused: 0, failed: 0, bytes: 0, events: 0, done: 0, allDoneMs: null };
  const t0 = performance.now();
  let answered = 0;
  let lastDone = 0;
  const out = (x: object) => process.stdout.write(`${JSON.stringify(x)}\n`);
  const answer = () => {
    if (++answered === n) out({ ready: true, served: r.served, refused: r.refused, failed: r.failed });
  };
  for (let i = 0; i < n; i++) {
    http
      .get(`${base}${path}`, { agent: via, headers: { accept: 'text/event-stream' } }, (res) => {
        if (res.statusCode !== 200 || res.headers['x-pingd-refused'] !== undefined) {
          if (res.statusCode === 200) r.refused++;
          else r.failed++;
          res.resume();
          answer();
          return;
        }
        r.served++;
        answer();
        let tail = Buffer.alloc(0);
        let done = false;
        res.on('data', (chunk: Buffer) => {
          r.bytes += chunk.length;
          for (let at = chunk.indexOf(mark); at >= 0; at = chunk.indexOf(mark, at + mark.length)) r.events++;
          if (done) return;
          const hay = tail.length ? Buffer.concat([tail, chunk]) : chunk;
          if (hay.indexOf(needle) >= 0) {
            done = true;
            r.done++;
            lastDone = performance.now() - t0;
            if (r.done === r.served && answered === n) {
              r.allDoneMs = lastDone;
              out({ allDone: true, ms: lastDone });
            }
          } else tail = Buffer.from(hay.subarray(Math.max(0, hay.length - needle.length)));
        });
        res.on('error', () => undefined);
      })
      .on('error', () => {
        r.failed++;
        answer();
      });
  }
  const report = () => {
    out({ report: r });
    process.exit(0);
  };
  process.stdin.on('end', report);
  process.stdin.resume();
}

/** One line of the clients' process: ready (with the answers' counts), all done, or the final report. */
interface ClientsLine {
  ready?: boolean;
  allDone?: boolean;
  ms?: number;
  report?: ClientsReport;
  served: number;
  refused: number;
  failed: number;
}

export interface Clients {
  ready: Promise<{ served: number; refused: number; failed: number }>;
  allDone: Promise<number>;
  stop(): Promise<ClientsReport | undefined>;
}

export function startClients(base: string, n: number, path: string, sentinel: string): Clients {
  const p = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), base, String(n), path, sentinel], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  track(p);
  const lines = createInterface({ input: p.stdout! });
  let ready!: (x: { served: number; refused: number; failed: number }) => void;
  let allDone!: (ms: number) => void;
  let report!: (r: ClientsReport | undefined) => void;
  const reported = new Promise<ClientsReport | undefined>((r) => (report = r));
  lines.on('line', (l) => {
    const m = JSON.parse(l) as ClientsLine;
    if (m.ready) ready(m);
    else if (m.allDone) allDone(m.ms!);
    else if (m.report) report(m.report);
  });
  p.once('exit', () => report(undefined));
  return {
    ready: new Promise((r) => (ready = r)),
    allDone: new Promise((r) => (allDone = r)),
    async stop() {
      p.stdin!.end();
      return reported;
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// Talking to pingd

interface StreamFigures {
  clients: number;
  /** Rows and positions read by replays (pingd_stream_replay_read_total; NaN before the bound). */
  rows: number;
  positions: number;
}

async function figures(t: Target): Promise<StreamFigures> {
  const via = agent(1);
  try {
    const text = (await send(t.url, { method: 'GET', path: '/metrics' }, via, 60_000)).body;
    const one = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
    return {
      clients: one(/^pingd_stream_clients (\S+)$/m),
      rows: one(/^pingd_stream_replay_read_total\{what="rows"\} (\S+)$/m),
      positions: one(/^pingd_stream_replay_read_total\{what="positions"\} (\S+)$/m),
    };
  } catch {
    return { clients: NaN, rows: NaN, positions: NaN };
  } finally {
    via.destroy();
  }
}

let seq = 0;
/** A ping of a new weblog (no throttle: a real insert) on one of 200 loopback hosts (never fetched: VERIFY_PINGS=off). */
const newWeblog = () => {
  const n = ++seq;
  return rpcPing('Replay load', `http://127.0.7.${1 + (n % 200)}:9/s${n.toString(36)}/`);
};

/**
 * A ping on SENTINEL_HOST, sent again (a new weblog each time) until acknowledged or `until` passes: under
 * the attack an earlier pingd answers "the database did not answer in time".
 */
async function sentinel(t: Target, until: number): Promise<boolean> {
  const via = agent(1);
  try {
    while (performance.now() < until) {
      const r = rpcPing('Sentinel', `http://${SENTINEL_HOST}/${(++seq).toString(36)}/`);
      const a = await send(t.url, r, via, 120_000).catch(() => undefined);
      if (a && isRpcAck(a.status, a.body)) return true;
      await sleep(500);
    }
    return false;
  } finally {
    via.destroy();
  }
}

interface Variant {
  what: string;
  path: string;
}

interface VariantResult {
  v: Variant;
  base: Stats;
  during: Stats;
  seconds: number;
  clients: ClientsReport | undefined;
  served: number;
  refused: number;
  rows: number;
  positions: number;
  /** pingd's CPU (its process and threads: the embedded database's too), % of one core. */
  cpuBase: number;
  cpuDuring: number;
  /** Estimated seconds for all replays to finish, from the share done in the window (NaN: unknown). */
  estimate: number;
}

async function runVariant(t: Target, v: Variant, n: number, stored: number, log: (s: string) => void): Promise<VariantResult> {
  const rate = envNumber('BENCH_FANOUT_REPLAY_RATE', 20);
  const baseSeconds = envNumber('BENCH_FANOUT_REPLAY_BASELINE_SECONDS', 15);
  const cap = envNumber('BENCH_FANOUT_REPLAY_SECONDS', 60);
  const loop = openLoop(t.url, newWeblog, 1000 / rate);
  await sleep(3000); // warm-up, not counted
  const b0 = performance.now();
  const c0 = cpuMicros(t.pid);
  await sleep(baseSeconds * 1000);
  const h0 = performance.now();
  const c1 = cpuMicros(t.pid);
  const f0 = await figures(t);
  const clients = startClients(t.url, n, v.path, SENTINEL_HOST);
  const ready = await Promise.race([clients.ready, sleep(120_000).then(() => undefined)]);
  // After every client has its headers: the newest event, so receiving it means a replay is over.
  const acked = await sentinel(t, h0 + cap * 1000);
  if (!acked) log('  the sentinel ping was never acknowledged: no client can be seen to finish');
  const left = cap * 1000 - (performance.now() - h0);
  const finished = await Promise.race([clients.allDone, sleep(Math.max(0, left)).then(() => undefined)]);
  const h1 = performance.now();
  const c2 = cpuMicros(t.pid);
  const f1_ = await figures(t);
  const report = await clients.stop();
  const samples = await loop.stop();
  const base = stats(between(samples, b0, h0));
  const during = stats(between(samples, h0, h1));
  const seconds = (h1 - h0) / 1000;
  const served = report?.served ?? ready?.served ?? 0;
  const rows = f1_.rows - f0.rows;
  const positions = f1_.positions - f0.positions;
  // Share of the work done: by positions read where pingd counts them, else by events received (every event).
  const share = Number.isFinite(positions)
    ? positions / (served * stored)
    : v.path.includes('host=')
      ? NaN
      : (report?.events ?? 0) / (served * stored);
  const estimate = finished !== undefined ? finished / 1000 : share > 0 ? seconds / Math.min(1, share) : NaN;
  // Let the connections go before the next variant.
  for (let i = 0; i < 100 && (await figures(t)).clients > 0; i++) await sleep(100);
  log(
    `  ${v.what}: intake p50/p99 ${base.p50.toFixed(1)}/${base.p99.toFixed(1)} → ${during.p50.toFixed(1)}/${during.p99.toFixed(1)} ms (max ${during.max.toFixed(0)}); ` +
      `pingd CPU ${((c1 - c0) / 10 / (h0 - b0)).toFixed(0)}% → ${((c2 - c1) / 10 / (h1 - h0)).toFixed(0)}%; ${served} served, ${report?.refused ?? ready?.refused ?? 'n/a'} refused; ${report?.done ?? 0} finished in ${seconds.toFixed(1)} s; ${count(report?.events)} events, ${bytes(report?.bytes ?? 0)}; replay rows/positions read ${count(rows)}/${count(positions)}`,
  );
  const cpuBase = (c1 - c0) / 10 / (h0 - b0);
  const cpuDuring = (c2 - c1) / 10 / (h1 - h0);
  const refused = report?.refused ?? ready?.refused ?? NaN;
  return { v, base, during, seconds, clients: report, served, refused, rows, positions, cpuBase, cpuDuring, estimate };
}

// ---------------------------------------------------------------------------------------------------
// The case

const fanoutReplay: FeedCase = {
  id: 'fanout-replay',
  title: 'S1. 200 clients replaying /stream?since=0 over ~100k stored events',
  figure: 'intake p50 / p99 ms: baseline → while 200 replays run (every event; a filter that matches nothing)',
  method:
    'S1: pingd with `RENDER_SCHEDULER=false PING_HOST_BUDGET=0`, the stream settings at their defaults; BENCH_FANOUT_REPLAY_EVENTS (100,000) weblogUpdates.ping of new weblogs sent first (32 connections); ' +
    'then for each variant: weblogUpdates.ping of a new weblog ~20 times a second in an open loop (BENCH_FANOUT_REPLAY_RATE; each timed from when it was due), 3 s warm-up, a baseline of BENCH_FANOUT_REPLAY_BASELINE_SECONDS (15), ' +
    `then BENCH_FANOUT_REPLAY_CLIENTS (200) connections to /stream?since=0 at once (every event), or /stream?since=0&host=${SENTINEL_HOST} (matches none of the stored events), from a child process; once all have their headers, one ping on ${SENTINEL_HOST} (the newest event: a client that receives it has finished its replay); ` +
    "intake figures from the clients' connecting until all finished or BENCH_FANOUT_REPLAY_SECONDS (60); the estimate to finish from the share of the stored positions read (pingd_stream_replay_read_total) or, where pingd does not count them, of the events received.",
  env: { RENDER_SCHEDULER: 'false', PING_HOST_BUDGET: '0' },
  async run(t, _s, log) {
    const stored = Math.round(envNumber('BENCH_FANOUT_REPLAY_EVENTS', 100_000));
    const n = Math.round(envNumber('BENCH_FANOUT_REPLAY_CLIENTS', 200));
    const fill0 = performance.now();
    const fill = await runLoad(t.url, pingSpec(), { connections: 32, amount: stored });
    log(`  stored ${fill.acks.toLocaleString('en-US')} pings in ${secs(performance.now() - fill0)} (${Math.round(fill.rps)}/s)`);
    const variants: Variant[] = [
      { what: 'every event', path: '/stream?since=0' },
      { what: 'a filter that matches nothing', path: `/stream?since=0&host=${SENTINEL_HOST}` },
    ];
    const results: VariantResult[] = [];
    for (const v of variants) results.push(await runVariant(t, v, n, fill.acks, log));
    const details: FeedDetail[] = [];
    for (const r of results) {
      const c = r.clients;
      const finish =
        c?.allDoneMs != null
          ? `all finished in **${secs(c.allDoneMs)}**`
          : `${count(c?.done)} of ${r.served} finished in ${f1(r.seconds)} s (estimate for all: ${Number.isFinite(r.estimate) ? `**${f1(r.estimate)} s**` : 'n/a'})`;
      details.push(
        {
          what: `${r.v.what}: intake, baseline`,
          figure: `p50 ${f1(r.base.p50)} ms, p99 ${f1(r.base.p99)} ms, max ${f1(r.base.max)} ms (${r.base.n} pings${unacked(r.base)})`,
          outcome: '',
        },
        {
          what: `${r.v.what}: intake while ${n} clients replay (${r.v.path})`,
          figure: `p50 **${f1(r.during.p50)}** ms, p99 **${f1(r.during.p99)}** ms, max ${f1(r.during.max)} ms (${r.during.n} pings${unacked(r.during)})`,
          outcome: `${r.served} served, ${count(r.refused)} refused`,
        },
        {
          what: `${r.v.what}: the replays' cost`,
          figure: `${finish}; ${count((c?.events ?? 0) / r.seconds)} events/s delivered, ${bytes(c?.bytes ?? 0)} to the clients in ${f1(r.seconds)} s`,
          outcome: `pingd read for replays ${count(r.rows / r.seconds)} rows/s, ${count(r.positions / r.seconds)} positions/s; pingd CPU ${f1(r.cpuBase)}% of a core in the baseline → **${f1(r.cpuDuring)}%**`,
        },
      );
    }
    const [all, none] = results;
    return {
      label: `${n} × /stream?since=0 over ${fill.acks.toLocaleString('en-US')} stored events: every event; ?host= matching none`,
      headline: `${f1(all.base.p50)} / ${f1(all.base.p99)} → **${f1(all.during.p50)} / ${f1(all.during.p99)}**; ${f1(none.base.p50)} / ${f1(none.base.p99)} → **${f1(none.during.p50)} / ${f1(none.during.p99)}**`,
      outcome: results
        .map(
          (r) =>
            `${r.v.what}: ${r.clients?.allDoneMs != null ? `finished in ${secs(r.clients.allDoneMs)}` : `est. ${f1(r.estimate)} s to finish`}, ${count((r.clients?.events ?? 0) / r.seconds)} events/s, ${bytes(r.clients?.bytes ?? 0)}`,
        )
        .join('; '),
      details,
    };
  },
};

export const STREAM_CASES: FeedCase[] = [fanoutReplay];

// The clients' process: node --import tsx bench/lib/fanout-stream-cases.ts <base url> <clients> <path> <sentinel>
if (isMain(import.meta.url)) {
  const [base, clients, path, sentinel] = process.argv.slice(2);
  runClients(base, Number(clients), path, sentinel);
}
