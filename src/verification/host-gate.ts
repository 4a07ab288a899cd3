// Owns the per-host bound on requests in flight inside one instance (at most N at once to one host): a
// burst of pings for hundreds of weblogs on one blog host never becomes hundreds of simultaneous requests.
// The minimum gap between requests to a host, across instances, is the database's (fetch_hosts).

export class HostGate {
  private readonly inFlight = new Map<string, number>();

  constructor(private readonly perHost: number) {}

  /** A release function if `host` has a free place now, else undefined (the caller comes back later). */
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

  /** Requests in flight to `host` now (tests, metrics). */
  count(host: string): number {
    return this.inFlight.get(host) ?? 0;
  }
}
