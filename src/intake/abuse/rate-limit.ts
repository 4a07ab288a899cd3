// Owns intake's token buckets, in this process's memory: the per-client ping rate limit (a bucket per client
// address) and the per-host budget (a bucket per weblog host). Each instance counts on its own (N instances
// behind a balancer allow up to N × the rate); that is enough to stop one noisy address or one site's
// spellings from flooding the queue and the published lists, which is what they are for.
import { LRUCache } from 'lru-cache';
import { canonicalAddress, isCanonicalIPv4, slash64Key } from '../../platform/net/ip.js';

/** At most this many keys are tracked; beyond it the least recently spent are forgotten (bounded memory). */
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
  // The usual case, an address PingService.admit already made canonical IPv4: its own key, no parsing.
  if (addr && isCanonicalIPv4(addr)) return addr;
  // Text that is not an address shares one bucket: a key is never longer than an address.
  const a = canonicalAddress(addr);
  return a ? slash64Key(a) : 'unknown';
}

/**
 * The key a weblog URL spends the per-host budget under: its host name as normalisation left it (lower
 * case, punycode, no root dot, no port). Each subdomain is its own host: blog hosts give every blog one.
 */
export function weblogHost(url: string): string {
  // A scheme is case-insensitive (RFC 3986): a URL refused before validation still names its host.
  const m = /^[a-z][a-z0-9+.-]*:\/\/(\[[^\]]*\]|[^/:?#]*)/i.exec(url);
  return m ? m[1] : url;
}

export class RateLimiter {
  /**
   * lru-cache rather than a Map evicting its first key: a Map's deleted entries stay in its table until it
   * is rehashed, and keys().next() walks past them, so at 100,000 keys a new key cost ~22 µs (lru-cache:
   * 1.6 µs; Node 24, this machine, 300,000 new keys), and every ping of a weblog on a new host paid it.
   */
  private readonly buckets = new LRUCache<string, Bucket>({ max: MAX_TRACKED });
  private readonly perMs: number;
  private readonly sweeper: NodeJS.Timeout;

  /** `capacity` tokens per key, refilled over `windowMs` (a minute unless said otherwise): bursts up to `capacity`. */
  constructor(
    readonly capacity: number,
    private readonly now: () => number = Date.now,
    readonly windowMs = 60_000,
  ) {
    if (!(capacity > 0)) throw new RangeError('capacity must be positive');
    if (!(windowMs > 0)) throw new RangeError('windowMs must be positive');
    this.perMs = capacity / windowMs;
    // Buckets that have refilled completely carry no information: drop them so memory follows activity.
    this.sweeper = setInterval(() => this.sweep(), Math.min(windowMs, 60_000)).unref();
  }

  get tracked(): number {
    return this.buckets.size;
  }

  /** Takes one token for `key`; refuses with the seconds until the next token when the bucket is empty. */
  take(key: string): RateDecision {
    const d = this.check(key);
    if (d.ok) this.spend(key);
    return d;
  }

  /** Whether `key` has a token now, without taking it (for a budget spent only on success). */
  check(key: string): RateDecision {
    const b = this.buckets.peek(key);
    if (b === undefined) return { ok: true };
    const tokens = Math.min(this.capacity, b.tokens + (this.now() - b.at) * this.perMs);
    if (tokens >= 1) return { ok: true };
    return { ok: false, retryAfterSec: Math.max(1, Math.ceil((1 - tokens) / this.perMs / 1000)) };
  }

  /** Takes one token for `key`, even when that leaves the bucket below zero (what happened happened). */
  spend(key: string): void {
    const now = this.now();
    let b = this.buckets.get(key);
    if (b === undefined) {
      b = { tokens: this.capacity, at: now };
      this.buckets.set(key, b);
    } else {
      b.tokens = Math.min(this.capacity, b.tokens + (now - b.at) * this.perMs);
      b.at = now;
    }
    b.tokens -= 1;
  }

  sweep(): void {
    const now = this.now();
    const full: string[] = [];
    for (const [k, b] of this.buckets.entries()) if (b.tokens + (now - b.at) * this.perMs >= this.capacity) full.push(k);
    for (const k of full) this.buckets.delete(k);
  }

  close(): void {
    clearInterval(this.sweeper);
  }
}
