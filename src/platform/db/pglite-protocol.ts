// Owns the messages between database.ts and the embedded database's worker (pglite-worker.ts): statements
// in, rows or a PostgreSQL error out, and transactions opened and ended by id.

export type WorkerRequest =
  /**
   * Opens the database in dataDir (one at a time per thread); wasm: PGlite's engine, already compiled;
   * cacheMb: its shared_buffers (undefined: PGlite's own, 128 MB).
   */
  | { op: 'open'; id: number; dataDir: string; wasm?: WebAssembly.Module; cacheMb?: number }
  | { op: 'query'; id: number; sql: string; params?: unknown[]; tx?: number }
  | { op: 'exec'; id: number; sql: string; tx?: number }
  /** Opens a transaction: the reply carries its id; statements naming it run inside it. */
  | { op: 'begin'; id: number }
  /** Commits or rolls back: the reply comes once PGlite has done so. */
  | { op: 'end'; id: number; tx: number; commit: boolean }
  /** Closes the database; the thread may open another. */
  | { op: 'close'; id: number };

/** What a PostgreSQL error carries that callers look at (SQLSTATE code, detail, constraint…). */
export interface WorkerError {
  message: string;
  code?: string;
  [field: string]: unknown;
}

/** The answer to request `id`. */
export type WorkerReply =
  { id: number; ok: true; rows?: Record<string, unknown>[]; bytea?: string[]; tx?: number } | { id: number; ok: false; error: WorkerError };
