// Owns telling when the database's disk is full, as pure decisions: which errors say a write failed for
// lack of space, and what the embedded database does next given the free space of DATA_DIR's filesystem
// (fs.statfs, every DISK_CHECK_MS) against DISK_MIN_FREE_MB. pglite-database.ts acts on them.
//
// Why the embedded database needs this (PGlite 0.5.16, measured on a 60 MiB tmpfs): a heap that cannot
// grow fails its statement cleanly (SQLSTATE 53100 "could not extend file"), but once a WAL segment cannot
// be created ("could not write to file pg_wal/xlogtemp.NN") the next statement spins the engine's thread at
// 100% CPU and never answers, and freeing space does not bring it back. PostgreSQL itself would PANIC and
// restart there (a failed WAL write inside a critical section); PGlite has no postmaster to do that, so
// pingd does it: it stops the engine's thread at the first such error and opens the database again once
// space is back (WAL recovery on open keeps every committed transaction, as after SIGKILL).
import { doublingBackoffMs } from '../retry.js';

/** How often the free space of DATA_DIR's filesystem is looked at. */
export const DISK_CHECK_MS = 1000;

/**
 * Free space the embedded database needs before it is opened again after a write failed for lack of
 * space, whatever DISK_MIN_FREE_MB says: opening runs WAL recovery and ends it with a checkpoint, which
 * may create the next WAL segment (16 MiB, PostgreSQL's PreallocXlogFiles).
 */
export const REOPEN_MIN_FREE_BYTES = 16 * 1024 * 1024;

/** Longest wait between two attempts to open the database again when opening failed with space free. */
export const REOPEN_BACKOFF_MAX_MS = 60_000;

/**
 * PostgreSQL: how long after the server said its disk is full (SQLSTATE 53100) pingd reports the disk full
 * and refuses pings without asking it. Its disk is the server's business: pingd cannot see it, so it asks
 * again after this, and a server with space again is used at once.
 */
export const SERVER_DISK_FULL_HOLD_MS = 5000;

/**
 * ok: reads and writes. low: below DISK_MIN_FREE_MB, the engine runs read-only (PostgreSQL's
 * default_transaction_read_only: PostgreSQL itself tells a write from a read). stopped: a write failed for
 * lack of space, the engine's thread is gone, every statement is refused at once.
 */
export type DiskMode = 'ok' | 'low' | 'stopped';

/** Whether an error from the database says a write failed for lack of space (SQLSTATE 53100 disk_full, ENOSPC). */
export function isDiskFullError(err: unknown): boolean {
  const e = (err ?? {}) as { code?: unknown; message?: unknown };
  return e.code === '53100' || e.code === 'ENOSPC' || (typeof e.message === 'string' && /no space left on device/i.test(e.message));
}

/**
 * What the embedded database does after looking at the free space (`freeBytes`; null: statfs failed, which
 * changes nothing): `ok` <-> `low` around `minFreeBytes` (0: never low, only a failed write stops it);
 * `stopped` asks to `reopen` once at least max(minFreeBytes, REOPEN_MIN_FREE_BYTES) are free.
 */
export function nextDiskMode(mode: DiskMode, freeBytes: number | null, minFreeBytes: number): DiskMode | 'reopen' {
  if (freeBytes === null) return mode;
  if (mode === 'stopped') return freeBytes >= Math.max(minFreeBytes, REOPEN_MIN_FREE_BYTES) ? 'reopen' : 'stopped';
  return freeBytes < minFreeBytes ? 'low' : 'ok';
}

/** The wait before the next attempt to open again after `failures` failed ones (1 s, 2 s, 4 s … REOPEN_BACKOFF_MAX_MS). */
export function reopenBackoffMs(failures: number): number {
  return doublingBackoffMs(failures, 1000, REOPEN_BACKOFF_MAX_MS);
}

/** "12.3 MiB free" for messages and logs. */
export function describeFree(freeBytes: number | null): string {
  return freeBytes === null ? 'free space unknown' : `${(freeBytes / 1048576).toFixed(1)} MiB free`;
}
