// Owns the relay benchmark: (1) intake throughput of `pingd serve` with no relay target, with one target at
// the default rate (60 a minute) and with one unthrottled target, each on a fresh database, in turn and
// repeated (medians), so any cost the relay puts on intake shows as a ratio; (2) relay throughput: N pings
// accepted (the relay yields to the burst), then relayed to the local target (Python's SimpleXMLRPCServer on 127.0.0.43) as fast as the
// target and RELAY_CONCURRENCY allow, timed at the target.
//
//   node --import tsx bench/relay.ts        (BENCH_BACKENDS=postgres,pglite BENCH_DATABASE_URL=… BENCH_RELAY_N=3000)
//   BENCH_INTAKE=0 skips (1): relay throughput and pingd CPU per relay alone.
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
  intake: env.BENCH_INTAKE !== '0',
};

const log = (s: string) => process.stderr.write(`${s}\n`);

function newDb(backend: 'postgres' | 'pglite'): Promise<BenchDatabase> {
  return backend === 'postgres' ? createPostgresDatabase(OPTS.databaseUrl) : createPgliteDatabase();
}

const BASE_ENV = { FETCH_ALLOW_ADDRESSES: '127.0.0.43/32', VERIFY_PINGS: 'off' };

/** Intake pings/s (and p50 latency, pingd CPU per ping) of one fresh server with `relayEnv`; also the relays the target saw meanwhile. */
async function intakeRun(
  backend: 'postgres' | 'pglite',
  relayEnv: Record<string, string>,
  target: Target,
  connections: number,
): Promise<{ rps: number; p50: number; cpuUs: number; relayed: number }> {
  const db = await newDb(backend);
  const pingd = await startPingd({ env: { ...BASE_ENV, ...db.env, ...relayEnv } });
  try {
    await runLoad(pingd.url, pingSpec(), { connections, duration: OPTS.warmup });
    const before = target.calls.length;
    const c0 = cpuMicros(pingd.proc.pid!);
    const r = await runLoad(pingd.url, pingSpec(), { connections, duration: OPTS.duration });
    const cpuUs = (cpuMicros(pingd.proc.pid!) - c0) / Math.max(1, r.acks);
    return { rps: r.acks / r.seconds, p50: r.p50, cpuUs, relayed: target.calls.length - before };
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
async function relayRun(
  backend: 'postgres' | 'pglite',
  concurrency: number,
  target: Target,
): Promise<{ perSec: number; seconds: number; during: number; cpuUs: number }> {
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
      const configs: [string, Record<string, string>][] = [
        ['no target', {}],
        ['one target, 60/min', { RELAY_TARGETS: target.url }],
        ['one target, unthrottled', { RELAY_TARGETS: target.url, RELAY_RATE_PER_MIN: '600000' }],
      ];
      // 64 connections: a burst (the relay yields to it); 2 connections: light load, below the yield
      // threshold, where the relay runs alongside intake.
      for (const connections of OPTS.intake ? [OPTS.connections, 2] : []) {
        log(
          `== ${backend}: intake (${connections} connections, ${OPTS.duration} s runs after ${OPTS.warmup} s warm-up, ${OPTS.rounds} rounds)`,
        );
        const runs = new Map<string, { rps: number; p50: number; cpuUs: number; relayed: number }[]>(configs.map(([k]) => [k, []]));
        for (let round = 0; round < OPTS.rounds; round++) {
          for (const [name, relayEnv] of configs) {
            const r = await intakeRun(backend, relayEnv, target, connections);
            runs.get(name)!.push(r);
            log(
              `  ${name}: ${r.rps.toFixed(0)} pings/s, p50 ${r.p50} ms, ${r.cpuUs.toFixed(0)} µs pingd CPU per ping (target saw ${r.relayed} relays during the run)`,
            );
          }
        }
        const med = (k: string, f: (x: { rps: number; p50: number; cpuUs: number; relayed: number }) => number) =>
          median(runs.get(k)!.map(f));
        const base = med('no target', (x) => x.rps);
        lines.push(
          `| ${backend} | intake, ${connections} connections (medians of ${OPTS.rounds}) | ${configs
            .map(
              ([k]) =>
                `${k}: ${med(k, (x) => x.rps).toFixed(0)}/s (×${(med(k, (x) => x.rps) / base).toFixed(2)}), p50 ${med(k, (x) => x.p50)} ms, ${med(k, (x) => x.cpuUs).toFixed(0)} µs CPU/ping, ${med(k, (x) => x.relayed)} relays meanwhile`,
            )
            .join('; ')} |`,
        );
      }
      for (const c of [2, 8]) {
        log(`== ${backend}: relay throughput, ${c} in flight, ${OPTS.relayN} relays`);
        const r = await relayRun(backend, c, target);
        log(`  ${r.perSec.toFixed(0)} relays/s (${r.seconds.toFixed(1)} s), ${r.cpuUs.toFixed(0)} µs of pingd CPU per relay`);
        lines.push(
          `| ${backend} | relays/s at the target, ${c} in flight | ${r.perSec.toFixed(0)} (the last ${OPTS.relayN - r.during} of ${OPTS.relayN} in ${r.seconds.toFixed(1)} s after intake; ${r.cpuUs.toFixed(0)} µs pingd CPU per relay) |`,
        );
      }
    }
  } finally {
    await target.close();
  }
  console.log(['| backend | measure | result |', '| --- | --- | --- |', ...lines].join('\n'));
}

await main();
