// Owns the connection to PostgreSQL: one small interface (db-interface.ts) over a real server (pg Pool, here)
// and the embedded PGlite (pglite-database.ts), so that repositories and migrations run the same SQL on both.
import pg from 'pg';
import { DatabaseError, type Db, type DiskState, type Queryable } from './db-interface.js';
import { SERVER_DISK_FULL_HOLD_MS, isDiskFullError } from './disk-guard.js';
import { openPglite } from './pglite-database.js';
import { HostRing, multiHostClient, parseMultiHostUrl, type HostPort } from './multi-host.js';

export { DatabaseError, diskOf, type Db, type DiskState, type PoolStats, type Queryable } from './db-interface.js';
export { inBackground, isAlive } from './pglite-database.js';

/** How long a lost LISTEN connection waits before reconnecting. */
const LISTEN_RETRY_MS = 1000;
/** The longest opening a LISTEN connection may take. */
const LISTEN_CONNECT_MS = 5000;
/** The longest closing a LISTEN connection may take. */
const LISTEN_END_MS = 1000;

/**
 * Ends a client without ever waiting forever: pg's end() of a client whose connect failed (the server
 * refused it: too many clients) may never settle, and a close that waits on it never finishes.
 */
function endClient(c: pg.Client): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, LISTEN_END_MS);
    timer.unref();
    c.end().then(
      () => (clearTimeout(timer), resolve()),
      () => (clearTimeout(timer), resolve()),
    );
  });
}

export interface DbOptions {
  databaseUrl?: string;
  dataDir: string;
  poolMax: number;
  timeoutMs: number;
  /** The embedded database's page cache in MiB (EMBEDDED_CACHE_MB); undefined: PGlite's own 128 MB. */
  embeddedCacheMb?: number;
  /** Called with errors raised outside any query (an idle connection dropped by the server). */
  onBackgroundError?: (err: Error) => void;
  /** Told when new connections of a multi-host DATABASE_URL found the database on another host (a failover). */
  onHostMove?: (from: HostPort, to: HostPort) => void;
  /** DISK_MIN_FREE_MB, for the embedded database (disk-guard.ts); undefined: 0, only a failed write counts. */
  diskMinFreeMb?: number;
  /** Told when the embedded database's disk becomes full and when space is back. */
  onDiskChange?: (state: DiskState) => void;
}

export async function openDatabase(opts: DbOptions): Promise<Db> {
  return opts.databaseUrl
    ? openPostgres(opts.databaseUrl, opts)
    : openPglite(opts.dataDir, {
        cacheMb: opts.embeddedCacheMb,
        minFreeMb: opts.diskMinFreeMb,
        onDiskChange: opts.onDiskChange,
        onError: opts.onBackgroundError,
      });
}

// int8 (count(*), bigserial) fits a JS number for any realistic ping count; parse it as one so both
// backends return the same types (PGlite already does).
const pgTypes = {
  getTypeParser(oid: number, format?: string) {
    if (oid === 20) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

/**
 * SQLSTATEs after which a connection must not be used again: 25006 read_only_sql_transaction (the server
 * became a standby under it: an old primary back as a replica, a proxy pointing at the wrong node), 57P01
 * admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now. pg.Pool's query() drops a client after any
 * error; a transaction's or a lock's client is dropped only for these and for a lost connection.
 */
const DROP_CONNECTION = new Set(['25006', '57P01', '57P02', '57P03']);
function dropsConnection(err: unknown): boolean {
  return DROP_CONNECTION.has((err as { code?: string } | undefined)?.code ?? '');
}

/**
 * How this process makes PostgreSQL connections for `url`: pg reads a single-host URL itself, as it always
 * did; a host list, target_session_attrs or connect_timeout goes through multi-host.ts's client, whose
 * pool-wide HostRing remembers where the database was last found.
 */
function connector(url: string, opts: DbOptions): { client: (c: pg.ClientConfig) => pg.Client; pool: pg.PoolConfig } {
  const plan = parseMultiHostUrl(url);
  if (plan.simple) return { client: (c) => new pg.Client({ connectionString: url, ...c }), pool: { connectionString: url } };
  const Client = multiHostClient(new HostRing(plan, opts.onHostMove));
  return { client: (c) => new Client(c), pool: { Client } };
}

function openPostgres(url: string, opts: DbOptions): Db {
  const connect = connector(url, opts);
  const connectHooks: ((q: Queryable) => Promise<void>)[] = [];
  const pool = new pg.Pool({
    ...connect.pool,
    max: opts.poolMax,
    connectionTimeoutMillis: opts.timeoutMs,
    query_timeout: opts.timeoutMs,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    types: pgTypes,
    application_name: 'pingd',
    // pg-pool awaits it before handing a new client out, and on a failure ends the client and fails the
    // checkout (pg-pool 3.14 _acquireClient): nothing runs on a connection whose hooks did not pass.
    onConnect: async (client: pg.ClientBase) => {
      for (const hook of connectHooks) await hook(wrap(client));
    },
  });
  // Without a listener an idle client's error (server restarted) would crash the process.
  pool.on('error', (err) => opts.onBackgroundError?.(err));

  // The server's disk is its own business (disk-guard.ts): pingd knows it is full only from SQLSTATE
  // 53100, and says so for SERVER_DISK_FULL_HOLD_MS after the last one, so that pings are refused with
  // that reason rather than each tried and failed.
  let disk: DiskState = { full: false };
  let diskFullUntil = 0;
  const checked = async <T>(run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (err) {
      if (!isDiskFullError(err)) throw err;
      const now = Date.now();
      if (now >= diskFullUntil) disk = { full: true, cause: 'write_failed', freeBytes: null, since: now };
      diskFullUntil = now + SERVER_DISK_FULL_HOLD_MS;
      throw new DatabaseError(`the PostgreSQL server's disk is full: ${(err as Error).message}`, 'DISK_FULL', { cause: err });
    }
  };
  const wrap = (c: pg.Pool | pg.ClientBase): Queryable => ({
    async query<T>(sql: string, params?: unknown[], opts?: { name?: string }) {
      const r = await checked(() =>
        opts?.name ? c.query({ name: opts.name, text: sql, values: params as unknown[] }) : c.query(sql, params as unknown[]),
      );
      return r.rows as T[];
    },
    async exec(sql: string) {
      await checked(() => c.query(sql));
    },
  });
  const base = wrap(pool);
  // A checked-out client has no pool listener: when the server goes away, pg emits 'error' on it (as well
  // as failing its query), and an 'error' nobody listens to crashes the process. The query's own error
  // reaches the caller; this only marks the connection as dead so it is not returned to the pool.
  const lostConnection = (markBroken: () => void) => (err: Error) => {
    markBroken();
    opts.onBackgroundError?.(err);
  };

  return {
    kind: 'postgres',
    query: base.query,
    exec: base.exec,
    async transaction(fn) {
      const client = await pool.connect();
      let broken = false;
      const onError = lostConnection(() => (broken = true));
      client.on('error', onError);
      try {
        await client.query('BEGIN');
        const v = await fn(wrap(client));
        await client.query('COMMIT');
        return v;
      } catch (err) {
        if (dropsConnection(err) || dropsConnection((err as Error).cause)) broken = true;
        try {
          await client.query('ROLLBACK');
        } catch {
          broken = true;
        }
        throw err;
      } finally {
        client.removeListener('error', onError);
        client.release(broken);
      }
    },
    async withTryAdvisoryLock(key, fn) {
      const client = await pool.connect();
      let broken = false;
      const onError = lostConnection(() => (broken = true));
      client.on('error', onError);
      try {
        const [row] = (await client.query('select pg_try_advisory_lock($1) as ok', [key])).rows;
        if (!row.ok) return { ran: false };
        try {
          return { ran: true, value: await fn(wrap(client)) };
        } finally {
          await client.query('select pg_advisory_unlock($1)', [key]).catch(() => {
            broken = true; // a lost session releases its locks; drop the connection
          });
        }
      } catch (err) {
        broken = true;
        throw err;
      } finally {
        client.removeListener('error', onError);
        client.release(broken);
      }
    },
    poolStats() {
      return { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount };
    },
    disk() {
      if (disk.full && Date.now() >= diskFullUntil) disk = { full: false };
      return disk;
    },
    async notify(channel, payload) {
      await pool.query('select pg_notify($1, $2)', [channel, payload]);
    },
    onConnect(fn) {
      connectHooks.push(fn);
    },
    listen: (channel, onNotify, onReconnect) => listenPostgres(connect.client, channel, onNotify, onReconnect, opts.onBackgroundError),
    async close() {
      if (pool.ended || pool.ending) return;
      await pool.end();
    },
  };
}

async function listenPostgres(
  newClient: (c: pg.ClientConfig) => pg.Client,
  channel: string,
  onNotify: (payload: string) => void,
  onReconnect: (() => void) | undefined,
  onError: ((err: Error) => void) | undefined,
): Promise<() => Promise<void>> {
  let stopped = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  const connect = async (): Promise<void> => {
    // Bounded like the pool's connections: a server that accepts but never answers must not hold a start or close.
    const c = newClient({
      application_name: 'pingd-listen',
      keepAlive: true,
      connectionTimeoutMillis: LISTEN_CONNECT_MS,
    });
    const lost = (err?: Error) => {
      if (client !== c) return;
      client = undefined;
      c.removeAllListeners('notification');
      void endClient(c);
      if (err) onError?.(err);
      if (!stopped) retry = setTimeout(() => void reconnect(), LISTEN_RETRY_MS).unref();
    };
    client = c;
    // Listeners go on once connected: a multi-host client passes through failed attempts (other hosts) first.
    await c.connect();
    c.on('error', lost);
    c.on('end', () => lost());
    c.on('notification', (m) => {
      if (m.channel === channel) onNotify(m.payload ?? '');
    });
    await c.query(`listen ${pg.escapeIdentifier(channel)}`);
  };
  const reconnect = async () => {
    try {
      await connect();
      onReconnect?.();
    } catch (err) {
      const c = client;
      client = undefined;
      if (c) void endClient(c);
      onError?.(err as Error);
      if (!stopped) retry = setTimeout(() => void reconnect(), LISTEN_RETRY_MS).unref();
    }
  };
  try {
    await connect();
  } catch (err) {
    const c = client;
    client = undefined;
    if (c) await endClient(c);
    throw new DatabaseError(`cannot listen on ${channel}: ${(err as Error).message}`, 'DB_UNAVAILABLE', { cause: err });
  }
  return async () => {
    stopped = true;
    clearTimeout(retry);
    const c = client;
    client = undefined;
    if (c) await endClient(c);
  };
}
