// Owns saying which database a process uses, as a command prints it on stderr (`pingd: database: embedded
// /abs/data` or `pingd: database: postgres host:port/db`, never a user or password), and the mark a server
// leaves in an embedded data directory, by which a command tells a directory no server has ever run on.
//
// What broke: with the server on PostgreSQL, `npx pingd stats` in a shell without DATABASE_URL opened the
// checkout's embedded ./data and printed its numbers, exit 0, with nothing to say they were another
// database's.
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Config } from '../config.js';
import { describeHosts, parseMultiHostUrl } from './multi-host.js';

/**
 * The file `pingd serve` writes in DATA_DIR once it listens. Not the lock file or the admin socket: both
 * go when the server stops (and a command takes the lock too), and the database's own files exist as soon
 * as anything opened the directory (a command creates the database where there was none).
 */
export const SERVED_MARK = 'served';

type Where = Pick<Config, 'DATABASE_URL' | 'DATA_DIR'>;

/** `embedded <absolute DATA_DIR>` or `postgres <host>:<port>/<database>` (no user, password or options). */
export function describeDatabase(config: Where): string {
  if (!config.DATABASE_URL) return `embedded ${resolve(config.DATA_DIR)}`;
  try {
    // libpq's forms: several hosts, a socket directory in ?host=, defaults for what is left out.
    const u = parseMultiHostUrl(config.DATABASE_URL);
    return `postgres ${describeHosts(u.hosts)}/${u.database || '(default)'}`;
  } catch {
    return 'postgres [unparseable DATABASE_URL]';
  }
}

/** The line a command prints on stderr when it opens the database. */
export function databaseLine(config: Where): string {
  return `pingd: database: ${describeDatabase(config)}`;
}

/**
 * A warning for a command that opens an embedded directory no server has run on (undefined otherwise):
 * most likely the shell lacks the server's DATABASE_URL or DATA_DIR.
 */
export function unservedWarning(config: Where): string | undefined {
  if (config.DATABASE_URL) return undefined;
  const dir = resolve(config.DATA_DIR);
  if (existsSync(join(dir, SERVED_MARK))) return undefined;
  const what = existsSync(join(dir, 'pgdata', 'PG_VERSION'))
    ? `no pingd server has ever run on the embedded database in ${dir}`
    : `there is no embedded database in ${dir}: one is created there`;
  return `pingd: warning: ${what}; if your server uses PostgreSQL or another directory, set DATABASE_URL or DATA_DIR as it has them`;
}

/** Leaves the mark (once; a later start keeps the first one's time). */
export function markServed(dataDir: string): void {
  const path = join(resolve(dataDir), SERVED_MARK);
  if (existsSync(path)) return;
  writeFileSync(path, `a pingd server has run on this directory, first at ${new Date().toISOString()}\n`);
}
