// Owns the loop of one instance over an outbound queue (platform/outbox/outbox-repository.ts): rows are
// claimed in batches (several places' worth, kept in memory, so a place that frees is refilled at once
// instead of waiting for the next claim), the surface sends each one (WebSub's hub, rssCloud's notifier)
// with at most `concurrency` in flight, and the outcomes are written in batches: one transaction settles
// every outcome that came in while the last one was being written, with the surface's own records of them
// (a subscription's last status). A row stays leased until its batch commits, so no other claim takes it,
// and a crash before the commit leaves it to its lease (sent again: WebSub and rssCloud are at-least-once),
// never lost. Measured (bench/push.ts, 1,000 subscribers, embedded database): a claim per freed place and a
// transaction per outcome delivered 20–120 a second; batches, several hundred. A surface whose rows the
// generic settle does not fit (the relay's jobs stay as history, with a state column) gives no table and
// writes every outcome in its own record(); its claim is its own in any case.
import type { Db, Queryable } from '../db/database.js';
import { QueueWorker, type WorkerOptions } from '../queue/worker.js';
import { settle, type OutboxTable, type Settle } from './outbox-repository.js';

/** What running a claimed row came to. */
export interface Ran<R> {
  /**
   * How its row ends (the generic settle of the outbox's table); null when the surface settled it itself
   * (in a transaction of its own); omitted when its record says it (record() writes it, in the batch).
   */
  settle?: Settle | null;
  /** The surface's record of the outcome, written in the same transaction as the settle (record()). */
  record?: R;
  /**
   * The worker need not look for more work at once (the row was put back, or the surface holds enough);
   * a settle of kind 'defer' says so without it.
   */
  deferred?: boolean;
  /** Told once the batch has committed (metrics, logs). */
  after?(): void;
}

export interface OutboxOptions<T, R> extends Omit<WorkerOptions<T>, 'run' | 'refillAtOnce'> {
  db: Db;
  /** The queue the generic settle() writes; without it, record() writes every outcome. */
  table?: OutboxTable;
  /** The lease a claim takes (s): a row kept in memory past half of it is not started. */
  leaseSec: number;
  run(task: T): Promise<Ran<R>>;
  /** Writes the batch's records (one statement for all, preferably). */
  record?(tx: Queryable, records: R[]): Promise<void>;
  /**
   * Rows claimed at once, in places' worth (CLAIM_PLACES unless told); 0: only for the places free (a
   * claim that hands out turns, as the relay's does, must not have rows wait in memory past them).
   */
  claimPlaces?: number;
  /** How long an outcome waits for others before its batch is written (GATHER_MS unless told; read per batch). */
  gatherMs?: number;
  /** Most outcomes written in one transaction (MAX_BATCH unless told); this many are written without waiting. */
  maxBatch?: number;
}

/** Most outcomes written in one transaction. */
const MAX_BATCH = 500;
/**
 * How long an outcome waits for others before its batch is written (unless MAX_BATCH came first): a
 * transaction per outcome or two cost the embedded database more than the requests did. The rows stay
 * leased meanwhile; nobody waits for the write.
 */
const GATHER_MS = 20;
/** Rows claimed at once, in places' worth (each place runs the rest one after the other). */
const CLAIM_PLACES = 4;
const MAX_CLAIM = 256;

interface Pending<R> {
  settle?: Settle;
  record?: R;
  after?(): void;
}

export class Outbox<T, R = never> {
  readonly worker: QueueWorker<T>;
  private pending: Pending<R>[] = [];
  private writing: Promise<void> | null = null;
  /** Rows claimed and not started yet, with when they were claimed. */
  private ready: { task: T; at: number }[] = [];
  /** When the last claim from the database came back short (nothing more was due); 0 after a wake. */
  private drainedAt = 0;

  constructor(private readonly opts: OutboxOptions<T, R>) {
    this.worker = new QueueWorker<T>({
      ...opts,
      // A freed place takes the next row kept in memory at once; the database is asked again only when
      // they run out (and then at most every pollMs after a short claim, unless woken: wakes keep the
      // worker's gap, so work queued by every request cannot turn into a claim per request).
      refillAtOnce: true,
      claim: (limit) => this.take(limit),
      run: async (task) => {
        const ran = await opts.run(task);
        const deferred = ran.deferred ?? ran.settle?.kind === 'defer';
        if (ran.settle === null || (ran.settle === undefined && ran.record === undefined)) {
          ran.after?.();
          return deferred ? 'deferred' : 'done';
        }
        if (ran.settle && !opts.table) throw new Error('an outbox without a table cannot settle a row');
        this.pending.push({ settle: ran.settle, record: ran.record, after: ran.after });
        this.writing ??= this.write();
        return deferred ? 'deferred' : 'done';
      },
    });
  }

  start(): void {
    this.worker.start();
  }

  wake(): void {
    this.drainedAt = 0;
    this.worker.wake();
  }

  /**
   * Up to `limit` rows: from those kept, refilled by one claim of several places' worth when they run
   * short. A row kept longer than half its lease is left to the lease (claimed again later), so a row is
   * never sent once its lease may have run out.
   */
  private async take(limit: number): Promise<T[]> {
    const now = performance.now();
    this.ready = this.ready.filter((r) => now - r.at < (this.opts.leaseSec * 1000) / 2);
    if (this.ready.length < limit && (this.drainedAt === 0 || now - this.drainedAt >= this.opts.pollMs)) {
      // Never fewer than the free places ask for (the relay's hand may pass MAX_CLAIM).
      const ahead = Math.min(MAX_CLAIM, this.opts.concurrency * (this.opts.claimPlaces ?? CLAIM_PLACES));
      const want = Math.max(limit, ahead) - this.ready.length;
      const got = await this.opts.claim(want);
      const at = performance.now();
      for (const task of got) this.ready.push({ task, at });
      this.drainedAt = got.length < want ? at : 0;
    }
    return this.ready.splice(0, limit).map((r) => r.task);
  }

  get active(): number {
    return this.worker.active;
  }

  /** Writes what came in, batch after batch, until nothing waits. */
  private async write(): Promise<void> {
    try {
      while (this.pending.length > 0) {
        const max = this.opts.maxBatch ?? MAX_BATCH;
        if (this.pending.length < max) await new Promise((r) => setTimeout(r, this.opts.gatherMs ?? GATHER_MS));
        const batch = this.pending.splice(0, max);
        try {
          const records = batch.flatMap((p) => (p.record === undefined ? [] : [p.record]));
          const settles = batch.flatMap((p) => (p.settle === undefined ? [] : [p.settle]));
          const table = this.opts.table;
          await this.opts.db.transaction(async (tx) => {
            if (records.length > 0) await this.opts.record?.(tx, records);
            if (table && settles.length > 0) await settle(tx, table, settles);
          });
        } catch (err) {
          // Their rows stay leased and are claimed again when the lease runs out: sent again, not lost.
          this.opts.onError(err as Error);
          continue;
        }
        for (const p of batch) p.after?.();
        // A row settled to run again (a feed topic's next change, a request folded in meanwhile) is due now.
        if (batch.some((p) => p.settle && p.settle.kind !== 'defer' && p.settle.kind !== 'drop')) this.wake();
      }
    } finally {
      this.writing = null;
    }
  }

  /** Stops claiming, waits for the rows in hand (or `timeoutMs`), then writes their outcomes. */
  async close(timeoutMs: number): Promise<void> {
    await this.worker.close(timeoutMs);
    while (this.writing) await this.writing;
  }
}
