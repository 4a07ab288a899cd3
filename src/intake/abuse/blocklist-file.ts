// Owns keeping the blocklist in step with BLOCKLIST_FILE without a restart: the file is read at start
// (a missing file is a start-up error), then re-read when fs.watch reports a change in its directory or,
// since watch events are lost on some file systems and editors replace files by rename, when a periodic
// stat sees a different inode, size or mtime. A file that cannot be read keeps the previous list.
import { readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { createHash } from 'node:crypto';
import { parseBlocklist, type Blocklist, type BlocklistProblem } from './blocklist.js';
import { PingdError } from '../../platform/errors.js';

/** Largest blocklist file read (a typo'd path to a huge file must not exhaust memory). */
export const MAX_FILE_BYTES = 32 * 1024 * 1024;
export const CHECK_INTERVAL_MS = 2000;

export interface BlocklistFileEvents {
  loaded(list: Blocklist, info: { problems: BlocklistProblem[]; initial: boolean }): void;
  failed(err: Error): void;
}

export class BlocklistFileError extends PingdError<'BLOCKLIST_UNREADABLE'> {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BLOCKLIST_UNREADABLE', message, options);
  }
}

export class BlocklistFile {
  private signature = '';
  private digest = '';
  private timer?: NodeJS.Timeout;
  private debounce?: NodeJS.Timeout;
  private watcher?: FSWatcher;
  private lastError = '';
  readonly path: string;

  constructor(
    path: string,
    private readonly events: BlocklistFileEvents,
    private readonly intervalMs = CHECK_INTERVAL_MS,
  ) {
    this.path = resolve(path);
  }

  /** Loads the file (throwing a clear error if it cannot) and starts watching it. */
  start(): void {
    this.load(true);
    this.timer = setInterval(() => this.check(), this.intervalMs).unref();
    try {
      // The directory, not the file: editors and `mv` replace the file, which ends a watch on its inode.
      const name = basename(this.path);
      this.watcher = watch(dirname(this.path), { persistent: false }, (_event, file) => {
        if (file !== null && file !== name) return;
        clearTimeout(this.debounce);
        // Forced: a rewrite within one mtime tick and of the same size keeps the stat signature.
        this.debounce = setTimeout(() => this.check(true), 50).unref();
      });
      this.watcher.on('error', () => {
        this.watcher?.close();
        this.watcher = undefined; // the periodic check carries on alone
      });
    } catch {
      /* no watch support here: the periodic check is enough */
    }
  }

  /** Re-reads the file if it changed since the last load (or `force`); true when a new list was loaded. */
  check(force = false): boolean {
    try {
      const st = statSync(this.path);
      if (!force && `${st.ino}:${st.size}:${st.mtimeMs}` === this.signature) return false;
    } catch (err) {
      this.fail(new BlocklistFileError(`cannot read BLOCKLIST_FILE ${this.path}: ${(err as Error).message}`, { cause: err }));
      return false;
    }
    return this.load(false);
  }

  private load(initial: boolean): boolean {
    let text: string;
    let sig: string;
    try {
      const st = statSync(this.path);
      if (!st.isFile()) throw new Error('not a regular file');
      if (st.size > MAX_FILE_BYTES) throw new Error(`larger than ${MAX_FILE_BYTES} bytes`);
      sig = `${st.ino}:${st.size}:${st.mtimeMs}`;
      text = readFileSync(this.path, 'utf8');
    } catch (err) {
      const e = new BlocklistFileError(`cannot read BLOCKLIST_FILE ${this.path}: ${(err as Error).message}`, { cause: err });
      if (initial) throw e;
      this.fail(e);
      return false;
    }
    this.signature = sig;
    this.lastError = '';
    const digest = createHash('sha256').update(text).digest('hex');
    // Same content under a new mtime (touch, a save without changes): nothing to swap.
    if (digest === this.digest) return false;
    this.digest = digest;
    const { list, problems } = parseBlocklist(text);
    this.events.loaded(list, { problems, initial });
    return true;
  }

  private fail(err: Error): void {
    // Report a failure once, not every interval, until the file is readable again.
    if (err.message === this.lastError) return;
    this.lastError = err.message;
    this.events.failed(err);
  }

  close(): void {
    clearInterval(this.timer);
    clearTimeout(this.debounce);
    this.watcher?.close();
  }
}
