// Owns the intake decision for one ping, whatever protocol brought it: validate, commit through the
// batcher, and turn the outcome into a result the protocol adapters (XML-RPC, HTTP GET, RSS Ping) render.
import { PingBatcher, StorageUnavailableError } from './ping-batcher.js';
import { PingValidationError, validatePing, type RawPing, type ValidPing } from './validate.js';

export const THANKS = 'Thanks for the ping.';

export type RefusalReason = 'invalid' | 'throttled' | 'unavailable' | 'blocked' | 'rate_limited';

export type PingResult =
  | { ok: true; message: string; id: number; receivedAt: Date; ping: ValidPing }
  | { ok: false; reason: RefusalReason; message: string; field?: string; retryAfterSec?: number };

export interface PingOutcomeListener {
  (method: string, result: PingResult): void;
}

export class PingService {
  private readonly listeners: PingOutcomeListener[] = [];

  constructor(
    readonly batcher: PingBatcher,
    private readonly minIntervalSec: number,
  ) {}

  /** Registers a listener told of every outcome (metrics, logs). */
  onOutcome(l: PingOutcomeListener): void {
    this.listeners.push(l);
  }

  /** Checks a raw ping without storing it; returns the cleaned ping or a refusal. */
  validate(raw: RawPing): { ok: true; ping: ValidPing } | { ok: false; result: PingResult } {
    try {
      return { ok: true, ping: validatePing(raw) };
    } catch (err) {
      if (err instanceof PingValidationError) {
        return { ok: false, result: this.emit(raw.method, { ok: false, reason: 'invalid', message: err.message, field: err.field }) };
      }
      throw err;
    }
  }

  /**
   * Validates (once), lets `screen` refuse the cleaned ping (the blocklist), then commits it. A screen's
   * refusal must already have been reported through emit().
   */
  async accept(raw: RawPing, screen?: (ping: ValidPing) => PingResult | undefined): Promise<PingResult> {
    const v = this.validate(raw);
    if (!v.ok) return v.result;
    return screen?.(v.ping) ?? this.store(v.ping);
  }

  /** Commits an already validated ping; resolves only after the commit (or the refusal). */
  async store(ping: ValidPing): Promise<PingResult> {
    try {
      const o = await this.batcher.submit(ping);
      if (o.status === 'accepted') {
        return this.emit(ping.method, { ok: true, message: THANKS, id: o.id, receivedAt: o.receivedAt, ping });
      }
      const next = o.lastPingAt ? o.lastPingAt.getTime() + this.minIntervalSec * 1000 : Date.now() + this.minIntervalSec * 1000;
      const retryAfterSec = Math.max(1, Math.ceil((next - Date.now()) / 1000));
      return this.emit(ping.method, {
        ok: false,
        reason: 'throttled',
        retryAfterSec,
        message: `${ping.url} was pinged less than ${this.minIntervalSec} seconds ago; please ping again after ${new Date(next).toISOString().replace(/\.\d{3}Z$/, 'Z')} (in ${retryAfterSec} seconds).`,
      });
    } catch (err) {
      if (err instanceof StorageUnavailableError) return this.emit(ping.method, { ok: false, reason: 'unavailable', message: err.message });
      throw err;
    }
  }

  /** Lets adapters report refusals they decide themselves (blocklists, rate limits) through the same listeners. */
  emit(method: string, r: PingResult): PingResult {
    for (const l of this.listeners) l(method, r);
    return r;
  }
}
