// Owns the per-host manners of every request pingd makes of its own accord (the aggregator-behaviour guide):
// at most 2 requests in flight per host in this instance, the database's per-host slot across instances
// (host-repository.ts), requests spaced by FETCH_HOST_INTERVAL_MS as they leave, and a 429/503 with
// Retry-After blocking the host. One per instance (`app.polite`, the fetch plugin's), shared by
// verification, the WebSub hub and rssCloud, so a host sees one budget from pingd.
import type { Db } from '../db/database.js';
import { FetchError, type FetchResult } from './safe-fetch.js';
import { HostGate } from '../host-gate.js';
import { blockHost, takeHostSlot } from './host-repository.js';
import { retryAfter } from '../retry.js';

export type Polite =
  | { kind: 'ok'; res: FetchResult }
  /** The host may not be asked before `from` (ms); `blockedUntil` when it told us so (Retry-After). */
  | { kind: 'busy'; from: number; blockedUntil?: Date }
  | { kind: 'failed'; error: FetchError };

export class PoliteClient {
  readonly gate = new HostGate(2);
  /** Hosts whose fetch_hosts row exists (seen by this instance). */
  private readonly knownHosts = new Set<string>();

  constructor(
    private readonly db: Db,
    /** FETCH_HOST_INTERVAL_MS: the least gap between two requests to one host. */
    readonly gapMs: number,
  ) {}

  /** Sends one request to `host` when it is our turn; a FetchError comes back as `failed`. */
  async send(host: string, request: () => Promise<FetchResult>): Promise<Polite> {
    const release = this.gate.tryEnter(host);
    if (!release) return { kind: 'busy', from: Date.now() + Math.max(this.gapMs, 250) };
    try {
      const slot = await takeHostSlot(this.db, host, this.gapMs, this.knownHosts.has(host));
      if (this.knownHosts.size > 100_000) this.knownHosts.clear();
      this.knownHosts.add(host);
      if (!slot.ok) return { kind: 'busy', from: slot.retryAt.getTime(), ...(slot.blocked ? { blockedUntil: slot.retryAt } : {}) };
      await this.gate.spaced(host, this.gapMs);
      let res: FetchResult;
      try {
        res = await request();
      } catch (err) {
        if (!(err instanceof FetchError)) throw err;
        return { kind: 'failed', error: err };
      }
      if (res.status === 429 || res.status === 503) {
        const until = retryAfter(res.headers['retry-after'], new Date());
        if (until) await blockHost(this.db, politeHost(res.url) ?? host, until);
      }
      return { kind: 'ok', res };
    } finally {
      release();
    }
  }

  /**
   * When a request that found `host` busy until `from` should come back: its own turn, one gap after the
   * last turn handed out, so a burst on one host comes due one at a time instead of all at its next slot.
   */
  turn(host: string, from: number): number {
    return this.gate.nextTurn(host, from, this.gapMs);
  }

  /** When this instance may next start a request to `host` (0 when it has not asked it lately). */
  freeAt(host: string): number {
    return this.gate.freeAt(host, this.gapMs);
  }
}

/**
 * The host a request's manners are counted under: the URL's host with its port, lower case (one budget per
 * host and port); undefined when the URL does not parse.
 */
export function politeHost(url: string): string | undefined {
  try {
    return new URL(url).host.toLowerCase();
  } catch {
    return undefined;
  }
}
