// Owns creating a new embedded database (PGlite's initdb) in a process of its own, for pglite-database.ts:
// `node pglite-create.js <dir>` exits 0 once the directory holds a database, 1 with the reason on stderr.
//
// Why a process: creating a database leaves the engine's thread holding ~500 MB more than opening one
// does, and ending the thread gives the WebAssembly memory back but not all of what malloc kept for it: a
// server started on a new directory idled at 277-319 MB (20 s after ready, MALLOC_ARENA_MAX=2, three runs)
// when it created the database in a thread, 243-290 MB with this process, 246-272 MB on an existing one.
// A process that exits gives everything back.
import { PGlite } from '@electric-sql/pglite';

const dataDir = process.argv[2];
if (!dataDir) {
  process.stderr.write('usage: pglite-create <data directory>\n');
  process.exit(2);
}
try {
  const db = new PGlite(dataDir);
  await db.waitReady;
  await db.close();
} catch (err) {
  process.stderr.write(`${(err as Error).message ?? String(err)}\n`);
  process.exit(1);
}
