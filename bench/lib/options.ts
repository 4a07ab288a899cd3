// Owns the settings the autocannon scenarios of `npm run bench` share (BENCH_* variables, read once) and
// the environment pingd is started with.
import { envNumber } from './env.js';

const env = process.env;
const num = envNumber;
export const OPTS = {
  databaseUrl: env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
  duration: num('BENCH_DURATION', 4),
  runs: Math.round(num('BENCH_RUNS', 3)),
  warmup: num('BENCH_WARMUP', 2),
  connections: Math.round(num('BENCH_CONNECTIONS', 64)),
  backends: (env.BENCH_BACKENDS || 'postgres,pglite').split(',').map((s) => s.trim()) as ('postgres' | 'pglite')[],
  scenarios: env.BENCH_SCENARIOS ? env.BENCH_SCENARIOS.split(',').map((s) => s.trim()) : undefined,
  shortWeblogs: Math.round(num('BENCH_SHORT_WEBLOGS', 5000)),
  hourWeblogs: Math.round(num('BENCH_HOUR_WEBLOGS', 100_000)),
  profile: env.BENCH_PROFILE === '1',
  write: process.argv.includes('--write') || env.BENCH_WRITE === '1',
};

/** pingd's environment: LOG_LEVEL=warn plus every BENCH_PINGD_<VAR> (BENCH_PINGD_ROOT says which checkout's pingd). */
export function pingdEnv(extra: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = { LOG_LEVEL: 'warn', ...extra };
  for (const [k, v] of Object.entries(env))
    if (k.startsWith('BENCH_PINGD_') && k !== 'BENCH_PINGD_ROOT' && v !== undefined) out[k.slice(12)] = v;
  return out;
}

export const wanted = (id: string) => !OPTS.scenarios || OPTS.scenarios.includes(id);
export const log = (s: string) => process.stderr.write(`${s}\n`);
