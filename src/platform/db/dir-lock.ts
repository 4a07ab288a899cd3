// Owns the embedded database's directory lock: one live process per data directory, held only as long as
// its holder lives. PGlite does not lock its files, and two processes writing them would corrupt them.
//
// A pid alone cannot say who holds a lock: in a container pingd is PID 1 at every start, so a lock left by
// a killed container said "1", which the next start read as "already open in this process" and exited,
// forever; two containers sharing a volume are both PID 1 as well. So the holder proves it lives by a
// heartbeat: it touches the lock file every HEARTBEAT_MS. A lock whose file has not been touched for
// STALE_MS is taken over, whoever wrote it; one being touched is refused, whatever pid it names. The file
// holds `<pid> <token> <host>`: the token (new at each start) tells this process's own lock from an
// earlier life's, and a lock of a dead pid on this host is taken over at once.
import { closeSync, openSync, readFileSync, statSync, unlinkSync, utimesSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { DatabaseError } from './db-interface.js';

/** How often the holder touches its lock. */
export const HEARTBEAT_MS = 2000;
/**
 * A lock untouched this long is stale. Five heartbeats: a holder whose event loop stalls for a few
 * seconds (a long statement's answer, a collection) keeps its lock.
 */
export const STALE_MS = 5 * HEARTBEAT_MS;

interface Seen {
  pid: number;
  token: string | null;
  host: string | null;
  mtimeMs: number;
  ino: number;
}

/** Locks this process holds, by path, with their tokens. */
const held = new Map<string, string>();

function read(path: string): Seen | undefined {
  try {
    const st = statSync(path);
    const [pid, token, host] = readFileSync(path, 'utf8').trim().split(/\s+/);
    return { pid: Number(pid), token: token ?? null, host: host ?? null, mtimeMs: st.mtimeMs, ino: st.ino };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Removes the lock file if it is still the one judged stale (another starter may have replaced it since). */
function removeIfSame(path: string, seen: Seen): void {
  const now = read(path);
  if (now && now.ino === seen.ino && now.mtimeMs === seen.mtimeMs && now.token === seen.token) {
    try {
      unlinkSync(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export interface DirLock {
  release(): void;
}

/**
 * Takes the lock at `path`, waiting up to STALE_MS for a lock nobody touches any more. Refuses (DB_LOCKED)
 * when this process already holds it, or when its holder is seen alive (its heartbeat moved). `onLost` is
 * called if another process ever replaces the lock while we hold it (we stalled longer than STALE_MS): the
 * caller must stop using the directory at once.
 */
export async function acquireDirLock(
  path: string,
  onLost: () => void,
  opts: { heartbeatMs?: number; staleMs?: number } = {},
): Promise<DirLock> {
  const heartbeatMs = opts.heartbeatMs ?? HEARTBEAT_MS;
  const staleMs = opts.staleMs ?? STALE_MS;
  const dir = path.replace(/\/[^/]*$/, '');
  if (held.has(path)) throw new DatabaseError(`the embedded database in ${dir} is already open in this process`, 'DB_LOCKED');
  const token = randomUUID();
  const host = hostname().replace(/\s+/g, '_') || 'localhost';
  let watched: Seen | undefined;
  for (;;) {
    try {
      const fd = openSync(path, 'wx');
      try {
        writeSync(fd, `${process.pid} ${token} ${host}\n`);
      } finally {
        closeSync(fd);
      }
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const seen = read(path);
    if (!seen) continue;
    if (watched && watched.token === seen.token && watched.ino === seen.ino && seen.mtimeMs !== watched.mtimeMs) {
      const ago = Math.max(0, Math.round(Date.now() - seen.mtimeMs));
      throw new DatabaseError(
        `the embedded database in ${dir} is in use by another pingd process (pid ${seen.pid}${seen.host ? ` on ${seen.host}` : ''}, alive ${ago} ms ago); stop it or set DATA_DIR to another directory`,
        'DB_LOCKED',
      );
    }
    // A process of this host that no longer exists: its lock goes at once (not our own pid: after a
    // container restart that pid is ours again, and only the heartbeat tells).
    const deadHere = seen.host === host && seen.pid !== process.pid && Number.isInteger(seen.pid) && seen.pid > 0 && !isAlive(seen.pid);
    if (deadHere || Date.now() - seen.mtimeMs > staleMs) {
      removeIfSame(path, seen);
      continue;
    }
    watched = seen;
    // Until its heartbeat moves (a live holder) or the lock goes stale.
    await new Promise((r) => setTimeout(r, Math.min(heartbeatMs / 4, Math.max(10, staleMs - (Date.now() - seen.mtimeMs) + 10))));
  }
  held.set(path, token);
  const timer = setInterval(() => {
    const now = read(path);
    if (now?.token !== token) {
      clearInterval(timer);
      held.delete(path);
      onLost();
      return;
    }
    const t = new Date();
    try {
      utimesSync(path, t, t);
    } catch {
      /* the next beat tries again */
    }
  }, heartbeatMs);
  timer.unref();
  return {
    release() {
      clearInterval(timer);
      if (held.get(path) !== token) return;
      held.delete(path);
      const now = read(path);
      if (now?.token === token) {
        try {
          unlinkSync(path);
        } catch {
          /* already gone */
        }
      }
    },
  };
}
