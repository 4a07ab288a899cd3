// Owns the soak's and the multi-instance bench's PostgreSQL databases: fresh ones named
// `bench_<scenario>_<ms>_<pid>` (so a glance at pg_database says whose they are), dropped afterwards, and
// the ones a killed run left behind (their pid is dead) dropped at the next start. Same interface as
// servers.ts's BenchDatabase, whose databases are named for `npm run bench` instead.
import pg from 'pg';
import { isAlive } from '../../src/platform/db/database.js';
import type { BenchDatabase } from './servers.js';

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** Drops `bench_<scenario>_<ms>_<pid>` databases whose process is gone; returns their names. */
export async function dropStaleScenarioDatabases(adminUrl: string, scenario: string): Promise<string[]> {
  return withClient(adminUrl, async (c) => {
    const r = await c.query<{ datname: string }>('select datname from pg_database where datname ~ $1', [
      `^bench_${scenario}_[0-9]+_[0-9]+$`,
    ]);
    const dropped: string[] = [];
    for (const { datname } of r.rows) {
      const pid = Number(datname.split('_').pop());
      if (pid === process.pid || isAlive(pid)) continue;
      await c.query(`drop database if exists ${datname} with (force)`);
      dropped.push(datname);
    }
    return dropped;
  });
}

export interface ScenarioDatabase extends BenchDatabase {
  name: string;
  /** The database's own URL. */
  url: string;
  /** Runs one query on the database (the bench's checks; pingd's SQL stays in its repositories). */
  query<R extends pg.QueryResultRow>(sql: string, params?: unknown[]): Promise<R[]>;
}

export async function createScenarioDatabase(adminUrl: string, scenario: string): Promise<ScenarioDatabase> {
  const name = `bench_${scenario}_${Date.now()}_${process.pid}`;
  await withClient(adminUrl, (c) => c.query(`create database ${name}`));
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  const query = <R extends pg.QueryResultRow>(sql: string, params: unknown[] = []) =>
    withClient(u.href, async (c) => (await c.query<R>(sql, params)).rows);
  return {
    backend: 'postgres',
    name,
    url: u.href,
    env: { DATABASE_URL: u.href },
    query,
    async backendPids() {
      const rows = await withClient(
        adminUrl,
        async (c) =>
          (await c.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [name])).rows,
      );
      return rows.map((x) => x.pid);
    },
    async countPings() {
      const [r] = await query<{ n: string }>('select count(*) as n from pings');
      return Number(r.n);
    },
    async drop() {
      await withClient(adminUrl, (c) => c.query(`drop database if exists ${name} with (force)`));
    },
  };
}
