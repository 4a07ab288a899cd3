// Owns this instance's count of the hub's subscriptions against WEBSUB_MAX_SUBSCRIPTIONS: the database's
// count, read at most once every TALLY_TTL_MS (and only when a subscribe asks), plus the new subscribes this
// instance admitted since. A subscriber refused at the cap costs an index lookup, not a count over every
// subscription (it did: 15 ms for each 503 at 10,000 subscriptions). Other instances' new subscriptions are
// seen at the next read, so instances racing at the cap may pass it by what they admit within one TTL.

/** How stale the count may be (one read per instance per second at most, whatever the request rate). */
export const TALLY_TTL_MS = 1000;

export class SubscriptionTally {
  private count = 0;
  private readAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | null = null;

  constructor(
    /** The database's count (subscription-repository.ts, countForCap). */
    private readonly read: () => Promise<number>,
    private readonly max: number,
    private readonly ttlMs = TALLY_TTL_MS,
  ) {}

  /** Whether the hub has no room for a new subscription. */
  async full(): Promise<boolean> {
    if (performance.now() - this.readAt >= this.ttlMs) await this.refresh();
    return this.count >= this.max;
  }

  /** A new subscription (pending) was admitted here. */
  added(): void {
    this.count++;
  }

  private refresh(): Promise<void> {
    // One read at a time: a burst of subscribes waits for the same count.
    this.reading ??= this.read()
      .then((n) => {
        this.count = n;
        this.readAt = performance.now();
      })
      .finally(() => {
        this.reading = null;
      });
    return this.reading;
  }
}
