// Owns what a refused ping is, whatever protocol brought it: the reasons, the one table that maps each to
// the HTTP status every adapter answers with (XML-RPC alone answers 200 with flerror 1, as its clients
// expect), and the wording of the throttle and disk-full refusals.

/** Why intake refused a ping (the `outcome` label of pingd_pings_total). */
export type RefusalReason = 'invalid' | 'throttled' | 'unavailable' | 'blocked' | 'rate_limited';

/** Refusals only RSS Ping decides (authentication, body size), answered through the same table. */
export type RssPingRefusalReason = 'unauthorized' | 'forbidden' | 'too_large';

export const REFUSAL_STATUS: Readonly<Record<RefusalReason | RssPingRefusalReason, number>> = {
  invalid: 400,
  unauthorized: 401,
  blocked: 403,
  forbidden: 403,
  too_large: 413,
  throttled: 429,
  rate_limited: 429,
  unavailable: 503,
};

export interface Refused {
  ok: false;
  reason: RefusalReason;
  message: string;
  field?: string;
  retryAfterSec?: number;
}

/** The refusal of a ping whose weblog took one less than `minIntervalSec` ago (its last at `lastPingAt`). */
export function throttleRefusal(url: string, lastPingAt: Date | null, minIntervalSec: number, now = Date.now()): Refused {
  const next = (lastPingAt ? lastPingAt.getTime() : now) + minIntervalSec * 1000;
  const retryAfterSec = Math.max(1, Math.ceil((next - now) / 1000));
  return {
    ok: false,
    reason: 'throttled',
    retryAfterSec,
    message: `${url} was pinged less than ${minIntervalSec} seconds ago; please ping again after ${new Date(next).toISOString().replace(/\.\d{3}Z$/, 'Z')} (in ${retryAfterSec} seconds).`,
  };
}

/**
 * Retry-After of a ping refused because the database could not store it (down, a failover under way, too
 * slow, the server shutting down). Between two loopback clusters writes were back 13-131 ms after
 * `pg_ctl promote` returned (test/faults/failover.test.ts, 10 failovers); a managed failover first has to
 * notice the loss (Patroni's default ttl is 30 s, pg_auto_failover's node_considered_unhealthy_timeout
 * 20 s). The root error handler's 503s say 10 too.
 */
export const UNAVAILABLE_RETRY_AFTER_SEC = 10;

/** Retry-After of the disk-full refusal: freeing space is an operator's work, minutes rather than seconds. */
export const DISK_FULL_RETRY_AFTER_SEC = 60;

/**
 * The refusal of every ping while the database's disk is full (GET /readyz says "disk full"): the same
 * answer from every protocol, before any work, rather than a batch tried and failed per ping.
 */
export function diskFullRefusal(): Refused {
  return {
    ok: false,
    reason: 'unavailable',
    retryAfterSec: DISK_FULL_RETRY_AFTER_SEC,
    message: "The ping could not be stored: the server's disk is full; please ping again later.",
  };
}
