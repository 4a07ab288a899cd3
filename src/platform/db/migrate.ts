// Owns schema migrations: numbered .sql files under migrations/, each applied with its version row in one
// transaction, serialised across instances by a transaction-level advisory lock.
import { readdirSync, readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Db } from './database.js';

export const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'migrations');
const MIGRATION_LOCK = 0x70696e67; // 'ping'

/**
 * How long one migration statement may run on PostgreSQL, instead of DB_TIMEOUT_MS (the wait a ping
 * accepts): a migration may check or index a big table. 011 on a month of pings (3M) took 11 s and failed
 * at the 5 s default when measured.
 */
export const MIGRATION_TIMEOUT_MS = 3_600_000;

export interface Migration {
  version: number;
  name: string;
  sql: string;
  /** What the migration is expected to take where that is more than a moment (its `-- expect:` line). */
  expect?: string;
}

/** What migrate() says as it goes (the start-up log): each migration as it starts and ends, and a wait. */
export interface MigrationProgress {
  /** Another instance holds the migration lock: this one waits for it (said once). */
  waiting?(): void;
  starting?(m: Migration): void;
  done?(m: Migration, ms: number): void;
}

/** A migration that can be slow says so in a line of its own: `-- expect: 11 s per 3 million pings`. */
const EXPECT_LINE = /^-- expect: ([^\n]{1,200})$/m;

export function listMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d+_[\w-]+\.sql$/.test(f))
    .map((f) => {
      const sql = readFileSync(join(dir, f), 'utf8');
      const expect = EXPECT_LINE.exec(sql)?.[1].trim();
      return { version: Number(f.split('_')[0]), name: f, sql, ...(expect ? { expect } : {}) };
    })
    .sort((a, b) => a.version - b.version);
}

const CREATE_VERSIONS = `create table if not exists schema_migrations (
  version integer primary key,
  name text not null,
  applied_at timestamptz not null default now()
)`;

/** Applies every pending migration; returns the names applied. Safe to run from several instances at once. */
export async function migrate(db: Db, dir = MIGRATIONS_DIR, progress: MigrationProgress = {}): Promise<string[]> {
  const applied: string[] = [];
  let saidWaiting = false;
  for (const m of listMigrations(dir)) {
    const started = performance.now();
    const done = await db.transaction(async (tx) => {
      const [got] = await tx.query<{ ok: boolean }>('select pg_try_advisory_xact_lock($1) as ok', [MIGRATION_LOCK]);
      if (!got.ok) {
        if (!saidWaiting) progress.waiting?.();
        saidWaiting = true;
        await tx.query('select pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      }
      await tx.exec(CREATE_VERSIONS);
      const rows = await tx.query('select 1 from schema_migrations where version = $1', [m.version]);
      if (rows.length > 0) return false;
      progress.starting?.(m);
      try {
        await tx.exec(m.sql);
      } catch (err) {
        throw new Error(`migration ${m.name} failed: ${(err as Error).message}`, { cause: err });
      }
      await tx.query('insert into schema_migrations (version, name) values ($1, $2)', [m.version, m.name]);
      return true;
    });
    if (done) {
      applied.push(m.name);
      progress.done?.(m, performance.now() - started);
    }
  }
  return applied;
}

/** The migrations not yet applied (for readiness checks). */
export async function pendingMigrations(db: Db, dir = MIGRATIONS_DIR): Promise<string[]> {
  const rows = await db.query<{ version: number }>('select version from schema_migrations').catch((err) => {
    if (/schema_migrations/.test(String(err?.message))) return [];
    throw err;
  });
  const have = new Set(rows.map((r) => Number(r.version)));
  return listMigrations(dir)
    .filter((m) => !have.has(m.version))
    .map((m) => m.name);
}
