// Owns what a `pingd` command working on a database is given to run: how to open the database, where its
// lines go, and the exit codes it may return (their values are operations/admin/commands.ts's EXIT, listed
// in docs/reference/cli.md). Each command names the codes it uses, so a caller passes at least those.
import type { Config } from './config.js';
import type { Db } from './db/database.js';
import { pendingMigrations } from './db/migrate.js';

/** Every exit code a command may return. */
export interface ExitCodes {
  OK: number;
  FAILURE: number;
  USAGE: number;
  /** Another instance holds the work's lock: try again later. */
  BUSY: number;
  /** The configuration forbids it (a secret is unset). */
  CONFIG: number;
}

export interface CommandDeps<Code extends keyof ExitCodes = keyof ExitCodes> {
  openDb(config: Config): Promise<Db>;
  /** Writes one line of the command's output (the newline is added), as console.log would. */
  out(text: string): void;
  /** Writes one line to the command's error output, as console.error would. */
  err(text: string): void;
  EXIT: Pick<ExitCodes, Code>;
  /**
   * The command runs in a running server (through its admin socket or the operator API), with the server's
   * configuration: a setting it lacks is the server's to set, not the operator's shell's.
   */
  inServer?: boolean;
}

/**
 * Why a command must not run on `db` yet (its schema lags this code: migrations pending), as the line it
 * prints; null when the schema is current.
 */
export async function schemaBehind(db: Db, command: string): Promise<string | null> {
  const pending = await pendingMigrations(db);
  return pending.length
    ? `pingd ${command}: the database schema is not up to date (pending: ${pending.join(', ')}); run \`pingd migrate\` first`
    : null;
}
