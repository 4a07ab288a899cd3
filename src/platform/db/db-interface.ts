// Owns what every caller sees of the database, whichever backend: statements, transactions, locks,
// notifications, pool figures, the state of its disk, and the error a backend raises when it cannot serve.
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
   * Runs fn only if the session-level advisory lock `key` is free, holding it meanwhile; `{ ran: false }`
   * otherwise. On PGlite the data directory has one process (see the lock file), which keeps the held keys.
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
  /**
   * Whether the database's disk is full now, so that writes are refused (see DiskState). Both backends
   * have it; optional only so that a wrapper of a Db (a test's statement recorder) need not forward it:
   * absent reads as not full (diskOf).
   */
  disk?(): DiskState;
  /**
   * Runs `fn` on every new connection, before the connection serves anything else; when fn fails, the
   * connection is closed and whatever waited for it fails with fn's error. For state that must be set
   * right on whichever server a connection reaches (after a failover, the new primary). Only PostgreSQL
   * has it: the embedded database's one session never moves to another server.
   */
  onConnect?(fn: (q: Queryable) => Promise<void>): void;
  close(): Promise<void>;
}

/**
 * The database's disk as pingd sees it. `full`: writes are refused (DatabaseError DISK_FULL) until space
 * comes back; reads go on while the engine still runs. The embedded database watches the free space of
 * DATA_DIR itself (disk-guard.ts); PostgreSQL's disk is the server's, known only from its errors
 * (SQLSTATE 53100 disk_full).
 */
export type DiskState =
  | { full: false }
  | {
      full: true;
      /** low_space: below DISK_MIN_FREE_MB; write_failed: a write failed for lack of space. */
      cause: 'low_space' | 'write_failed';
      /** Bytes free for the database's files when last looked at; null: not known (PostgreSQL). */
      freeBytes: number | null;
      /** Since when (epoch ms). */
      since: number;
    };

export class DatabaseError extends PingdError<'DB_UNAVAILABLE' | 'DB_LOCKED' | 'DB_QUERY_FAILED' | 'DISK_FULL'> {
  constructor(message: string, code: 'DB_UNAVAILABLE' | 'DB_LOCKED' | 'DB_QUERY_FAILED' | 'DISK_FULL', options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** The disk's state of `db`, not full when it cannot tell. */
export function diskOf(db: Pick<Db, 'disk'>): DiskState {
  return db.disk?.() ?? { full: false };
}
