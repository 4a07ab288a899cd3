// Owns the database as a Fastify resource: opens it (embedded or server), applies migrations at start,
// and closes it last on shutdown.
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { openDatabase, type Db } from './database.js';
import { migrate, pendingMigrations, MIGRATION_TIMEOUT_MS } from './migrate.js';
import type { Config } from '../config.js';

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

async function dbPlugin(app: FastifyInstance, opts: DbPluginOptions): Promise<void> {
  const { config } = opts;
  const db = await openDatabase({
    databaseUrl: config.DATABASE_URL,
    dataDir: config.DATA_DIR,
    poolMax: config.DB_POOL_MAX,
    timeoutMs: config.DB_TIMEOUT_MS,
    embeddedCacheMb: config.EMBEDDED_CACHE_MB,
    onBackgroundError: (err) => app.log.warn({ err: { message: err.message } }, 'database connection error'),
  });
  try {
    // Pending migrations run on a connection of their own with MIGRATION_TIMEOUT_MS on PostgreSQL.
    if (!opts.skipMigrations && (await pendingMigrations(db)).length > 0) {
      const mdb = config.DATABASE_URL ? await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR, poolMax: 1, timeoutMs: MIGRATION_TIMEOUT_MS }) : db;
      try {
        const applied = await migrate(mdb);
        if (applied.length) app.log.info({ applied }, 'migrations applied');
      } finally {
        if (mdb !== db) await mdb.close();
      }
    }
  } catch (err) {
    await db.close();
    throw err;
  }
  app.decorate('db', db);
  app.addHook('onClose', async () => {
    await db.close();
  });
}

export default fp(dbPlugin, { name: 'db' });
