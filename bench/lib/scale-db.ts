// Owns the `scale` benchmark's databases and pingd commands: PostgreSQL databases named bench_scale_<pid>_<tag>
// (dropped at the end, and those a killed run left behind at the next start), embedded data directories,
// `pingd migrate` timed as a process of its own, a schema migrated only up to a given version, and the
// fills (the embedded one in a child process: PGlite's heap stays out of the bench process).
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { describeConfig } from '../../src/platform/config.js';
import { isAlive, openDatabase } from '../../src/platform/db/database.js';
import { listMigrations, migrate } from '../../src/platform/db/migrate.js';
import { ROOT, PINGD_ROOT, track, createPgliteDatabase } from './servers.js';
import { fillPostgres, type FillSpec, type FillTimings } from './scale-fill.js';

export type Backend = 'postgres' | 'pglite';

export interface ScaleDb {
  backend: Backend;
  name: string;
  /** pingd's environment for this database. */
  env: Record<string, string>;
  /** DATABASE_URL or DATA_DIR: what scale-probe.ts opens. */
  target: string;
  backendPids(): Promise<number[]>;
  drop(): Promise<void>;
}

const PREFIX = 'bench_scale_';

async function admin<T>(adminUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** Drops bench_scale_<pid>_* databases whose bench process is gone. */
export async function dropStaleScaleDatabases(adminUrl: string): Promise<string[]> {
  return admin(adminUrl, async (c) => {
    const r = await c.query<{ datname: string }>(`select datname from pg_database where datname ~ '^${PREFIX}[0-9]+_[a-z0-9]+$'`);
    const dropped: string[] = [];
    for (const { datname } of r.rows) {
      const pid = Number(datname.slice(PREFIX.length).split('_')[0]);
      if (pid === process.pid || isAlive(pid)) continue;
      await c.query(`drop database if exists ${datname} with (force)`);
      dropped.push(datname);
    }
    return dropped;
  });
}

export async function createScaleDatabase(backend: Backend, adminUrl: string, tag: string): Promise<ScaleDb> {
  if (backend === 'pglite') {
    const d = await createPgliteDatabase();
    return {
      backend,
      name: `${tag} (${d.env.DATA_DIR})`,
      env: d.env,
      target: d.env.DATA_DIR,
      backendPids: async () => [],
      drop: () => d.drop(),
    };
  }
  const name = `${PREFIX}${process.pid}_${tag}`;
  await admin(adminUrl, (c) => c.query(`create database ${name}`));
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return {
    backend,
    name,
    env: { DATABASE_URL: u.href },
    target: u.href,
    backendPids: () =>
      admin(adminUrl, async (c) =>
        (
          await c.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [name])
        ).rows.map((x) => x.pid),
      ),
    drop: () => admin(adminUrl, (c) => c.query(`drop database if exists ${name} with (force)`)).then(() => undefined),
  };
}

/** The environment a pingd command gets: none of the bench's own configuration variables, then `env`. */
export function pingdProcessEnv(env: Record<string, string>): Record<string, string> {
  const inherited: Record<string, string | undefined> = { ...process.env };
  for (const { name } of describeConfig()) delete inherited[name];
  return { ...(inherited as Record<string, string>), LOG_LEVEL: 'warn', ...env };
}

/** Runs `pingd <args>` (src/cli.ts under tsx) to the end; resolves with its wall time (ms) and output. */
export async function pingdCommand(args: string[], env: Record<string, string>): Promise<{ ms: number; out: string }> {
  const t0 = performance.now();
  const p = spawn(process.execPath, ['--import', 'tsx', join(PINGD_ROOT, 'src/cli.ts'), ...args], {
    cwd: PINGD_ROOT,
    env: pingdProcessEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(p);
  let out = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  p.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((r) => p.on('exit', r));
  if (code !== 0) throw new Error(`pingd ${args.join(' ')} exited with ${code}: ${out.trim().slice(-800)}`);
  return { ms: performance.now() - t0, out: out.trim() };
}

/** Applies the migrations numbered up to `version` only (the schema a database had before a later one). */
export async function migrateUpTo(db: ScaleDb, version: number): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'pingd-scale-migrations-'));
  try {
    for (const m of listMigrations()) if (m.version <= version) copyFileSync(join(ROOT, 'migrations', m.name), join(dir, m.name));
    const d = await openDatabase({
      databaseUrl: db.backend === 'postgres' ? db.target : undefined,
      dataDir: db.backend === 'pglite' ? db.target : '',
      poolMax: 1,
      timeoutMs: 600_000,
    });
    try {
      return await migrate(d, dir);
    } finally {
      await d.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Fills a migrated, empty database (no pingd running on an embedded one). */
export async function fillDatabase(db: ScaleDb, spec: FillSpec, log: (s: string) => void): Promise<FillTimings> {
  if (db.backend === 'postgres') return fillPostgres(db.target, spec, log);
  const p = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'bench/lib/scale-fill.ts'), db.target, JSON.stringify(spec)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(p);
  let out = '';
  let err = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  p.stderr.on('data', (d: Buffer) => {
    err += d.toString();
    for (const line of d.toString().split('\n').filter(Boolean)) log(line);
  });
  const code = await new Promise<number | null>((r) => p.on('exit', r));
  if (code !== 0) throw new Error(`filling the embedded database failed (${code}): ${err.trim().slice(-800)}`);
  return JSON.parse(out.trim().split('\n').pop()!) as FillTimings;
}
