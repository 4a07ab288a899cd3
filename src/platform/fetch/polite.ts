// Owns the per-host manners of every request pingd makes of its own accord (the aggregator-behaviour guide):
// at most 2 requests in flight per host in this instance, the database's per-host slot across instances
// (host-repository.ts), requests spaced by FETCH_HOST_INTERVAL_MS as they leave, and a 429/503 with
// Retry-After blocking the host. One per instance (`app.polite`, the fetch plugin's), shared by
// verification, the WebSub hub and rssCloud, so a host sees one budget from pingd. A push (a WebSub
// delivery, an rssCloud notification: a request the receiver asked for by subscribing) keeps the bound on
// requests in flight and the Retry-After block but not the gap: the gap is a crawler's courtesy to a
// publisher, and spacing pushes a second apart made every subscriber of two changes wait a second.
import type { Db } from '../db/database.js';
import { FetchError, type FetchResult } from './safe-fetch.js';
import { HostGate } from '../host-gate.js';
import { blockHost, hostBlocks, takeHostSlot, type HostSlot } from './host-repository.js';
import { retryAfter } from '../retry.js';

export type Polite =
  | { kind: 'ok'; res: FetchResult }
  /** The host may not be asked before `from` (ms); `blockedUntil` when it told us so (Retry-After). */
  | { kind: 'busy'; from: number; blockedUntil?: Date }
  | { kind: 'failed'; error: FetchError };

/** What a request sent to other hosts is: a fetch (spaced by the gap) or a push (not). */
export type Manner = 'fetch' | 'push';

interface Reserved {
  slot: HostSlot;
  until: number;
}

/** How long a host's block status read ahead by reserve() may wait for its push. */
const RESERVED_MS = 5000;

/** Our own bound on requests in flight was reached (FETCH_BUSY): when to try again. */
const BUSY_WAIT_MS = 1000;

/** A request of a push (a WebSub callback, an rssCloud endpoint): its answer, or when to come back, or why not. */
export type Attempt = { kind: 'ok'; res: FetchResult } | { kind: 'busy'; at: number } | { kind: 'failed'; error: FetchError };

export class PoliteClient {
  readonly gate = new HostGate(2);
  /** Hosts whose fetch_hosts row exists (seen by this instance). */
  private readonly knownHosts = new Set<string>();
  /** Block statuses read ahead for a batch of pushes (reserve()), each used by the next push to its host. */
  private readonly reserved = new Map<string, Reserved>();

  constructor(
    private readonly db: Db,
    /** FETCH_HOST_INTERVAL_MS: the least gap between two requests to one host. */
    readonly gapMs: number,
  ) {}

  /** Sends one request to `host` when it is our turn; a FetchError comes back as `failed`. */
  async send(host: string, request: () => Promise<FetchResult>, manner: Manner = 'fetch'): Promise<Polite> {
    const gapMs = manner === 'push' ? 0 : this.gapMs;
    const release = this.gate.tryEnter(host);
    if (!release) return { kind: 'busy', from: Date.now() + Math.max(gapMs, 250) };
    try {
      const slot =
        manner === 'push'
          ? (this.takeReserved(host) ?? (await hostBlocks(this.db, [host])).get(host) ?? { ok: true })
          : await takeHostSlot(this.db, host, gapMs, this.knownHosts.has(host));
      if (this.knownHosts.size > 100_000) this.knownHosts.clear();
      if (manner === 'fetch') this.knownHosts.add(host);
      if (!slot.ok) return { kind: 'busy', from: slot.retryAt.getTime(), ...(slot.blocked ? { blockedUntil: slot.retryAt } : {}) };
      await this.gate.spaced(host, gapMs);
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
   * The one "send politely or defer" step of every push: one request to the URL's host when it is our turn.
   * Busy comes back with the moment to try again (the host's own turn, or a second when our own bound on
   * requests in flight was reached: that says nothing about the host).
   */
  async attempt(url: string, request: () => Promise<FetchResult>, manner: Manner = 'fetch'): Promise<Attempt> {
    const host = new URL(url).host.toLowerCase();
    const got = await this.send(host, request, manner);
    if (got.kind === 'busy') return { kind: 'busy', at: this.gate.nextTurn(host, got.from, manner === 'push' ? 0 : this.gapMs) };
    if (got.kind === 'failed' && got.error.code === 'FETCH_BUSY') return { kind: 'busy', at: Date.now() + BUSY_WAIT_MS };
    return got;
  }

  /**
   * Reads whether a batch of pushes' hosts are blocked (Retry-After) in one statement, not one each before
   * its request: the next push to each host uses the answer. A push keeps no gap, so nothing is taken.
   */
  async reserve(hosts: Iterable<string>): Promise<void> {
    const now = Date.now();
    for (const [h, r] of this.reserved) if (r.until < now) this.reserved.delete(h);
    const want = [...new Set(hosts)].filter((h) => h !== '' && !this.reserved.has(h));
    if (want.length === 0) return;
    const blocks = await hostBlocks(this.db, want);
    for (const host of want) this.reserved.set(host, { slot: blocks.get(host) ?? { ok: true }, until: now + RESERVED_MS });
  }

  private takeReserved(host: string): HostSlot | undefined {
    const r = this.reserved.get(host);
    if (!r) return undefined;
    this.reserved.delete(host);
    // Read too long ago: the push asks the database again.
    return r.until >= Date.now() ? r.slot : undefined;
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
