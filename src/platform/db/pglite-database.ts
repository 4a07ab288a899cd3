// Owns the embedded database behind the Db interface: PGlite in its own thread (pglite-thread.ts), the lock
// file that keeps a data directory to one process, and background work's place behind intake on its one session.
import { AsyncLocalStorage } from 'node:async_hooks';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DatabaseError, type Db, type Queryable } from './db-interface.js';
import { acquireDirLock } from './dir-lock.js';
import { createInProcess, returnThread, takeThread, type Answer } from './pglite-thread.js';

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

/**
 * The embedded database keeps its files under dataDir. PGlite itself does not lock the directory and two
 * processes writing it would corrupt it, so a lock file guards it (dir-lock.ts: held as long as its
 * holder's heartbeat goes on; a lock left by a crash, SIGKILL or a killed container is taken over). The
 * engine runs in a thread of its own (pglite-thread.ts), off the event loop that serves HTTP.
 */
export async function openPglite(dataDir: string, cacheMb: number | undefined): Promise<Db> {
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
  const thread = takeThread(failed);
  try {
    if (!existsSync(join(pgdata, 'PG_VERSION'))) {
      // Creating the database (initdb) leaves PGlite holding ~500 MB more than opening one does (RSS 800 MB
      // against 290 MB, measured on this machine): create it in a process of its own (pglite-create.ts).
      await createInProcess(pgdata);
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
  const heldLocks = new Set<number>();
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

/** Whether a process with this pid exists (EPERM: it does, owned by someone else). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
