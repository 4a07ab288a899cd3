// Owns the hub's bound on requests in flight to one callback host in this instance (WEBSUB_HOST_CONCURRENCY):
// a host whose callbacks hang, drip or flood holds at most that many of the worker's WEBSUB_CONCURRENCY
// places, and the worker claims none of its other tasks meanwhile (busy()), so they wait in the queue while
// the other hosts are served.

export class HostSlots {
  private readonly inFlight = new Map<string, number>();

  constructor(private readonly perHost: number) {}

  /** A release function if `host` has a free place now, else undefined. */
  tryEnter(host: string): (() => void) | undefined {
    const n = this.inFlight.get(host) ?? 0;
    if (n >= this.perHost) return undefined;
    this.inFlight.set(host, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.inFlight.get(host) ?? 1) - 1;
      if (left <= 0) this.inFlight.delete(host);
      else this.inFlight.set(host, left);
    };
  }

  /** The hosts with no free place (a claim passes their tasks over). */
  busy(): string[] {
    const out: string[] = [];
    for (const [h, n] of this.inFlight) if (n >= this.perHost) out.push(h);
    return out;
  }
}
