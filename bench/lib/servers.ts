// Owns the processes a benchmark drives: pingd (`src/cli.ts serve`, of this checkout or BENCH_PINGD_ROOT's)
// and the baseline app, each a child process so that neither shares an event loop with the load generator,
// and their throwaway databases.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { join, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import pg from 'pg';
import { describeConfig } from '../../src/platform/config.js';
import { isAlive } from '../../src/platform/db/database.js';

export const ROOT = new URL('../..', import.meta.url).pathname;
/** The checkout whose pingd is started: BENCH_PINGD_ROOT (another worktree, to measure an earlier commit), else this one. */
export const PINGD_ROOT = process.env.BENCH_PINGD_ROOT ? resolve(process.env.BENCH_PINGD_ROOT) : ROOT;
const GUARD = new URL('./orphan-guard.ts', import.meta.url).href;

export interface Child {
  url: string;
  port: number;
  proc: ChildProcess;
  /** Graceful stop (SIGTERM, waits for exit); the server drains its queue first. */
  stop(): Promise<number | null>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

async function waitReady(url: string, proc: ChildProcess, stderr: () => string, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (proc.exitCode !== null) throw new Error(`server exited with ${proc.exitCode} before it was ready:\n${stderr()}`);
    try {
      const r = await fetch(url);
      await r.arrayBuffer();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(`server at ${url} not ready after ${timeoutMs} ms:\n${stderr()}`);
}

const live = new Set<ChildProcess>();
// Interrupted (Ctrl-C) or failing: stop the servers first (each also stops by itself when orphaned).
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    for (const p of live) p.kill('SIGTERM');
    process.exit(130);
  });
}
process.once('exit', () => {
  for (const p of live) p.kill('SIGTERM');
});

/** Stopped (SIGTERM) if the bench is interrupted or exits before stopping it. */
export function track(proc: ChildProcess): void {
  live.add(proc);
  proc.once('exit', () => live.delete(proc));
}

/** A started process as a Child: tracked (killed with the bench), stopped gracefully, then killed after 30 s. */
export function wrap(proc: ChildProcess, port: number): Child {
  track(proc);
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    proc,
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 30_000);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
  };
}

export interface PingdOptions {
  env: Record<string, string>;
  /** Extra node flags (--cpu-prof …). */
  nodeArgs?: string[];
  /** Modules loaded (--import) after tsx, so they may be TypeScript (bench/lib/query-counter.ts). */
  imports?: string[];
  /** Run this tsc build (compilePingd) as `node dist/cli.js serve` instead of src/ under tsx; imports are ignored. */
  compiled?: CompiledPingd;
  /** Keep pingd's log (its stdout: JSON lines, the last 200,000 characters) as the child's `log`; otherwise stdout is not read. */
  keepLog?: boolean;
}

/** A tsc build of pingd in a temporary tree (compilePingd). */
export interface CompiledPingd {
  root: string;
  /** The build's dist/ (profiles' frames there map back to src/). */
  dist: string;
  /** Removes the tree. */
  dispose(): void;
}

/**
 * pingd as `npm start` and the image run it: `tsc -p tsconfig.build.json` into a temporary tree beside links
 * to the checkout's migrations/, src/ (templates and assets), node_modules/ and package.json. Without tsx,
 * no esbuild helpers run in measured code and no transform cache counts in the process's memory.
 */
export function compilePingd(log: (s: string) => void): CompiledPingd {
  const root = mkdtempSync(join(tmpdir(), 'pingd-bench-build-'));
  const dist = join(root, 'dist');
  log(`compiling pingd with tsc into ${dist}`);
  const r = spawnSync(
    process.execPath,
    [join(PINGD_ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(PINGD_ROOT, 'tsconfig.build.json'), '--outDir', dist],
    { cwd: PINGD_ROOT, encoding: 'utf8' },
  );
  if (!existsSync(join(dist, 'cli.js'))) throw new Error(`tsc did not build dist/cli.js: ${(r.stdout + r.stderr).slice(-1000)}`);
  if (r.status !== 0)
    log(`  tsc reported errors (the JavaScript was emitted all the same): ${r.stdout.trim().split('\n').slice(0, 3).join(' / ')}`);
  for (const name of ['migrations', 'src', 'node_modules', 'package.json']) symlinkSync(join(PINGD_ROOT, name), join(root, name));
  // The orphan guard in plain JavaScript (bench/lib/orphan-guard.ts needs tsx).
  writeFileSync(
    join(root, 'orphan-guard.mjs'),
    'const parent = process.ppid;\nsetInterval(() => { if (process.ppid !== parent) process.kill(process.pid, "SIGTERM"); }, 500).unref();\n',
  );
  return { root, dist, dispose: () => rmSync(root, { recursive: true, force: true }) };
}

/**
 * Starts `pingd serve` on a free port and resolves once it answers HTTP. pingd runs with its defaults plus
 * opts.env: configuration variables in the bench's own environment (a DATABASE_URL, a RATE_LIMIT_PER_IP…)
 * are not passed on, so that every run measures the same configuration.
 */
export async function startPingd(opts: PingdOptions): Promise<Child> {
  const port = await freePort();
  const inherited: Record<string, string | undefined> = { ...process.env };
  for (const { name } of describeConfig()) delete inherited[name];
  const imports = (opts.imports ?? []).flatMap((m) => ['--import', m]);
  const c = opts.compiled;
  const args = c
    ? ['--import', pathToFileURL(join(c.root, 'orphan-guard.mjs')).href, join(c.dist, 'cli.js'), 'serve']
    : ['--import', 'tsx', '--import', GUARD, ...imports, join(PINGD_ROOT, 'src/cli.ts'), 'serve'];
  const proc = spawn(process.execPath, [...(opts.nodeArgs ?? []), ...args], {
    cwd: c ? c.root : PINGD_ROOT,
    // Verification off unless a group turns it on with weblog hosts on loopback: the usual bench pings name
    // hosts under bench.example.com, which verification would look up and fetch.
    env: { ...inherited, LOG_LEVEL: 'warn', VERIFY_PINGS: 'off', ...opts.env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', opts.keepLog ? 'pipe' : 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
    if (err.length > 20_000) err = err.slice(-20_000);
  });
  let out = '';
  proc.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.length > 200_000) out = out.slice(-200_000);
  });
  await waitReady(`http://127.0.0.1:${port}/pingSiteForm`, proc, () => err);
  const child = wrap(proc, port);
  Object.defineProperty(child, 'stderr', { get: () => err });
  Object.defineProperty(child, 'log', { get: () => out });
  return child;
}

/** Starts the baseline app (bench/baseline-server.ts). */
export async function startBaseline(): Promise<Child> {
  const port = await freePort();
  const proc = spawn(process.execPath, ['--import', 'tsx', '--import', GUARD, join(ROOT, 'bench/baseline-server.ts')], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  await waitReady(`http://127.0.0.1:${port}/`, proc, () => err);
  return wrap(proc, port);
}

/** Sets what the baseline answers to every GET and POST until the next call. */
export async function setBaselineAnswer(base: Child, status: number, headers: Record<string, string>, body: Buffer): Promise<void> {
  const r = await fetch(`${base.url}/__bench/answer`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ status, headers, bodyBase64: body.toString('base64') }),
  });
  if (!r.ok) throw new Error(`baseline refused its answer: ${r.status}`);
  await r.arrayBuffer();
}

export interface BenchDatabase {
  backend: 'postgres' | 'pglite';
  /** Environment for pingd. */
  env: Record<string, string>;
  /** PostgreSQL backends serving this database (none for the embedded one, which runs inside pingd). */
  backendPids(): Promise<number[]>;
  /** Rows in `pings` (after pingd has stopped, for the embedded database). */
  countPings(): Promise<number>;
  drop(): Promise<void>;
}

/** Drops databases left by a bench run that was killed (their name carries the pid of a dead process). */
export async function dropStaleDatabases(adminUrl: string): Promise<string[]> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  const dropped: string[] = [];
  try {
    const r = await admin.query<{ datname: string }>("select datname from pg_database where datname ~ '^pingd_bench_[0-9]+_[0-9]+$'");
    for (const { datname } of r.rows) {
      const pid = Number(datname.split('_').pop());
      if (pid === process.pid || isAlive(pid)) continue;
      await admin.query(`drop database if exists ${datname} with (force)`);
      dropped.push(datname);
    }
  } finally {
    await admin.end();
  }
  return dropped;
}

/** A fresh database on BENCH_DATABASE_URL's server, dropped afterwards. */
export async function createPostgresDatabase(adminUrl: string): Promise<BenchDatabase> {
  const name = `pingd_bench_${Date.now()}_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return {
    backend: 'postgres',
    env: { DATABASE_URL: u.href },
    async backendPids() {
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        const r = await c.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [name]);
        return r.rows.map((x) => x.pid);
      } finally {
        await c.end();
      }
    },
    async countPings() {
      const c = new pg.Client({ connectionString: u.href });
      await c.connect();
      try {
        const r = await c.query<{ n: string }>('select count(*) as n from pings');
        return Number(r.rows[0].n);
      } finally {
        await c.end();
      }
    },
    async drop() {
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}

/** Removes embedded-database directories left by killed runs (over an hour old, no live owner). */
export function removeStaleDataDirs(): string[] {
  const removed: string[] = [];
  for (const name of readdirSync(tmpdir())) {
    if (!/^pingd-bench-[A-Za-z0-9]{6}$/.test(name)) continue;
    const dir = join(tmpdir(), name);
    try {
      if (Date.now() - statSync(dir).mtimeMs < 3_600_000) continue;
      const lock = join(dir, 'pingd.lock');
      const pid = existsSync(lock) ? Number(readFileSync(lock, 'utf8').trim().split(/\s+/)[0]) : 0;
      if (pid > 0 && isAlive(pid)) continue;
      rmSync(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      /* raced with its owner: leave it */
    }
  }
  return removed;
}

/** A temporary DATA_DIR for the embedded database. */
export async function createPgliteDatabase(): Promise<BenchDatabase> {
  const dir = mkdtempSync(join(tmpdir(), 'pingd-bench-'));
  // The test runner's initdb'd template, when there is one, saves the seconds initdb takes.
  const version = JSON.parse(readFileSync(join(PINGD_ROOT, 'node_modules/@electric-sql/pglite/package.json'), 'utf8')).version as string;
  const template = join(tmpdir(), `pingd-pglite-template-${version}`);
  if (existsSync(join(template, 'PG_VERSION'))) cpSync(template, join(dir, 'pgdata'), { recursive: true });
  return {
    backend: 'pglite',
    env: { DATABASE_URL: '', DATA_DIR: dir },
    async backendPids() {
      return [];
    },
    async countPings() {
      // The server must have stopped: PGlite's data directory has one owner.
      const { PGlite } = await import('@electric-sql/pglite');
      const db = new PGlite(join(dir, 'pgdata'));
      try {
        const r = await db.query<{ n: number }>('select count(*)::int as n from pings');
        return Number(r.rows[0].n);
      } finally {
        await db.close();
      }
    },
    async drop() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
