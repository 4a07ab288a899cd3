// Owns the embedded database's thread: PGlite (PostgreSQL compiled to WASM) runs here, in a worker_threads
// worker, and answers the statements database.ts posts to it. On the HTTP event loop a batch of ~45 pings
// held it ~10 ms and a render's pages tens of ms each (bench/results/evidence/2026-11-23-wrk.md, change 13): here
// the server keeps reading and answering requests while the engine works, on the second core.
//
// One session, as before: statements run one at a time in arrival order, and a transaction holds PGlite's
// own lock until the main thread ends it, so statements posted meanwhile outside it wait, as they did
// in-process.
import { parentPort } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import type { WorkerError, WorkerReply, WorkerRequest } from './pglite-protocol.js';
import { Statements } from './pglite-statements.js';

const BYTEA_OID = 17;

/**
 * bytea crosses PGlite's text protocol as hex. PGlite's own converters go byte by byte through JS arrays and
 * strings: a 1 MiB rendering chunk took 1.25 s to serialise and 0.38 s to parse (measured on this machine,
 * under load); Buffer's hex codec does the same in 6 and 14 ms.
 */
function byteaToHex(v: unknown): string {
  if (!(v instanceof Uint8Array)) throw new TypeError('bytea parameters must be Buffers or Uint8Arrays');
  return `\\x${Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex')}`;
}

const hexToBytea = (s: string): Buffer => Buffer.from(s.slice(2), 'hex');

type Session = Pick<PGlite, 'query' | 'exec'>;

const port = parentPort!;
const post = (m: WorkerReply) => port.postMessage(m);

function errorOf(err: unknown): WorkerError {
  const e = (err ?? {}) as Record<string, unknown>;
  const out: WorkerError = { message: typeof e.message === 'string' ? e.message : String(err) };
  for (const k of ['code', 'detail', 'hint', 'constraint', 'table', 'column', 'schema', 'severity', 'position']) {
    if (e[k] !== undefined) out[k] = e[k];
  }
  return out;
}

class RolledBack extends Error {}

/** The request id a transaction rolled back by close() answers to: none. */
const CLOSED = -1;

/** The database open in this thread, if any (one at a time; the thread outlives it, see pglite-thread.ts). */
let db: PGlite | null = null;
/** Its statements, prepared once each. */
let statements: Statements | null = null;
/** Open transactions by id: the session to run their statements on, and how to end them. */
const open = new Map<number, { tx: Session; end: (commit: boolean, replyTo: number) => void }>();
let nextTx = 1;

function session(tx: number | undefined): Session {
  if (!db) throw new Error('no database is open');
  if (tx === undefined) return db;
  const t = open.get(tx);
  if (!t) throw new Error(`transaction ${tx} is not open`);
  return t.tx;
}

/** Runs fn and answers request `id` with its value (rows, a transaction id) or its error. */
function answer(id: number, fn: () => Promise<Omit<WorkerReply & { ok: true }, 'id' | 'ok'> | void>): void {
  fn().then(
    (v) => post({ id, ok: true, ...(v ?? {}) }),
    (err) => post({ id, ok: false, error: errorOf(err) }),
  );
}

function begin(id: number): void {
  if (!db) return post({ id, ok: false, error: { message: 'no database is open' } });
  const txId = nextTx++;
  let endId = 0;
  db.transaction(
    (tx) =>
      new Promise<void>((resolve, reject) => {
        open.set(txId, {
          tx,
          end: (commit, replyTo) => {
            endId = replyTo;
            if (commit) resolve();
            else reject(new RolledBack());
          },
        });
        post({ id, ok: true, tx: txId });
      }),
  ).then(
    () => {
      open.delete(txId);
      post({ id: endId, ok: true });
    },
    (err) => {
      open.delete(txId);
      if (endId === CLOSED) return; // rolled back by close: nobody asked
      // Failing before the main thread ended it: BEGIN itself failed. A rollback it asked for is no error.
      if (endId === 0) post({ id, ok: false, error: errorOf(err) });
      else if (err instanceof RolledBack) post({ id: endId, ok: true });
      else post({ id: endId, ok: false, error: errorOf(err) });
    },
  );
}

port.on('message', (m: WorkerRequest) => {
  switch (m.op) {
    case 'open':
      return answer(m.id, async () => {
        if (db) throw new Error('a database is already open in this thread');
        // PGlite's start parameters are all or nothing: its defaults, then the cache size (a later -c wins).
        const startParams = m.cacheMb === undefined ? undefined : [...PGlite.defaultStartParams, '-c', `shared_buffers=${m.cacheMb}MB`];
        const opening = new PGlite(m.dataDir, {
          pgliteWasmModule: m.wasm,
          startParams,
          serializers: { [BYTEA_OID]: byteaToHex },
          parsers: { [BYTEA_OID]: hexToBytea },
        });
        await opening.waitReady;
        db = opening;
        statements = new Statements(opening);
      });
    case 'query':
      return answer(m.id, async () => {
        session(m.tx); // the database is open, the transaction too
        const r =
          m.tx === undefined ? await statements!.run(m.sql, m.params ?? []) : await statements!.inTransaction(m.sql, m.params ?? []);
        // Rows cross as structured clones: a Buffer arrives as a plain Uint8Array, so name the bytea columns.
        return { rows: r.rows as Record<string, unknown>[], bytea: r.fields.filter((f) => f.dataTypeID === BYTEA_OID).map((f) => f.name) };
      });
    case 'exec':
      return answer(m.id, async () => {
        await session(m.tx).exec(m.sql);
      });
    case 'begin':
      return begin(m.id);
    case 'end': {
      const t = open.get(m.tx);
      if (t) t.end(m.commit, m.id);
      else post({ id: m.id, ok: false, error: { message: `transaction ${m.tx} is not open` } });
      return;
    }
    case 'close':
      return answer(m.id, async () => {
        const closing = db;
        db = null;
        statements = null;
        // A transaction still open holds PGlite's lock, and nothing will end it now: roll it back, or
        // close() waits for it forever (REGRESSION: a test that closed the database under a running app
        // hung CI for good when a transaction of the app was open at that moment).
        for (const t of open.values()) t.end(false, CLOSED);
        open.clear();
        await closing?.close();
      });
  }
});
