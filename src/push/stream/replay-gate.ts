// Owns the replay budget of one instance's live stream: how many replay reads run at once, whose read is
// next (first come, first served, one read per turn, so a long replay never holds back a short one), and
// the pace of all of them together (database work per second, charged after each read by what it cost).
// No I/O: the hub asks for turns and reports costs; time comes from a clock it is given.

export interface ReplayGateOptions {
  /** Reads at once (STREAM_REPLAY_CONCURRENCY). */
  concurrency: number;
  /** Cost units (rows) all replays together may read per second (STREAM_REPLAY_ROWS_PER_SECOND). */
  rowsPerSecond: number;
  /** Milliseconds on a monotonic clock (performance.now). */
  now?: () => number;
}

/** A granted read: call it once the read has returned, with what it cost (replayCost). */
export type Turn = (cost: number) => void;

/**
 * What a read of `positions` positions returning `rows` rows costs. Measured on the embedded database with
 * 100,000 stored pings: a read of 500 positions returning all 500 rows took 6.0 ms, returning none (a host
 * filter that matches nothing) 0.9 ms. So a position the query passed over costs about a sixth of a row;
 * a replay whose filter matches nothing moves on about six times faster for the same budget.
 */
export const replayCost = (rows: number, positions: number): number => rows + positions / 6;

interface Waiter {
  owner: object;
  grant(turn: Turn | null): void;
}

export class ReplayGate {
  private active = 0;
  private readonly queue: Waiter[] = [];
  /** When the next read may start: each read moves it on by its cost at the pace. */
  private nextAt = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly now: () => number;

  constructor(private readonly opts: ReplayGateOptions) {
    this.now = opts.now ?? (() => performance.now());
  }

  /** Replays waiting for their next read. */
  get waiting(): number {
    return this.queue.length;
  }

  /** Reads running now. */
  get reading(): number {
    return this.active;
  }

  /**
   * Waits for a read's turn: a free place among `concurrency` and the pace's next start. Resolves with the
   * turn, or null when the owner was cancelled or the gate closed meanwhile.
   */
  turn(owner: object): Promise<Turn | null> {
    if (this.closed) return Promise.resolve(null);
    return new Promise((resolve) => {
      this.queue.push({ owner, grant: resolve });
      this.pump();
    });
  }

  /** A read made without a turn (a connection at most one read behind): it counts against the pace. */
  charge(cost: number, startedAt = this.now()): void {
    this.nextAt = Math.max(this.nextAt, startedAt) + (cost * 1000) / this.opts.rowsPerSecond;
  }

  /** Gives up the owner's places in the queue (its connection closed; a replay may wait for two reads). */
  cancel(owner: object): void {
    for (let i = this.queue.findIndex((w) => w.owner === owner); i >= 0; i = this.queue.findIndex((w) => w.owner === owner))
      this.queue.splice(i, 1)[0].grant(null);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const w of this.queue.splice(0)) w.grant(null);
  }

  private pump(): void {
    while (!this.closed && this.timer === undefined && this.active < this.opts.concurrency && this.queue.length > 0) {
      const wait = this.nextAt - this.now();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.pump();
        }, wait);
        this.timer.unref();
        return;
      }
      const w = this.queue.shift()!;
      this.active++;
      let done = false;
      const grantedAt = this.now();
      w.grant((cost) => {
        if (done) return;
        done = true;
        this.active--;
        // Counted from the read's start, not its end: charged from its end, the time a read took was added
        // to its cost, and a lone replay at a 100,000-row pace read 45,000 rows a second (1M-ping replay
        // bench on PostgreSQL, quiet machine), though nothing else read.
        this.charge(cost, grantedAt);
        this.pump();
      });
    }
  }
}
