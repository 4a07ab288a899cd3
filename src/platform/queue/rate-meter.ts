// Owns counting how many events happened in the last second (accepted pings: the queue workers yield to
// intake while it is busy, worker.ts, intakeBusy) or another window (WebSub deliveries per minute, for
// /status), cheaply enough to run on every event.

/** Events in the last window (a second unless told), in four buckets of a quarter of it. */
export class RateMeter {
  private readonly buckets = [0, 0, 0, 0];
  private at = 0;

  constructor(private readonly windowMs = 1000) {}

  private roll(): void {
    const slot = Math.floor(performance.now() / (this.windowMs / 4));
    const steps = Math.min(4, slot - this.at);
    for (let i = 1; i <= steps; i++) this.buckets[(this.at + i) % 4] = 0;
    this.at = slot;
  }

  count(): void {
    this.roll();
    this.buckets[this.at % 4]++;
  }

  /** Events in the last window (for the default window of a second: per second). */
  perSecond(): number {
    return this.inWindow();
  }

  inWindow(): number {
    this.roll();
    return this.buckets[0] + this.buckets[1] + this.buckets[2] + this.buckets[3];
  }
}
