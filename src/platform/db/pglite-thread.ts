// Owns the thread the embedded database runs in (pglite-worker.ts): starting it, posting statements to it
// in priority order and matching the answers, and keeping one idle thread for the next database this process
// opens (a thread starts in ~1 s: loading PGlite's JavaScript again in a new isolate is most of it); and the
// process that creates a new database (pglite-create.ts).
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
import type { WorkerError, WorkerReply, WorkerRequest } from './pglite-protocol.js';

/** The engine thread's young generation (MB), see startWorker. */
const WORKER_YOUNG_MB = 8;

/** This file's extension, and so its siblings': .ts under tsx (tests, `npm run dev`), .js once compiled. */
const OWN_EXT = extname(fileURLToPath(import.meta.url));
const WORKER_URL = new URL(`./pglite-worker${OWN_EXT}`, import.meta.url);

/**
 * `node --import tsx` does not reach worker threads (Node 20 loads a .ts entry as an unknown extension),
 * so under tsx the worker registers it first; compiled, it is plain JavaScript.
 */
function startWorker(): Worker {
  // The thread's JavaScript only moves statements and rows: a young generation of a few MB is plenty, where
  // V8's default lets it grow to tens of MB of resident memory under a render's pages.
  const resourceLimits = { maxYoungGenerationSizeMb: WORKER_YOUNG_MB };
  if (OWN_EXT !== '.ts') return new Worker(WORKER_URL, { resourceLimits });
  const boot = `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then(({ register }) => { register(); return import(${JSON.stringify(WORKER_URL.href)}); })`;
  return new Worker(boot, { eval: true, resourceLimits });
}

/** Creates a new database in `pgdata` by running pglite-create in a child process (under tsx, with tsx). */
export function createInProcess(pgdata: string): Promise<void> {
  return new Promise((done, fail) => {
    const loader = OWN_EXT === '.ts' ? ['--import', import.meta.resolve('tsx')] : [];
    const entry = fileURLToPath(new URL(`./pglite-create${OWN_EXT}`, import.meta.url));
    const child = spawn(process.execPath, [...loader, entry, pgdata], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', fail);
    child.on('close', (code, signal) =>
      code === 0 ? done() : fail(new Error(stderr.trim() || `creating it ended with ${code ?? signal}`)),
    );
  });
}

let wasmModule: Promise<WebAssembly.Module | undefined> | undefined;

/**
 * PGlite's engine, compiled once per process and handed to every database opened (a compiled module
 * crosses to a worker without being compiled again); undefined lets PGlite load its own.
 */
function pgliteWasm(): Promise<WebAssembly.Module | undefined> {
  wasmModule ??= (async () => {
    // Baseline (Liftoff) code only. V8 otherwise recompiles the engine's hot functions with its optimizing
    // compiler, whose scratch memory glibc keeps once freed: the idle server was 218-252 MB (five starts)
    // and 167-170 MB with this (four), VmHWM 262-284 against 207-214 MB. Statements were not measurably
    // slower (inserts and 100k-row reads within run-to-run noise), and in the 10-minute soak at 200 pings/s
    // the intake p99 was lower (36-39 ms against 59-62). A process-wide V8 flag, read when WebAssembly is
    // compiled: PGlite's engine is the only WebAssembly pingd runs.
    setFlagsFromString('--liftoff-only');
    try {
      const file = join(dirname(fileURLToPath(import.meta.resolve('@electric-sql/pglite'))), 'pglite.wasm');
      return await WebAssembly.compile(await readFile(file));
    } catch {
      return undefined;
    }
  })();
  return wasmModule;
}

/** A PostgreSQL error raised in the worker, with the fields callers look at (code: the SQLSTATE). */
function workerError(e: WorkerError): Error {
  return Object.assign(new Error(e.message), e);
}

export type Request = WorkerRequest extends infer R ? (R extends unknown ? Omit<R, 'id'> : never) : never;
export type Answer = WorkerReply & { ok: true };

/**
 * How long a background statement waits while foreground work is going on (a statement or transaction
 * waiting or open, or one seen in the last BACKGROUND_MAX_WAIT_MS): past it, it goes in anyway, so under
 * constant intake a render's statements are paced ~25 ms apart rather than starved or back to back. Soak at
 * 200 pings/s (bench/results/evidence/2026-11-23-soak-2.md): 250 ms starved the renders (a 40-statement render 10 s
 * longer); going back to back whenever the session was free for an instant gave p99 1.9 s in the first
 * third against 0.45 s paced.
 */
export const BACKGROUND_MAX_WAIT_MS = 25;

export class EngineThread {
  private readonly worker = startWorker();
  private readonly pending = new Map<number, { resolve: (r: Answer) => void; reject: (e: Error) => void }>();
  private nextId = 1;
  // One session serves everything, in the order statements reach the worker. Background statements (a
  // render, retention: see database.ts inBackground) are held here while foreground work (intake) is
  // posted or inside a transaction, and posted one at a time, so a ping batch waits behind one render
  // statement at most instead of a queue of them.
  private foreground = 0;
  private readonly foregroundTx = new Set<number>();
  private lastForegroundAt = -Infinity;
  private backgroundBusy = false;
  private readonly backgroundQueue: { at: number; post: () => void; reject: (e: Error) => void }[] = [];
  private backgroundTimer: NodeJS.Timeout | null = null;
  /** Why the thread is unusable (it failed or exited); every later call fails with it. */
  gone: Error | null = null;

  constructor(private readonly failed: (message: string, cause?: unknown) => Error) {
    this.worker.on('message', (m: WorkerReply) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      this.refresh();
      if (m.ok) p.resolve(m);
      else p.reject(workerError(m.error));
    });
    this.worker.on('error', (err) => this.fail(failed(`the embedded database's thread failed: ${err.message}`, err)));
    this.worker.on('exit', (code) => this.fail(failed(`the embedded database's thread exited (${code})`)));
    this.refresh();
  }

  // The thread keeps the process alive only while a statement waits for it, as PGlite in-process never
  // held the process: a CLI command or a test that has nothing left to do still exits.
  private refresh(): void {
    if (this.pending.size > 0) this.worker.ref();
    else this.worker.unref();
  }

  private fail(err: Error): void {
    this.gone ??= err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    for (const q of this.backgroundQueue.splice(0)) q.reject(err);
    if (this.backgroundTimer) clearTimeout(this.backgroundTimer);
    this.backgroundTimer = null;
    this.refresh();
  }

  /**
   * Posts a request; `background` ones wait their turn (see `foreground`). Statements inside an open
   * transaction, and its end, are never held: the transaction holds the session until it ends.
   */
  call(m: Request, background = false): Promise<Answer> {
    return new Promise((resolve, reject) => {
      if (this.gone) return reject(this.gone);
      const inTx = (m.op === 'query' || m.op === 'exec' || m.op === 'end') && m.tx !== undefined;
      const post = (onAnswer: (r: Answer | null) => void) => {
        const id = this.nextId++;
        this.pending.set(id, {
          resolve: (r) => {
            onAnswer(r);
            resolve(r);
          },
          reject: (e) => {
            onAnswer(null);
            reject(e);
          },
        });
        this.refresh();
        this.worker.postMessage({ ...m, id });
      };
      if (inTx) {
        // REGRESSION: the end of a foreground transaction was never taken off foregroundTx, so after the
        // first ping batch every background statement waited the full BACKGROUND_MAX_WAIT_MS.
        return post(() => {
          if (m.op === 'end' && this.foregroundTx.delete(m.tx)) this.pump();
        });
      }
      if (!background) {
        this.foreground++;
        this.lastForegroundAt = performance.now();
        return post((r) => {
          this.foreground--;
          this.lastForegroundAt = performance.now();
          if (m.op === 'begin' && r?.tx !== undefined) this.foregroundTx.add(r.tx);
          this.pump();
        });
      }
      this.backgroundQueue.push({
        at: performance.now(),
        reject,
        post: () => {
          this.backgroundBusy = true;
          post(() => {
            this.backgroundBusy = false;
            this.pump();
          });
        },
      });
      this.pump();
    });
  }

  /** Posts the next background request if foreground work has stopped, or it has waited long enough. */
  private pump(): void {
    if (this.backgroundBusy || this.backgroundQueue.length === 0) return;
    const now = performance.now();
    const waited = now - this.backgroundQueue[0].at;
    const idle = this.foreground === 0 && this.foregroundTx.size === 0 && now - this.lastForegroundAt >= BACKGROUND_MAX_WAIT_MS;
    if (idle || waited >= BACKGROUND_MAX_WAIT_MS) {
      if (this.backgroundTimer) clearTimeout(this.backgroundTimer);
      this.backgroundTimer = null;
      const next = this.backgroundQueue.shift()!;
      if (this.gone) next.reject(this.gone);
      else next.post();
      return;
    }
    this.backgroundTimer ??= setTimeout(() => {
      this.backgroundTimer = null;
      this.pump();
    }, BACKGROUND_MAX_WAIT_MS - waited);
  }

  async open(dataDir: string, cacheMb?: number): Promise<void> {
    await this.call({ op: 'open', dataDir, wasm: await pgliteWasm(), cacheMb });
  }

  async terminate(): Promise<void> {
    this.gone ??= new Error('terminated');
    await this.worker.terminate();
  }

  /**
   * Ends the thread at once, whatever it is doing, and fails every statement waiting or to come with
   * `err`. Terminating stops a statement that is still running too (V8 interrupts the engine's
   * WebAssembly): what the disk guard needs for an engine that spins after a failed WAL write.
   */
  async abort(err: Error): Promise<void> {
    this.fail(err);
    await this.worker.terminate();
  }
}

let spare: EngineThread | null = null;

/** A thread with no database open: the one kept from a closed database, or a new one. */
export function takeThread(failed: (message: string, cause?: unknown) => Error): EngineThread {
  const t = spare && !spare.gone ? spare : new EngineThread(failed);
  spare = null;
  return t;
}

/** Keeps a thread whose database was closed for the next open; a second one is ended. */
export async function returnThread(t: EngineThread): Promise<void> {
  if (!t.gone && !spare) spare = t;
  else await t.terminate();
}
