// Owns the connection to PostgreSQL: one small interface over a real server (pg Pool) and the embedded
// PGlite, so that repositories and migrations run the same SQL on both backends.
import { AsyncLocalStorage } from 'node:async_hooks';
import { existsSync, mkdirSync, openSync, writeSync, closeSync, readFileSync, unlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { returnThread, takeThread, type Answer } from './pglite-thread.js';
import { PingdError } from '../errors.js';

export interface Queryable {
  /**
   * Runs one parameterised statement and returns its rows. A `name` keeps a hot statement prepared on each
   * pooled PostgreSQL connection (parsed and planned once, not per call: a profile of intake showed planning dominate); PGlite ignores it.
   */
  query<T = Record<string, unknown>>(sql: string, params?: unknown[], opts?: { name?: string }): Promise<T[]>;
  /** Runs a script of several statements without parameters. */
  exec(sql: string): Promise<void>;
}

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

export interface Db extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * Runs fn only if this process gets the session-level advisory lock `key`; returns undefined otherwise.
   * On PGlite the data directory is owned by one process (see the lock file), so fn always runs.
   */
  withTryAdvisoryLock<T>(key: number, fn: (q: Queryable) => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }>;
  poolStats(): PoolStats;
  /**
   * Tells every listener of `channel` (PostgreSQL NOTIFY: every instance on the server; PGlite: this
   * process). Payloads are small hints ("something new after N"), never data: NOTIFY payloads are bounded
   * and a notification is lost when no one listens.
   */
  notify(channel: string, payload: string): Promise<void>;
  /**
   * Calls `onNotify` with every payload sent to `channel` until the returned function is called. On
   * PostgreSQL a dedicated connection (outside the pool) listens; when it is lost it reconnects and calls
   * `onReconnect` (notifications sent meanwhile are gone: the listener should look for itself).
   */
  listen(channel: string, onNotify: (payload: string) => void, onReconnect?: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

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

export class DatabaseError extends PingdError<'DB_UNAVAILABLE' | 'DB_LOCKED' | 'DB_QUERY_FAILED'> {
  constructor(message: string, code: 'DB_UNAVAILABLE' | 'DB_LOCKED' | 'DB_QUERY_FAILED', options?: { cause?: unknown }) {
    super(code, message, options);
  }
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
}

const background = new AsyncLocalStorage<boolean>();

/**
 * Runs fn as background work (a render, a retention pass): on the embedded database, whose one session
 * serves everything, each of its statements waits until foreground work (intake) has stopped, or until it
 * has waited BACKGROUND_MAX_WAIT_MS (so under constant intake they are paced), and they go one at a time. Every
 * statement issued under fn counts, on whatever Queryable, through awaits and callbacks. On PostgreSQL each
 * statement has a connection of its own and nothing changes.
 */
export function inBackground<T>(fn: () => Promise<T>): Promise<T> {
  return background.run(true, fn);
}

export async function openDatabase(opts: DbOptions): Promise<Db> {
  return opts.databaseUrl ? openPostgres(opts.databaseUrl, opts) : openPglite(opts.dataDir, opts.embeddedCacheMb);
}

// int8 (count(*), bigserial) fits a JS number for any realistic ping count; parse it as one so both
// backends return the same types (PGlite already does).
const pgTypes = {
  getTypeParser(oid: number, format?: string) {
    if (oid === 20) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

function openPostgres(url: string, opts: DbOptions): Db {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.poolMax,
    connectionTimeoutMillis: opts.timeoutMs,
    query_timeout: opts.timeoutMs,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    types: pgTypes,
    application_name: 'pingd',
  });
  // Without a listener an idle client's error (server restarted) would crash the process.
  pool.on('error', (err) => opts.onBackgroundError?.(err));

  const wrap = (c: pg.Pool | pg.PoolClient): Queryable => ({
    async query<T>(sql: string, params?: unknown[], opts?: { name?: string }) {
      const r = opts?.name ? await c.query({ name: opts.name, text: sql, values: params as unknown[] }) : await c.query(sql, params as unknown[]);
      return r.rows as T[];
    },
    async exec(sql: string) {
      await c.query(sql);
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
    async notify(channel, payload) {
      await pool.query('select pg_notify($1, $2)', [channel, payload]);
    },
    listen: (channel, onNotify, onReconnect) => listenPostgres(url, channel, onNotify, onReconnect, opts.onBackgroundError),
    async close() {
      if (pool.ended || pool.ending) return;
      await pool.end();
    },
  };
}

async function listenPostgres(
  url: string,
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
    const c = new pg.Client({ connectionString: url, application_name: 'pingd-listen', keepAlive: true, connectionTimeoutMillis: LISTEN_CONNECT_MS });
    const lost = (err?: Error) => {
      if (client !== c) return;
      client = undefined;
      c.removeAllListeners('notification');
      void endClient(c);
      if (err) onError?.(err);
      if (!stopped) retry = setTimeout(() => void reconnect(), LISTEN_RETRY_MS).unref();
    };
    c.on('error', lost);
    c.on('end', () => lost());
    c.on('notification', (m) => {
      if (m.channel === channel) onNotify(m.payload ?? '');
    });
    client = c;
    await c.connect();
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

/**
 * The embedded database keeps its files under dataDir. PGlite itself does not lock the directory and two
 * processes writing it would corrupt it, so a lock file holding our pid guards it; a lock left by a dead
 * process (crash, SIGKILL) is taken over. The engine runs in a thread of its own (pglite-thread.ts), off
 * the event loop that serves HTTP.
 */
async function openPglite(dataDir: string, cacheMb: number | undefined): Promise<Db> {
  const dir = resolve(dataDir);
  mkdirSync(dir, { recursive: true });
  const releaseLock = acquireDirLock(join(dir, 'pingd.lock'));
  const failed = (message: string, cause?: unknown) => new DatabaseError(message, 'DB_UNAVAILABLE', { cause });
  const pgdata = join(dir, 'pgdata');
  let thread = takeThread(failed);
  try {
    if (!existsSync(join(pgdata, 'PG_VERSION'))) {
      // Creating the database (initdb) leaves PGlite's thread holding ~500 MB more than opening one does
      // (RSS 800 MB against 290 MB, measured on this machine), and WASM memory never shrinks: create it in
      // a thread of its own and end that thread, so the server opens it afresh.
      await thread.open(pgdata, cacheMb);
      await thread.call({ op: 'close' });
      await thread.terminate();
      thread = takeThread(failed);
    }
    await thread.open(pgdata, cacheMb);
  } catch (err) {
    await thread.terminate();
    releaseLock();
    throw new DatabaseError(`cannot open the embedded database in ${dir}: ${(err as Error).message}`, 'DB_UNAVAILABLE', { cause: err });
  }
  let closed = false;
  let busy = 0;
  // One process owns the embedded database: notifications never leave it.
  const channels = new Map<string, Set<(payload: string) => void>>();

  const rowsOf = <T>(r: Answer): T[] => {
    const rows = r.rows ?? [];
    // A bytea arrives as a plain Uint8Array (structured clone): callers get the Buffer pg gives them.
    if (r.bytea?.length) {
      for (const row of rows) {
        for (const k of r.bytea) {
          const v = row[k];
          if (v instanceof Uint8Array) row[k] = Buffer.from(v.buffer, v.byteOffset, v.byteLength);
        }
      }
    }
    return rows as T[];
  };
  const session = (tx?: number): Queryable => ({
    async query<T>(sql: string, params?: unknown[]) {
      if (closed) throw new DatabaseError('the embedded database is closed', 'DB_UNAVAILABLE');
      busy++;
      try {
        return rowsOf<T>(await thread.call({ op: 'query', sql, params, tx }, background.getStore() === true));
      } finally {
        busy--;
      }
    },
    async exec(sql: string) {
      if (closed) throw new DatabaseError('the embedded database is closed', 'DB_UNAVAILABLE');
      await thread.call({ op: 'exec', sql, tx }, background.getStore() === true);
    },
  });
  const base = session();
  return {
    kind: 'pglite',
    query: base.query,
    exec: base.exec,
    async transaction(fn) {
      if (closed) throw new DatabaseError('the embedded database is closed', 'DB_UNAVAILABLE');
      const { tx } = await thread.call({ op: 'begin' }, background.getStore() === true);
      let v;
      try {
        v = await fn(session(tx));
      } catch (err) {
        await thread.call({ op: 'end', tx: tx!, commit: false }).catch(() => undefined);
        throw err;
      }
      await thread.call({ op: 'end', tx: tx!, commit: true });
      return v;
    },
    async withTryAdvisoryLock(_key, fn) {
      return { ran: true, value: await fn(base) };
    },
    poolStats() {
      return { total: 1, idle: busy > 0 ? 0 : 1, waiting: Math.max(0, busy - 1) };
    },
    async notify(channel, payload) {
      for (const l of channels.get(channel) ?? []) queueMicrotask(() => l(payload));
    },
    async listen(channel, onNotify) {
      const set = channels.get(channel) ?? new Set();
      channels.set(channel, set);
      const l = (p: string) => onNotify(p);
      set.add(l);
      return async () => {
        set.delete(l);
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      try {
        await thread.call({ op: 'close' });
        await returnThread(thread);
      } catch (err) {
        await thread.terminate();
        throw err;
      } finally {
        releaseLock();
      }
    },
  };
}

function acquireDirLock(path: string): () => void {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          if (readFileSync(path, 'utf8').trim() === String(process.pid)) unlinkSync(path);
        } catch {
          /* already gone */
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number(readFileSync(path, 'utf8').trim());
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && isAlive(holder)) {
        throw new DatabaseError(
          `the embedded database in ${resolve(path, '..')} is in use by another pingd process (pid ${holder}); stop it or set DATA_DIR to another directory`,
          'DB_LOCKED',
        );
      }
      if (holder === process.pid) {
        throw new DatabaseError(`the embedded database in ${resolve(path, '..')} is already open in this process`, 'DB_LOCKED');
      }
      unlinkSync(path); // stale: its owner is gone
    }
  }
  throw new DatabaseError(`cannot lock ${path}`, 'DB_LOCKED');
}

/** Whether a process with this pid exists (EPERM: it does, owned by someone else). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
