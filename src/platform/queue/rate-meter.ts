// Owns counting how many events (accepted pings) happened in the last second, cheaply enough to run on
// every ping: the queue workers yield to intake while it is busy (worker.ts, intakeBusy).

/** Events in the last second, in four buckets of 250 ms. */
export class RateMeter {
  private readonly buckets = [0, 0, 0, 0];
  private at = 0;

  private roll(): void {
    const slot = Math.floor(performance.now() / 250);
    const steps = Math.min(4, slot - this.at);
    for (let i = 1; i <= steps; i++) this.buckets[(this.at + i) % 4] = 0;
    this.at = slot;
  }

  count(): void {
    this.roll();
    this.buckets[this.at % 4]++;
  }

  perSecond(): number {
    this.roll();
    return this.buckets[0] + this.buckets[1] + this.buckets[2] + this.buckets[3];
  }
}
