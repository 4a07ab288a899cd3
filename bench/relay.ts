// Owns the relay benchmark: (1) intake throughput of `pingd serve` with no relay target, with one target at
// the default rate (60 a minute) and with one unthrottled target, each on a fresh database, in turn and
// repeated (medians), so any cost the relay puts on intake shows as a ratio; (2) relay throughput: N pings
// accepted (the relay yields to the burst), then relayed to the local target (Python's SimpleXMLRPCServer on 127.0.0.43) as fast as the
// target and RELAY_CONCURRENCY allow, timed at the target.
//
//   node --import tsx bench/relay.ts        (BENCH_BACKENDS=postgres,pglite BENCH_DATABASE_URL=… BENCH_RELAY_N=3000)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { createPostgresDatabase, createPgliteDatabase, startPingd, type BenchDatabase } from './lib/servers.js';
import { median, runLoad } from './lib/load.js';
import { pingSpec } from './lib/scenarios.js';
import { cpuMicros } from './lib/cpu.js';
// The test suite's harness for the same Python target.
import { startTarget, type Target } from '../test/push/relay/helpers.js';

const env = process.env;
const OPTS = {
  databaseUrl: env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
  backends: (env.BENCH_BACKENDS || 'postgres,pglite').split(',').map((s) => s.trim()) as ('postgres' | 'pglite')[],
  connections: Number(env.BENCH_CONNECTIONS || 64),
  duration: Number(env.BENCH_DURATION || 4),
  warmup: Number(env.BENCH_WARMUP || 2),
  rounds: Number(env.BENCH_ROUNDS || 2),
  relayN: Number(env.BENCH_RELAY_N || 3000),
};

const log = (s: string) => process.stderr.write(`${s}\n`);

function newDb(backend: 'postgres' | 'pglite'): Promise<BenchDatabase> {
  return backend === 'postgres' ? createPostgresDatabase(OPTS.databaseUrl) : createPgliteDatabase();
}

const BASE_ENV = { FETCH_ALLOW_ADDRESSES: '127.0.0.43/32', VERIFY_PINGS: 'off' };

/** Intake pings/s of one fresh server with `relayEnv`; also how many relays the target saw meanwhile. */
async function intakeRun(backend: 'postgres' | 'pglite', relayEnv: Record<string, string>, target: Target): Promise<{ rps: number; relayed: number }> {
  const db = await newDb(backend);
  const pingd = await startPingd({ env: { ...BASE_ENV, ...db.env, ...relayEnv } });
  try {
    await runLoad(pingd.url, pingSpec(), { connections: OPTS.connections, duration: OPTS.warmup });
    const before = target.calls.length;
    const r = await runLoad(pingd.url, pingSpec(), { connections: OPTS.connections, duration: OPTS.duration });
    return { rps: r.acks / r.seconds, relayed: target.calls.length - before };
  } finally {
    await pingd.stop();
    await db.drop();
  }
}

/**
 * Relays/s: N pings accepted first (64 connections: intake is busy, so the relay yields and the jobs
 * queue up), then the time from the end of intake to the N-th call at the target, and pingd's CPU per relay
 * over that stretch.
 */
async function relayRun(backend: 'postgres' | 'pglite', concurrency: number, target: Target): Promise<{ perSec: number; seconds: number; during: number; cpuUs: number }> {
  const db = await newDb(backend);
  target.calls.length = 0;
  // The target's own limit (2 in flight by default) raised with the instance's.
  const dir = mkdtempSync(join(tmpdir(), 'pingd-bench-relay-'));
  const file = join(dir, 'relay.yaml');
  writeFileSync(file, `targets:\n  - url: ${target.url}\n    rate_per_min: 600000\n    concurrency: ${concurrency}\n`);
  const pingd = await startPingd({ env: { ...BASE_ENV, ...db.env, RELAY_FILE: file, RELAY_CONCURRENCY: String(concurrency) } });
  try {
    const r = await runLoad(pingd.url, pingSpec(), { connections: OPTS.connections, amount: OPTS.relayN });
    const during = target.calls.length;
    const t0 = Date.now();
    const c0 = cpuMicros(pingd.proc.pid!);
    await target.until((calls) => calls.length >= r.acks, 300_000);
    const seconds = (Date.now() - t0) / 1000;
    const cpuUs = (cpuMicros(pingd.proc.pid!) - c0) / (r.acks - during);
    log(`    ${r.acks} pings accepted at ${r.rps.toFixed(0)}/s, ${during} relayed meanwhile`);
    return { perSec: (r.acks - during) / seconds, seconds, during, cpuUs };
  } finally {
    await pingd.stop();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const target = await startTarget('127.0.0.43');
  const lines: string[] = [];
  try {
    for (const backend of OPTS.backends) {
      log(`== ${backend}: intake (${OPTS.connections} connections, ${OPTS.duration} s runs after ${OPTS.warmup} s warm-up, ${OPTS.rounds} rounds)`);
      const configs: [string, Record<string, string>][] = [
        ['no target', {}],
        ['one target, 60/min', { RELAY_TARGETS: target.url }],
        ['one target, unthrottled', { RELAY_TARGETS: target.url, RELAY_RATE_PER_MIN: '600000' }],
      ];
      const rps = new Map<string, number[]>(configs.map(([k]) => [k, []]));
      const relayed = new Map<string, number[]>(configs.map(([k]) => [k, []]));
      for (let round = 0; round < OPTS.rounds; round++) {
        for (const [name, relayEnv] of configs) {
          const r = await intakeRun(backend, relayEnv, target);
          rps.get(name)!.push(r.rps);
          relayed.get(name)!.push(r.relayed);
          log(`  ${name}: ${r.rps.toFixed(0)} pings/s (target saw ${r.relayed} relays during the run)`);
        }
      }
      const baseline = median(rps.get('no target')!);
      lines.push(`| ${backend} | intake, pings/s (median of ${OPTS.rounds}) | ${configs.map(([k]) => `${k}: ${median(rps.get(k)!).toFixed(0)} (×${(median(rps.get(k)!) / baseline).toFixed(2)})`).join('; ')} |`);
      for (const c of [2, 8]) {
        log(`== ${backend}: relay throughput, ${c} in flight, ${OPTS.relayN} relays`);
        const r = await relayRun(backend, c, target);
        log(`  ${r.perSec.toFixed(0)} relays/s (${r.seconds.toFixed(1)} s), ${r.cpuUs.toFixed(0)} µs of pingd CPU per relay`);
        lines.push(`| ${backend} | relays/s at the target, ${c} in flight | ${r.perSec.toFixed(0)} (the last ${OPTS.relayN - r.during} of ${OPTS.relayN} in ${r.seconds.toFixed(1)} s after intake; ${r.cpuUs.toFixed(0)} µs pingd CPU per relay) |`);
      }
    }
  } finally {
    await target.close();
  }
  console.log(['| backend | measure | result |', '| --- | --- | --- |', ...lines].join('\n'));
}

await main();
