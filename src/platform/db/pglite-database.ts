// Owns the embedded database behind the Db interface: PGlite in its own thread (pglite-thread.ts), the lock
// file that keeps a data directory to one process, background work's place behind intake on its one
// session, and what it does when its disk is full (the decisions: disk-guard.ts).
import { AsyncLocalStorage } from 'node:async_hooks';
import { existsSync, mkdirSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { DatabaseError, type Db, type DiskState, type Queryable } from './db-interface.js';
import { acquireDirLock } from './dir-lock.js';
import { DISK_CHECK_MS, describeFree, isDiskFullError, nextDiskMode, reopenBackoffMs, type DiskMode } from './disk-guard.js';
import { createInProcess, returnThread, takeThread, type Answer, type EngineThread, type Request } from './pglite-thread.js';

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

export interface PgliteOptions {
  /** The engine's page cache in MiB (EMBEDDED_CACHE_MB); undefined: PGlite's own, 128 MB. */
  cacheMb?: number;
  /** DISK_MIN_FREE_MB: below it the database only reads (see disk-guard.ts); 0 or undefined: only a failed write stops it. */
  minFreeMb?: number;
  /** Told of every change of the disk's state (the server logs them). */
  onDiskChange?: (state: DiskState) => void;
  /** Told of errors no statement sees (opening the database again after its disk was full failed). */
  onError?: (err: Error) => void;
}

/**
 * The embedded database keeps its files under dataDir. PGlite itself does not lock the directory and two
 * processes writing it would corrupt it, so a lock file guards it (dir-lock.ts: held as long as its
 * holder's heartbeat goes on; a lock left by a crash, SIGKILL or a killed container is taken over). The
 * engine runs in a thread of its own (pglite-thread.ts), off the event loop that serves HTTP. A full disk
 * makes it read-only, or stops its thread and opens the database again once space is back (disk-guard.ts).
 */
export async function openPglite(dataDir: string, opts: PgliteOptions = {}): Promise<Db> {
  const dir = resolve(dataDir);
  mkdirSync(dir, { recursive: true });
  const lock = await acquireDirLock(join(dir, 'pingd.lock'), () => {
    // Another process took the directory over while this one was stalled: writing on would corrupt it.
    process.stderr.write(`pingd: the lock on the embedded database in ${dir} was taken over by another process; exiting at once\n`);
    process.exit(70);
  });
  const releaseLock = () => lock.release();
  const failed = (message: string, cause?: unknown) => new DatabaseError(message, 'DB_UNAVAILABLE', { cause });
  const pgdata = join(dir, 'pgdata');
  const minFreeBytes = Math.max(0, opts.minFreeMb ?? 0) * 1024 * 1024;
  /** The engine's thread; null while stopped for lack of space. */
  let thread: EngineThread | null = takeThread(failed);
  try {
    if (!existsSync(join(pgdata, 'PG_VERSION'))) {
      // Creating the database (initdb) leaves PGlite holding ~500 MB more than opening one does (RSS 800 MB
      // against 290 MB, measured on this machine): create it in a process of its own (pglite-create.ts).
      await createInProcess(pgdata);
    }
    await thread.open(pgdata, opts.cacheMb);
  } catch (err) {
    await thread.terminate();
    releaseLock();
    throw new DatabaseError(`cannot open the embedded database in ${dir}: ${(err as Error).message}`, 'DB_UNAVAILABLE', { cause: err });
  }
  let closed = false;
  let busy = 0;
  // One process owns the embedded database: notifications never leave it.
  const channels = new Map<string, Set<(payload: string) => void>>();

  // The disk (disk-guard.ts). `readOnly`: the session was told default_transaction_read_only (mode low).
  let mode: DiskMode = 'ok';
  let disk: DiskState = { full: false };
  let readOnly = false;
  let lastFree: number | null = null;
  let reopenFailures = 0;
  let nextReopenAt = 0;
  let watching: Promise<void> | null = null;
  const setDisk = (next: DiskState) => {
    disk = next;
    opts.onDiskChange?.(next);
  };
  const diskFull = (cause?: unknown) => {
    const message =
      mode === 'low'
        ? `the disk holding the embedded database in ${dir} is full (${describeFree(lastFree)}, below DISK_MIN_FREE_MB=${minFreeBytes / 1048576}): writes are refused until space is freed`
        : `the disk holding the embedded database in ${dir} is full (a write failed for lack of space${cause instanceof Error ? `: ${cause.message}` : ''}): the database is stopped until space is freed`;
    return new DatabaseError(message, 'DISK_FULL', { cause });
  };
  /** A write failed for lack of space: the engine's thread goes at once (it may already spin, see disk-guard.ts). */
  const stop = (th: EngineThread, cause: unknown) => {
    if (thread !== th) return;
    thread = null;
    mode = 'stopped';
    readOnly = false;
    lastFree = 0;
    setDisk({ full: true, cause: 'write_failed', freeBytes: 0, since: Date.now() });
    void th.abort(diskFull(cause));
  };
  /** Every request to the engine goes through here, so that a full disk is seen whoever met it. */
  const call = async (th: EngineThread | null, m: Request, inBg: boolean): Promise<Answer> => {
    if (!th) throw diskFull();
    const wasReadOnly = readOnly;
    try {
      return await th.call(m, inBg);
    } catch (err) {
      if (err instanceof DatabaseError && err.code === 'DISK_FULL') throw err;
      if (isDiskFullError(err)) {
        stop(th, err);
        throw diskFull(err);
      }
      // SQLSTATE 25006 read_only_sql_transaction: a write met the read-only session of mode low.
      if (wasReadOnly && (err as { code?: unknown }).code === '25006') throw diskFull(err);
      throw err;
    }
  };
  const setReadOnly = (on: boolean) => {
    readOnly = on;
    void call(thread, { op: 'exec', sql: `set default_transaction_read_only = ${on ? 'on' : 'off'}` }, false).catch(() => undefined);
  };
  /** The thread opening the database again, and that work (see reopen). */
  let reopening: { thread: EngineThread; done: Promise<void> } | null = null;
  // A new thread, as at start: WAL recovery on open brings back every committed transaction. It runs
  // beside the watcher, which ends it if space runs out again meanwhile (an open writes, and may spin).
  const reopen = () => {
    const t = takeThread(failed);
    const done = t.open(pgdata, opts.cacheMb).then(
      () => {
        if (closed || t.gone) return t.terminate();
        reopenFailures = 0;
        thread = t;
        mode = 'ok';
        setDisk({ full: false });
      },
      async (err: Error) => {
        await t.terminate().catch(() => undefined);
        reopenFailures++;
        nextReopenAt = Date.now() + reopenBackoffMs(reopenFailures);
        if (!closed)
          opts.onError?.(
            new DatabaseError(
              `cannot open the embedded database in ${dir} again after its disk was full: ${err.message}`,
              'DB_UNAVAILABLE',
              { cause: err },
            ),
          );
      },
    );
    reopening = { thread: t, done: done.finally(() => (reopening = null)) };
  };
  const look = async () => {
    try {
      const s = await statfs(dir);
      lastFree = s.bavail * s.bsize;
    } catch {
      lastFree = null;
    }
    if (closed) return;
    const next = nextDiskMode(mode, lastFree, minFreeBytes);
    if (next === 'reopen') {
      if (!reopening && Date.now() >= nextReopenAt) reopen();
    } else if (next === 'stopped') {
      if (reopening) void reopening.thread.abort(diskFull());
    } else if (next === 'low' && mode === 'ok') {
      mode = 'low';
      setReadOnly(true);
      setDisk({ full: true, cause: 'low_space', freeBytes: lastFree, since: Date.now() });
    } else if (next === 'ok' && mode === 'low') {
      mode = 'ok';
      setReadOnly(false);
      setDisk({ full: false });
    }
  };
  const watch = () => {
    // One look at a time (statfs on a network filesystem may be slow).
    watching ??= look().finally(() => (watching = null));
    return watching;
  };
  const watcher = setInterval(() => void watch(), DISK_CHECK_MS);
  watcher.unref();
  // Before the first statement: a server started on a full disk is read-only from its first request.
  await watch();

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
  // A transaction's statements go to the thread it began on: if that thread was stopped meanwhile, they
  // fail with the disk's error rather than reach a new engine that never heard of the transaction.
  const session = (tx?: { id: number; thread: EngineThread }): Queryable => ({
    async query<T>(sql: string, params?: unknown[]) {
      if (closed) throw new DatabaseError('the embedded database is closed', 'DB_UNAVAILABLE');
      busy++;
      try {
        return rowsOf<T>(await call(tx ? tx.thread : thread, { op: 'query', sql, params, tx: tx?.id }, background.getStore() === true));
      } finally {
        busy--;
      }
    },
    async exec(sql: string) {
      if (closed) throw new DatabaseError('the embedded database is closed', 'DB_UNAVAILABLE');
      await call(tx ? tx.thread : thread, { op: 'exec', sql, tx: tx?.id }, background.getStore() === true);
    },
  });
  const base = session();
  const heldLocks = new Set<number>();
  return {
    kind: 'pglite',
    query: base.query,
    exec: base.exec,
    async transaction(fn) {
      if (closed) throw new DatabaseError('the embedded database is closed', 'DB_UNAVAILABLE');
      const th = thread;
      const { tx } = await call(th, { op: 'begin' }, background.getStore() === true);
      const t = { id: tx!, thread: th! };
      let v;
      try {
        v = await fn(session(t));
      } catch (err) {
        await call(t.thread, { op: 'end', tx: t.id, commit: false }, false).catch(() => undefined);
        throw err;
      }
      await call(t.thread, { op: 'end', tx: t.id, commit: true }, false);
      return v;
    },
    async withTryAdvisoryLock(key, fn) {
      // The directory has one process (its lock file), but that process runs the operator's commands
      // beside its own jobs (`pingd prune` beside retention, `pingd render` beside the schedule): the keys
      // held in this process play the part of PostgreSQL's session locks.
      if (heldLocks.has(key)) return { ran: false };
      heldLocks.add(key);
      try {
        return { ran: true, value: await fn(base) };
      } finally {
        heldLocks.delete(key);
      }
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
    disk() {
      return disk;
    },
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(watcher);
      await watching;
      if (reopening) {
        void reopening.thread.terminate();
        await reopening.done;
      }
      const th = thread;
      thread = null;
      try {
        if (!th) return;
        // On a full disk PGlite's close, a checkpoint, would fail or spin like any write: the thread is
        // ended instead, as SIGKILL would end it, and the next open replays the WAL (every commit is there).
        if (mode !== 'ok') return await th.abort(new DatabaseError('the embedded database is closed', 'DB_UNAVAILABLE'));
        await th.call({ op: 'close' });
        await returnThread(th);
      } catch (err) {
        await th?.terminate();
        // The disk filled up since the last look: the close's checkpoint failed, the WAL has every commit.
        if (!isDiskFullError(err)) throw err;
      } finally {
        releaseLock();
      }
    },
  };
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
