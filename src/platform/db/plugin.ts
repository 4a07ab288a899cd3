// Owns the database as a Fastify resource: opens it (embedded or server), applies migrations at start,
// logs when its disk fills up and when space is back, and closes it last on shutdown.
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { openDatabase, type Db } from './database.js';
import { migrate, pendingMigrations, MIGRATION_TIMEOUT_MS } from './migrate.js';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Config } from '../config.js';
import { redactUrl } from '../redact.js';
import { DatabaseError } from './db-interface.js';
import { REOPEN_MIN_FREE_BYTES } from './disk-guard.js';

declare module 'fastify' {
  interface FastifyInstance {
    db: Db;
  }
}

export interface DbPluginOptions {
  config: Config;
  /** Skip applying migrations at start (the CLI's `serve --no-migrate`). */
  skipMigrations?: boolean;
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

async function dbPlugin(app: FastifyInstance, opts: DbPluginOptions): Promise<void> {
  const { config } = opts;
  if (!config.DATABASE_URL && !existsSync(join(resolve(config.DATA_DIR), 'pgdata', 'PG_VERSION'))) {
    app.log.info(
      { dataDir: resolve(config.DATA_DIR) },
      `creating the embedded database in ${resolve(config.DATA_DIR)} (first start: this takes 10–20 s, then pingd says where it listens)`,
    );
  }
  const db = await openDatabase({
    databaseUrl: config.DATABASE_URL,
    dataDir: config.DATA_DIR,
    poolMax: config.DB_POOL_MAX,
    timeoutMs: config.DB_TIMEOUT_MS,
    embeddedCacheMb: config.EMBEDDED_CACHE_MB,
    onBackgroundError: (err) => app.log.warn({ err: { message: err.message } }, 'database connection error'),
    diskMinFreeMb: config.DISK_MIN_FREE_MB,
    onDiskChange: (disk) => {
      const dataDir = resolve(config.DATA_DIR);
      if (!disk.full) app.log.info({ dataDir }, 'the disk holding the embedded database has space again: pings are accepted again');
      else if (disk.cause === 'low_space')
        app.log.error(
          { dataDir, freeMb: disk.freeBytes === null ? null : Math.floor(disk.freeBytes / 1048576), minFreeMb: config.DISK_MIN_FREE_MB },
          `the disk holding the embedded database is full (below DISK_MIN_FREE_MB=${config.DISK_MIN_FREE_MB}): pings are refused and the database only reads until space is freed`,
        );
      else
        app.log.error(
          { dataDir, freeMb: disk.freeBytes === null ? null : Math.floor(disk.freeBytes / 1048576) },
          `a write to the embedded database failed for lack of space: pings are refused and the database is stopped until at least ${Math.max(config.DISK_MIN_FREE_MB, REOPEN_MIN_FREE_BYTES / 1048576)} MiB are free, then opened again`,
        );
    },
  }).catch((err: unknown) => {
    throw named(config, err);
  });
  try {
    // Pending migrations run on a connection of their own with MIGRATION_TIMEOUT_MS on PostgreSQL.
    if (!opts.skipMigrations && (await pendingMigrations(db)).length > 0) {
      const mdb = config.DATABASE_URL
        ? await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR, poolMax: 1, timeoutMs: MIGRATION_TIMEOUT_MS })
        : db;
      try {
        const applied = await migrate(mdb);
        if (applied.length) app.log.info({ applied }, 'migrations applied');
      } finally {
        if (mdb !== db) await mdb.close();
      }
    }
  } catch (err) {
    await db.close();
    throw named(config, err);
  }
  app.decorate('db', db);
  app.addHook('onClose', async () => {
    await db.close();
  });
}

export default fp(dbPlugin, { name: 'db' });
