// Owns the intake path every protocol shares (XML-RPC, HTTP GET, RSS Ping): screen the client, validate
// once, screen the cleaned ping, commit it through the group-commit batcher (with an optional extra write
// in the same transaction), and report every outcome to whoever subscribed (metrics, logs). The protocol
// adapters only translate requests into RawPings and results into their own replies.
import type { Db } from '../../platform/db/database.js';
import { Listeners, type ListenerLog } from '../../platform/listeners.js';
import { PingBatcher, StorageUnavailableError, type BatchStats, type ExtraWrite } from './ping-batcher.js';
import { throttleState } from './ping-repository.js';
import { UNAVAILABLE_RETRY_AFTER_SEC, throttleRefusal, type Refused } from './refusals.js';
import { canonicalAddress } from '../../platform/net/ip.js';
import { PingValidationError, validatePing, type RawPing, type ValidPing } from './validate.js';

export const THANKS = 'Thanks for the ping.';

export type PingResult = { ok: true; message: string; id: number; receivedAt: Date; ping: ValidPing } | Refused;

export interface PingOutcomeListener {
  /** `url`: the weblog as stored when the ping was valid, as sent before that (null when none was). */
  (method: string, result: PingResult, url: string | null): void;
}

/**
 * A screen intake runs on every ping (the abuse screen is one): a refusal, or undefined to go on. `client`
 * runs before validation (it sees the client address and the raw fields), `ping` after it, on the ping as
 * it would be stored, with any further URLs the request carries (an rss_ping's other feed_uris).
 */
export interface PingScreen {
  client?(raw: RawPing): Refused | undefined;
  ping?(ping: ValidPing, extraUrls: readonly string[]): Refused | undefined;
}

export type Admission = { ok: true; ping: ValidPing } | { ok: false; result: Refused };

export class PingService {
  private readonly outcomeListeners: Listeners<Parameters<PingOutcomeListener>>;
  private readonly answeredListeners: Listeners<[ms: number]>;
  private readonly screens: PingScreen[] = [];

  /** `log` takes what a listener throws (a listener's bug never changes a ping's answer). */
  constructor(
    readonly batcher: PingBatcher,
    private readonly db: Db,
    private readonly minIntervalSec: number,
    log: ListenerLog,
  ) {
    this.outcomeListeners = new Listeners('ping outcome', log);
    this.answeredListeners = new Listeners('ping answered', log);
  }

  /** Registers a listener told of every outcome, accepted or refused. */
  onOutcome(l: PingOutcomeListener): void {
    this.outcomeListeners.add(l);
  }

  /** Registers a listener told of every committed or failed batch. */
  onBatch(l: (s: BatchStats) => void): void {
    this.batcher.onBatch(l);
  }

  /** Registers a listener told how long each ping request took to answer, in ms (routes report it). */
  onAnswered(l: (ms: number) => void): void {
    this.answeredListeners.add(l);
  }

  /** A ping route answered after `ms` (its onResponse hook calls this: see intakeRoute). */
  answered(ms: number): void {
    this.answeredListeners.emit(ms);
  }

  /** Adds a screen every ping passes from now on. */
  addScreen(s: PingScreen): void {
    this.screens.push(s);
  }

  /** Pings queued or committing. */
  get pending(): number {
    return this.batcher.pending;
  }

  /**
   * Everything before storage: client screens, validation (once), ping screens. A refusal is reported to
   * the listeners before it is returned.
   */
  admit(raw: RawPing, extraUrls: readonly string[] = []): Admission {
    // The client address is a parsed address or nothing before anything counts or keeps it (REGRESSION:
    // 15 kB X-Forwarded-For values, each a new rate-limit key, grew the process to 3.4 GB).
    const clientAddr = canonicalAddress(raw.clientAddr);
    if (clientAddr !== raw.clientAddr) raw = { ...raw, clientAddr };
    for (const s of this.screens) {
      const r = s.client?.(raw);
      if (r) return { ok: false, result: this.report(raw.method, r, raw.url) };
    }
    let ping: ValidPing;
    try {
      ping = validatePing(raw);
    } catch (err) {
      if (!(err instanceof PingValidationError)) throw err;
      return {
        ok: false,
        result: this.report(raw.method, { ok: false, reason: 'invalid', message: err.message, field: err.field }, raw.url),
      };
    }
    for (const s of this.screens) {
      const r = s.ping?.(ping, extraUrls);
      if (r) return { ok: false, result: this.report(raw.method, r, ping.url) };
    }
    return { ok: true, ping };
  }

  /** The whole path for a ping that needs nothing else: admit, then store. */
  async accept(raw: RawPing): Promise<PingResult> {
    const a = this.admit(raw);
    return a.ok ? this.store(a.ping) : a.result;
  }

  /**
   * Commits an admitted ping; resolves only after the commit (or the refusal). `extraWrite` runs in the
   * ping's own transaction when it is accepted (RSS Ping's payload), so both or neither are stored.
   */
  async store(ping: ValidPing, extraWrite?: ExtraWrite): Promise<PingResult> {
    let o;
    try {
      o = await this.batcher.submit(ping, extraWrite);
    } catch (err) {
      if (err instanceof StorageUnavailableError)
        return this.report(
          ping.method,
          { ok: false, reason: 'unavailable', retryAfterSec: UNAVAILABLE_RETRY_AFTER_SEC, message: err.message },
          ping.url,
        );
      throw err;
    }
    if (o.status === 'accepted')
      return this.report(ping.method, { ok: true, message: THANKS, id: o.id, receivedAt: o.receivedAt, ping }, ping.url);
    return this.report(ping.method, throttleRefusal(ping.url, o.lastPingAt, this.minIntervalSec), ping.url);
  }

  /**
   * Whether the weblog is inside its throttle window now, read without writing (the commit decides for
   * real): for adapters that would do costly work first (RSS Ping fetches a hash). A throttled ping's
   * refusal is reported; a database that does not answer lets the ping go on to the commit.
   */
  async throttled(ping: ValidPing): Promise<Refused | undefined> {
    if (this.minIntervalSec <= 0) return undefined;
    const t = await throttleState(this.db, ping.url, this.minIntervalSec).catch(() => ({ throttled: false, lastPingAt: null }));
    return t.throttled ? this.report(ping.method, throttleRefusal(ping.url, t.lastPingAt, this.minIntervalSec), ping.url) : undefined;
  }

  private report<R extends PingResult>(method: string, r: R, url: string | null): R {
    this.outcomeListeners.emit(method, r, url);
    return r;
  }
}
