// Owns the send pace of one instance's replays: the bytes all connections replaying now are sent per second
// together (STREAM_REPLAY_BYTES_PER_SECOND), shared equally among them, each charged after a window by what
// it was sent. The reads have their own budget (replay-gate.ts); windows another connection read cost no
// read, so without this a crowd replaying the same stretch is bounded only by its clients. No I/O: the hub
// reports bytes sent and waits as told; time comes from a clock it is given.

export interface ReplayPaceOptions {
  /** Bytes per second for all replays together; 0: unpaced. */
  bytesPerSecond: number;
  /** Milliseconds on a monotonic clock (performance.now). */
  now?: () => number;
}

export class ReplayPace {
  /** Per replaying connection: when it may be sent its next window. */
  private readonly nextAt = new Map<object, number>();
  private readonly now: () => number;

  constructor(private readonly opts: ReplayPaceOptions) {
    this.now = opts.now ?? (() => performance.now());
  }

  /** Connections replaying now: the budget's share of each is 1 / replaying. */
  get replaying(): number {
    return this.nextAt.size;
  }

  /** A connection starts replaying (more than one window behind). */
  join(owner: object): void {
    if (!this.nextAt.has(owner)) this.nextAt.set(owner, -Infinity);
  }

  /** It reached the live seam or closed. */
  leave(owner: object): void {
    this.nextAt.delete(owner);
  }

  /**
   * The owner was sent `bytes`: milliseconds it waits before its next window (0: go on). Charged at its share
   * now, from when it was last due or now, whichever is later: a connection that was slow to read (its client,
   * the database) gains no credit for a burst later. A lone replay on PostgreSQL is sent ~50 MB/s (1M-ping
   * bench): at the default it never waits.
   */
  sent(owner: object, bytes: number): number {
    const due = this.nextAt.get(owner);
    if (due === undefined || this.opts.bytesPerSecond <= 0) return 0;
    const now = this.now();
    const next = Math.max(due, now) + (bytes * 1000 * this.nextAt.size) / this.opts.bytesPerSecond;
    this.nextAt.set(owner, next);
    return Math.max(0, next - now);
  }
}
