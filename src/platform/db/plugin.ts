// Owns the database as a Fastify resource: opens it (embedded or server) and applies migrations at start,
// outside any plugin's timeout; logs when its disk fills up and when space is back; closes it last on shutdown.
import fp from 'fastify-plugin';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { openDatabase, type Db } from './database.js';
import { migrate, pendingMigrations, MIGRATION_TIMEOUT_MS } from './migrate.js';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Config } from '../config.js';
import { redactUrl } from '../redact.js';
import { DatabaseError } from './db-interface.js';
import { REOPEN_MIN_FREE_BYTES } from './disk-guard.js';
import { describeHosts } from './multi-host.js';

declare module 'fastify' {
  interface FastifyInstance {
    db: Db;
  }
}

export interface DbPluginOptions {
  /** The database prepareDatabase() opened and migrated. */
  db: Db;
}

/**
 * A start-up failure of the database, naming the setting that chose it: "connect ECONNREFUSED
 * 127.0.0.1:1" alone named neither the database nor the variable.
 */
function named(config: Config, err: unknown): Error {
  const message = (err as Error).message;
  const where = config.DATABASE_URL
    ? `the database at DATABASE_URL=${redactUrl(config.DATABASE_URL)}`
    : `the embedded database (DATA_DIR=${resolve(config.DATA_DIR)})`;
  return new DatabaseError(`cannot use ${where}: ${message}`, err instanceof DatabaseError ? err.code : 'DB_UNAVAILABLE', { cause: err });
}

/**
 * Opens the database and applies pending migrations, saying what it does as it goes. Called by buildApp
 * before the plugins are registered, not inside one: Fastify bounds each plugin's start by `pluginTimeout`,
 * and creating the embedded database and migrating it took 38-69 s on a loaded machine (and a long
 * migration on a big database takes what it takes): past 60 s the start died with "Plugin did not start in
 * time: 'db'" while the log still said the migrations were applied (issue 38). Here nothing bounds it but
 * the migrations' own statement timeout (MIGRATION_TIMEOUT_MS).
 */
export async function prepareDatabase(config: Config, log: FastifyBaseLogger, opts: { skipMigrations?: boolean } = {}): Promise<Db> {
  const dataDir = resolve(config.DATA_DIR);
  const creating = !config.DATABASE_URL && !existsSync(join(dataDir, 'pgdata', 'PG_VERSION'));
  const started = performance.now();
  if (creating) {
    log.info(
      { dataDir },
      `creating the embedded database in ${dataDir} (first start: ${FIRST_START_EXPECTED}, then pingd says where it listens)`,
    );
  }
  const db = await openDatabase({
    databaseUrl: config.DATABASE_URL,
    dataDir: config.DATA_DIR,
    poolMax: config.DB_POOL_MAX,
    timeoutMs: config.DB_TIMEOUT_MS,
    embeddedCacheMb: config.EMBEDDED_CACHE_MB,
    onBackgroundError: (err) => log.warn({ err: { message: err.message } }, 'database connection error'),
    onHostMove: (from, to) =>
      log.warn(
        { from: describeHosts([from]), to: describeHosts([to]) },
        `the database is now at ${describeHosts([to])} (was ${describeHosts([from])}): new connections go there`,
      ),
    diskMinFreeMb: config.DISK_MIN_FREE_MB,
    onDiskChange: (disk) => {
      if (!disk.full) log.info({ dataDir }, 'the disk holding the embedded database has space again: pings are accepted again');
      else if (disk.cause === 'low_space')
        log.error(
          { dataDir, freeMb: disk.freeBytes === null ? null : Math.floor(disk.freeBytes / 1048576), minFreeMb: config.DISK_MIN_FREE_MB },
          `the disk holding the embedded database is full (below DISK_MIN_FREE_MB=${config.DISK_MIN_FREE_MB}): pings are refused and the database only reads until space is freed`,
        );
      else
        log.error(
          { dataDir, freeMb: disk.freeBytes === null ? null : Math.floor(disk.freeBytes / 1048576) },
          `a write to the embedded database failed for lack of space: pings are refused and the database is stopped until at least ${Math.max(config.DISK_MIN_FREE_MB, REOPEN_MIN_FREE_BYTES / 1048576)} MiB are free, then opened again`,
        );
    },
  }).catch((err: unknown) => {
    throw named(config, err);
  });
  if (creating) log.info({ dataDir, ms: Math.round(performance.now() - started) }, 'embedded database created');
  try {
    // Pending migrations run on a connection of their own with MIGRATION_TIMEOUT_MS on PostgreSQL.
    const pending = opts.skipMigrations ? [] : await pendingMigrations(db);
    if (pending.length > 0) {
      log.info({ pending }, `applying ${pending.length} migration${pending.length === 1 ? '' : 's'}`);
      const mdb = config.DATABASE_URL
        ? await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR, poolMax: 1, timeoutMs: MIGRATION_TIMEOUT_MS })
        : db;
      try {
        const applied = await migrate(mdb, undefined, {
          waiting: () => log.info('waiting for another instance to finish migrating the database'),
          starting: (m) =>
            log.info(
              { migration: m.name, ...(m.expect ? { expect: m.expect } : {}) },
              `applying migration ${m.name}${m.expect ? ` (${m.expect})` : ''}`,
            ),
          done: (m, ms) => log.info({ migration: m.name, ms: Math.round(ms) }, `applied migration ${m.name}`),
        });
        if (applied.length) log.info({ applied, ms: Math.round(performance.now() - started) }, 'migrations applied');
      } finally {
        if (mdb !== db) await mdb.close();
      }
    }
  } catch (err) {
    await db.close();
    throw named(config, err);
  }
  return db;
}

/**
 * What the first start of the embedded database takes, as the log says it, measured from a fresh clone on
 * Node 24 (initdb and every migration, to "listening"): 3.9 s on this project's 2-core machine, 25 s with
 * the process held to a quarter of one core (a cgroup CPU quota: a small VPS); nothing bounds it (see
 * prepareDatabase).
 */
const FIRST_START_EXPECTED = 'about 4 s on a 2-core machine, 25 s on a quarter of one core';

async function dbPlugin(app: FastifyInstance, opts: DbPluginOptions): Promise<void> {
  const { db } = opts;
  app.decorate('db', db);
  app.addHook('onClose', async () => {
    await db.close();
  });
}

export default fp(dbPlugin, { name: 'db' });
