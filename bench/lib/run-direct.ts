// Owns running one benchmark scenario as its own command (`node --import tsx bench/<name>.ts [--write]`):
// the options every scenario reads from the environment, and the exit status.
import { pathToFileURL } from 'node:url';

export interface DirectOptions {
  databaseUrl: string;
  backends: ('postgres' | 'pglite')[];
  write: boolean;
}

/** Whether `moduleUrl` is the script node was started with. */
export const isMain = (moduleUrl: string): boolean => Boolean(process.argv[1]) && moduleUrl === pathToFileURL(process.argv[1]).href;

/** Runs `run` with the environment's options and exits 0 when it says the run passed, 1 otherwise. */
export function runDirect(name: string, run: (o: DirectOptions) => Promise<boolean>): void {
  const env = process.env;
  run({
    databaseUrl: env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
    backends: (env.BENCH_BACKENDS || 'postgres,pglite').split(',').map((x) => x.trim()) as ('postgres' | 'pglite')[],
    write: process.argv.includes('--write') || env.BENCH_WRITE === '1',
  }).then(
    (ok) => process.exit(ok ? 0 : 1),
    (err: Error) => {
      console.error(`${name} bench failed: ${err.stack ?? err.message}`);
      process.exit(1);
    },
  );
}
