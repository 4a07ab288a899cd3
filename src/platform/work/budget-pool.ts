// Owns running CPU-heavy pure functions off the event loop: a piscina pool of worker threads, each task
// under a budget of CPU time after which its thread is terminated (synchronous code cannot be interrupted
// any other way), a memory limit per thread, and a bound on tasks waiting for a thread. What a task does is
// the caller's (a module whose default export takes the task and returns its result).
//
// Why: a fetched document is written by a stranger, and parsing one is synchronous. A 4.8 MB feed of
// 20,000 items took 0.56–1.27 s of the main thread, and one such feed a second took intake's p50 from
// 7.7 ms to 337 ms. In a worker it costs the event loop the copy of its bytes (~1 ms for 5 MB).
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { threadCpuMs } from './thread-cpu.js';

export type BudgetResult<R> =
  | { kind: 'ok'; value: R }
  /** The task ran out of time or memory: its thread was ended. */
  | { kind: 'over_budget'; reason: 'time' | 'memory' }
  /** Every thread is busy and `maxWaiting` tasks already wait: try again later. */
  | { kind: 'busy' };

export interface BudgetPoolOptions {
  /** The task module (its default export); `.ts` under tsx, `.js` once compiled: see moduleBeside. */
  filename: string;
  threads: number;
  /**
   * CPU time one task may use on its thread (wall time where the thread's CPU cannot be read, off Linux).
   * Wall time alone is bounded too, at WALL_FACTOR times this.
   */
  budgetMs: number;
  /** Tasks that may wait for a free thread; more are answered `busy` at once. */
  maxWaiting: number;
  /** Old-generation heap of each thread; a task that needs more ends its thread (`over_budget`). */
  memoryMb: number;
  /** Idle threads end after this long (their heap is given back); the next task starts one again. */
  idleMs?: number;
  /** A thread that failed outside any task (it could not start): told here, never thrown. */
  onError?: (err: Error) => void;
}

/**
 * Time allowed on top of the budget when a task has to start its thread: loading the task's modules is
 * not the document's cost (measured: 60–120 ms compiled, 0.4–1.5 s under tsx on a loaded machine).
 */
const START_ALLOWANCE_MS = 5000;

/**
 * How long past its budget in wall time a task may run while its CPU time is still under it: a thread
 * starved of cores gets ten times its budget to spend it, and a thread that waits without spending CPU
 * (which a pure task never does) is still ended.
 */
export const WALL_FACTOR = 10;

/**
 * The parent's Node flags a task thread starts with: the TypeScript loader (tests, `npm run dev`: tsx's
 * `--import`) and source maps, and nothing else. Not what was preloaded for the main thread only (a
 * profiler, a benchmark's statement counter: measured, a benchmark's `--import counter.ts` ran in each
 * thread before tsx was ready, the thread failed to start, and piscina's unhandled 'error' event ended the
 * server). Not V8's flags either: a Worker given one (`--max-old-space-size`, `--liftoff-only`,
 * `--max-semi-space-size`) refuses to start (ERR_WORKER_INVALID_EXEC_ARGV), so `node --max-old-space-size=512
 * bin/pingd.js serve` left every verification waiting on threads that never came; they are process-wide
 * and reach the thread anyway.
 */
export function threadExecArgv(argv: readonly string[] = process.execArgv): string[] {
  const out: string[] = [];
  const preload = /^(?:--import|--require|-r|--loader|--experimental-loader)$/;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const eq = /^(--import|--require|--loader|--experimental-loader)=(.*)$/.exec(a);
    if (eq) {
      if (/tsx/.test(eq[2])) out.push(a);
      continue;
    }
    if (preload.test(a)) {
      const value = argv[i + 1] ?? '';
      i++;
      if (/tsx/.test(value)) out.push(a, value);
      continue;
    }
    if (a === '--enable-source-maps') out.push(a);
  }
  return out;
}

/** The URL of a module beside `importMetaUrl` with the caller's own extension (.ts under tsx, .js compiled). */
export function moduleBeside(importMetaUrl: string, name: string): string {
  const ext = extname(fileURLToPath(importMetaUrl));
  return fileURLToPath(new URL(`./${name}${ext}`, importMetaUrl));
}

export class BudgetPool<T, R> {
  private readonly pool: Piscina;
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  private closed = false;
  /** Tasks ended for their budget since start, by reason (metrics). */
  readonly overBudget = { time: 0, memory: 0 };

  constructor(private readonly opts: BudgetPoolOptions) {
    this.pool = new Piscina({
      // Every task starts through budget-entry, which tells the CPU clock which thread runs it.
      filename: moduleBeside(import.meta.url, 'budget-entry'),
      workerData: { taskModule: opts.filename },
      minThreads: 0,
      maxThreads: opts.threads,
      concurrentTasksPerWorker: 1,
      idleTimeout: opts.idleMs ?? 30_000,
      execArgv: threadExecArgv(),
      // An 8 MB young generation: a thread that read a 15,000-item feed held 121 MB of the process's RSS
      // against 148 MB with V8's default (measured, compiled). A thread idle after a small feed: +22 MB.
      resourceLimits: { maxOldGenerationSizeMb: opts.memoryMb, maxYoungGenerationSizeMb: 8 },
    });
    // Without a listener, an 'error' event (a thread that could not start) would end the process.
    this.pool.on('error', (err: Error) => (opts.onError ?? (() => undefined))(err));
  }

  /** Tasks running and waiting now. */
  get load(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }

  async run(task: T): Promise<BudgetResult<R>> {
    if (this.closed) return { kind: 'busy' };
    if (this.running >= this.opts.threads) {
      if (this.waiting.length >= this.opts.maxWaiting) return { kind: 'busy' };
      // Our own queue, not piscina's: the budget must start when the task starts on a thread, and a task
      // queued inside piscina would be counting down while it waits.
      await new Promise<void>((resolve) => this.waiting.push(resolve));
      if (this.closed) return { kind: 'busy' };
    }
    this.running++;
    // A thread has to start for this task: its start-up is not the task's time.
    const cold = this.pool.threads.length < this.running;
    const ac = new AbortController();
    // [thread id, its CPU ms at the task's start], written by budget-entry on the thread.
    const clock = new Int32Array(new SharedArrayBuffer(8));
    const budget = this.opts.budgetMs;
    const wallCap = performance.now() + budget * WALL_FACTOR + (cold ? START_ALLOWANCE_MS : 0);
    // At the budget in wall time, then as often as the CPU left could run out: ended once it has.
    const check = (): void => {
      const now = threadCpuMs(Atomics.load(clock, 0));
      const used = now === null ? null : now - Atomics.load(clock, 1);
      if (used === null || used >= budget || performance.now() >= wallCap) ac.abort();
      else timer = setTimeout(check, Math.max(10, budget - used));
    };
    let timer = setTimeout(check, budget + (cold ? START_ALLOWANCE_MS : 0));
    try {
      return { kind: 'ok', value: (await this.pool.run({ task, clock }, { signal: ac.signal })) as R };
    } catch (err) {
      if (ac.signal.aborted) {
        this.overBudget.time++;
        return { kind: 'over_budget', reason: 'time' };
      }
      if ((err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY') {
        this.overBudget.memory++;
        return { kind: 'over_budget', reason: 'memory' };
      }
      throw err;
    } finally {
      clearTimeout(timer);
      this.running--;
      this.waiting.shift()?.();
    }
  }

  /** Ends every thread; tasks waiting are answered `busy`, a running one's caller gets its rejection. */
  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.waiting.splice(0)) w();
    await this.pool.destroy();
  }
}
