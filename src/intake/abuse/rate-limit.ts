// Owns the per-client ping rate limit: a token bucket per client address, in this process's memory.
// Each instance counts on its own (N instances behind a balancer allow up to N × the rate); that is
// enough to stop one noisy address from flooding the queue, which is what it is for.
import { canonicalAddress, slash64Key } from '../../platform/net/ip.js';

/** At most this many addresses are tracked; beyond it the oldest entries are forgotten (bounded memory). */
export const MAX_TRACKED = 100_000;

interface Bucket {
  tokens: number;
  at: number;
}

export type RateDecision = { ok: true } | { ok: false; retryAfterSec: number };

/**
 * The key an address is counted under. IPv6 is counted per /64: one subscriber usually gets a whole /64,
 * and counting single addresses would let them rotate through 2^64 of them.
 */
export function clientKey(addr: string | null | undefined): string {
  // Text that is not an address shares one bucket: a key is never longer than an address.
  const a = canonicalAddress(addr);
  return a ? slash64Key(a) : 'unknown';
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;
  private readonly sweeper: NodeJS.Timeout;

  /** `perMinute` pings per minute per key, with bursts up to the same number. */
  constructor(
    readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {
    if (!(perMinute > 0)) throw new RangeError('perMinute must be positive');
    this.perMs = perMinute / 60_000;
    // Buckets that have refilled completely carry no information: drop them so memory follows activity.
    this.sweeper = setInterval(() => this.sweep(), 60_000).unref();
  }

  get tracked(): number {
    return this.buckets.size;
  }

  /** Takes one token for `key`; refuses with the seconds until the next token when the bucket is empty. */
  take(key: string): RateDecision {
    const now = this.now();
    let b = this.buckets.get(key);
    if (b === undefined) {
      if (this.buckets.size >= MAX_TRACKED) {
        const oldest = this.buckets.keys().next().value;
        if (oldest !== undefined) this.buckets.delete(oldest);
      }
      b = { tokens: this.perMinute, at: now };
      this.buckets.set(key, b);
    } else {
      b.tokens = Math.min(this.perMinute, b.tokens + (now - b.at) * this.perMs);
      b.at = now;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterSec: Math.max(1, Math.ceil((1 - b.tokens) / this.perMs / 1000)) };
  }

  sweep(): void {
    const now = this.now();
    for (const [k, b] of this.buckets) {
      if (b.tokens + (now - b.at) * this.perMs >= this.perMinute) this.buckets.delete(k);
    }
  }

  close(): void {
    clearInterval(this.sweeper);
  }
}
