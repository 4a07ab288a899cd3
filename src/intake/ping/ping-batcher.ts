// Owns group commit: concurrent pings are queued and written by one multi-row statement per batch, and
// each caller's promise settles only after its batch has committed (or failed). Batches size themselves
// by load: whatever queued up while the previous batch was committing goes in the next one.
import type { Db, Queryable } from '../../platform/db/database.js';
import { PingdError } from '../../platform/errors.js';
import { Listeners, type ListenerLog } from '../../platform/listeners.js';
import { insertPingBatch, type InsertOutcome, type IntakeSpam } from './ping-repository.js';
import type { ValidPing } from './validate.js';

/**
 * See schedule(): while a batch commits, the next one starts early when this many pings wait, when no ping
 * has arrived for QUIET_MS (every client that will ping soon has), or when the committing batch has taken
 * STALL_MS.
 */
const PARALLEL_BATCH_MIN = 64;
const QUIET_MS = 1;
const STALL_MS = 10;

export class StorageUnavailableError extends PingdError<'STORAGE_UNAVAILABLE'> {
  constructor(message: string, options?: { cause?: unknown }) {
    super('STORAGE_UNAVAILABLE', message, options);
  }
}

/**
 * More to write in an accepted ping's own transaction (RSS Ping's payload): both commit or neither does.
 * A ping with one is committed in a batch of its own, so a failing extra write refuses no other ping.
 */
export type ExtraWrite = (tx: Queryable, accepted: { id: number; receivedAt: Date }) => Promise<void>;

export interface BatchStats {
  size: number;
  ms: number;
  ok: boolean;
}

export interface BatcherOptions {
  minIntervalSec: number;
  maxBatch: number;
  /** Batches committing at once (1 on the embedded database, which has a single session). */
  maxInFlight: number;
  /** A ping that waited this long in the queue is refused rather than left hanging. */
  timeoutMs: number;
  /** Queue length at which new pings are refused at once (back-pressure). */
  maxQueue: number;
  /** Pings that must be waiting before a batch starts while another is still committing (default 64). */
  parallelBatchMin?: number;
  /** Queue a verification job with every accepted ping, in the same statement (VERIFY_PINGS is not off). */
  queueVerification?: boolean;
  /** Score a new weblog's URL and write it with its first ping (SPAM_FILTER is not off). */
  spam?: IntakeSpam | null;
  onError?: (err: Error) => void;
  /** Takes what a batch listener throws (the batch's pings are answered all the same). */
  log: ListenerLog;
}

interface Pending {
  ping: ValidPing;
  extra?: ExtraWrite;
  enqueuedAt: number;
  resolve: (o: InsertOutcome) => void;
  reject: (e: Error) => void;
}

export class PingBatcher {
  private queue: Pending[] = [];
  private inFlight = 0;
  /** The batches committing now (to refuse their callers at the deadline, see expire). */
  private readonly flying = new Set<Pending[]>();
  private scheduled = false;
  private lastFlushAt = 0;
  private lastSubmitAt = 0;
  private stallTimer: NodeJS.Timeout | undefined;
  private closing = false;
  private idleWaiters: (() => void)[] = [];
  private readonly sweeper: NodeJS.Timeout;
  private readonly batchListeners: Listeners<[stats: BatchStats]>;

  constructor(
    private readonly db: Db,
    private readonly opts: BatcherOptions,
  ) {
    this.sweeper = setInterval(() => this.expire(), Math.min(250, opts.timeoutMs)).unref();
    this.batchListeners = new Listeners('ping batch', opts.log);
  }

  /** Registers a listener told of every committed or failed batch (metrics). */
  onBatch(l: (s: BatchStats) => void): void {
    this.batchListeners.add(l);
  }

  get pending(): number {
    return this.queue.length + this.inFlight;
  }

  submit(ping: ValidPing, extra?: ExtraWrite): Promise<InsertOutcome> {
    if (this.closing) return Promise.reject(new StorageUnavailableError('The server is shutting down; please ping again in a moment.'));
    if (this.queue.length >= this.opts.maxQueue) {
      return Promise.reject(new StorageUnavailableError('The server is overloaded; please ping again in a minute.'));
    }
    this.lastSubmitAt = performance.now();
    return new Promise((resolve, reject) => {
      this.queue.push({ ping, extra, enqueuedAt: Date.now(), resolve, reject });
      this.schedule();
    });
  }

  /** Stops taking pings and resolves once every queued ping has been committed or refused. */
  async drain(): Promise<void> {
    this.closing = true;
    clearInterval(this.sweeper);
    clearTimeout(this.stallTimer);
    this.stallTimer = undefined;
    if (this.queue.length === 0 && this.inFlight === 0) return;
    await new Promise<void>((r) => this.idleWaiters.push(r));
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.opts.maxInFlight || this.queue.length === 0) return;
    const now = performance.now();
    if (
      this.inFlight > 0 &&
      this.queue.length < (this.opts.parallelBatchMin ?? PARALLEL_BATCH_MIN) &&
      now - this.lastSubmitAt < QUIET_MS &&
      now - this.lastFlushAt < STALL_MS
    ) {
      // Sized by load: while a batch commits and pings keep arriving, they wait for one next batch instead
      // of going out in many small ones: each batch has a fixed cost (a round trip and a commit; a profile
      // measured ~0.3 ms of pingd CPU and more of PostgreSQL's per batch on a 2-core machine). Once arrivals
      // pause, the waiting pings go at once: when commits rather than CPU are the limit (a slow disk, a
      // shared WAL), clients would otherwise idle for the whole commit. And a batch stuck on a lock never
      // holds up the rest for more than STALL_MS.
      this.stallTimer ??= setTimeout(() => {
        this.stallTimer = undefined;
        this.schedule();
      }, QUIET_MS).unref();
      return;
    }
    this.scheduled = true;
    // setImmediate lets every request already read in this turn of the event loop join the batch.
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    if (this.inFlight >= this.opts.maxInFlight || this.queue.length === 0) return;
    // One row per URL per statement; a second ping for the same URL waits for the next batch, where the
    // throttle sees the first one.
    // A ping with an extra write goes alone, in its own transaction; the others skip it.
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    const urls = new Set<string>();
    const alone = this.queue[0].extra !== undefined;
    for (const p of this.queue) {
      if (alone ? batch.length === 0 : batch.length < this.opts.maxBatch && !p.extra && !urls.has(p.ping.url)) {
        urls.add(p.ping.url);
        batch.push(p);
      } else rest.push(p);
    }
    this.queue = rest;
    this.inFlight++;
    this.lastFlushAt = performance.now();
    this.flying.add(batch);
    const started = performance.now();
    this.commit(batch).then(
      (outcomes) => {
        this.flying.delete(batch);
        this.report({ size: batch.length, ms: performance.now() - started, ok: true });
        for (let i = 0; i < batch.length; i++) batch[i].resolve(outcomes[i]);
        this.done();
      },
      (err: Error) => {
        this.flying.delete(batch);
        this.report({ size: batch.length, ms: performance.now() - started, ok: false });
        this.opts.onError?.(err);
        const refusal = new StorageUnavailableError('The ping could not be stored (database unavailable); please ping again later.', {
          cause: err,
        });
        for (const p of batch) p.reject(refusal);
        this.done();
      },
    );
    // Another batch may start at once when more connections are allowed.
    this.schedule();
  }

  private commit(batch: Pending[]): Promise<InsertOutcome[]> {
    const pings = batch.map((p) => p.ping);
    const extra = batch[0].extra;
    const verify = this.opts.queueVerification ?? false;
    const spam = this.opts.spam ?? null;
    if (!extra) return insertPingBatch(this.db, pings, this.opts.minIntervalSec, verify, spam);
    return this.db.transaction(async (tx) => {
      const outcomes = await insertPingBatch(tx, pings, this.opts.minIntervalSec, verify, spam);
      const o = outcomes[0];
      if (o.status === 'accepted') await extra(tx, o);
      return outcomes;
    });
  }

  private report(s: BatchStats): void {
    this.batchListeners.emit(s);
  }

  private done(): void {
    this.inFlight--;
    if (this.queue.length > 0) this.schedule();
    else if (this.inFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
  }

  private expire(): void {
    const limit = Date.now() - this.opts.timeoutMs;
    // A committing batch can outlast the timeout too: the embedded database has no statement timeout and
    // waits for its one session (a long render or retention run holds it). Its callers are answered
    // "refused" at the deadline instead of hanging; if the batch commits later, nothing was acknowledged,
    // so nothing is lost (a settled promise ignores the late resolve).
    for (const b of this.flying) {
      if (b[0].enqueuedAt > limit) continue;
      for (const p of b)
        if (p.enqueuedAt <= limit) p.reject(new StorageUnavailableError('The database did not answer in time; please ping again later.'));
    }
    if (this.queue.length === 0 || this.queue[0].enqueuedAt > limit) return;
    const keep: Pending[] = [];
    for (const p of this.queue) {
      if (p.enqueuedAt <= limit) p.reject(new StorageUnavailableError('The database did not answer in time; please ping again later.'));
      else keep.push(p);
    }
    this.queue = keep;
  }
}
