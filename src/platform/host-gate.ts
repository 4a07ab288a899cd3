// Owns the per-host bound on requests in flight inside one instance (at most N at once to one host), and
// their spacing as they leave: a burst of pings for hundreds of weblogs on one blog host never becomes
// hundreds of simultaneous requests. Verification's manners, the relay and the WebSub hub each keep one; the
// minimum gap between requests to a host across instances is the database's (fetch_hosts, fetch/host-repository.ts).

export class HostGate {
  private readonly inFlight = new Map<string, number>();
  private readonly lastStart = new Map<string, number>();
  private readonly reserved = new Map<string, number>();

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

  /** The hosts with no free place (a claim passes their work over). */
  busy(): string[] {
    const out: string[] = [];
    for (const [h, n] of this.inFlight) if (n >= this.perHost) out.push(h);
    return out;
  }

  /**
   * Waits until `gapMs` after the previous request this instance started to `host` (reserved at once, so
   * concurrent callers line up one gap apart), then counts this one as started. The database's slots space requests across instances; this spaces them at the moment they
   * leave, which the slot cannot (a busy event loop may hold one request back until the next is due).
   */
  async spaced(host: string, gapMs: number, signal?: AbortSignal): Promise<void> {
    if (gapMs <= 0) return;
    const now = Date.now();
    const start = Math.max(now, (this.lastStart.get(host) ?? 0) + gapMs);
    this.lastStart.set(host, start);
    if (this.lastStart.size > 10_000) this.forget(now - gapMs);
    if (start <= now || signal?.aborted) return;
    // An abort (a closing instance) ends the wait early; the caller looks at its own state then.
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, start - now);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /**
   * When a job that found `host` busy should come back: its own turn, `gapMs` after the last turn handed
   * out for that host and not before `earliest`. Jobs of a burst on one host are spread one gap apart
   * instead of all coming due at the host's next slot, where all but one would be put back again (a
   * queue of thousands re-read every second).
   */
  nextTurn(host: string, earliest: number, gapMs: number): number {
    const turn = Math.max(earliest, (this.reserved.get(host) ?? 0) + Math.max(gapMs, 1));
    this.reserved.set(host, turn);
    if (this.reserved.size > 10_000) for (const [h, at] of this.reserved) if (at < Date.now()) this.reserved.delete(h);
    return turn;
  }

  /** When this instance may next start a request to `host` (its last start plus the gap; 0 when none). */
  freeAt(host: string, gapMs: number): number {
    const last = this.lastStart.get(host);
    return last === undefined ? 0 : last + gapMs;
  }

  private forget(before: number): void {
    for (const [h, at] of this.lastStart) if (at < before) this.lastStart.delete(h);
  }
}
