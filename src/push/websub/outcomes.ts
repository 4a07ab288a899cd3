// Owns what a callback's answer means, as pure functions: whether a verification of intent was confirmed
// (WebSub §5.3: a 2xx whose body is exactly the challenge), whether a delivery was received (§7: a 2xx, and
// nothing else), which failures are worth another try, and when the next try comes.
import type { FetchErrorCode } from '../../platform/fetch/safe-fetch.js';
import { doublingBackoffMs } from '../../platform/retry.js';

export type VerificationOutcome = 'confirmed' | 'not_confirmed' | 'unreachable' | 'denied';
export const VERIFICATION_OUTCOMES: readonly VerificationOutcome[] = ['confirmed', 'not_confirmed', 'unreachable', 'denied'];

/** given_up: a feed topic's change that failed every try, skipped for the next. */
export type DeliveryOutcome = 'delivered' | 'failed' | 'dropped' | 'given_up';
export const DELIVERY_OUTCOMES: readonly DeliveryOutcome[] = ['delivered', 'failed', 'dropped', 'given_up'];

export interface HubTiming {
  /** Tries of a verification of intent or a denial (the first included) while the callback cannot be reached. */
  intentAttempts: number;
  /** First wait after a failed delivery or verification; doubled after each further failure. */
  retryBaseMs: number;
  /** Longest wait between two tries, and the rhythm of a failing subscription's tries. */
  retryMaxMs: number;
  /** Failed deliveries in a row after which a subscription is failing. */
  failAfter: number;
  /** How often expired subscriptions are deleted. */
  sweepMs: number;
}

/**
 * 1 min doubling (1, 2, 4, 8, 16 min between the first six tries: half an hour), failing after 6 failures
 * in a row, then hourly until the lease ends (WebSub §7: retry "up to some reasonable maximum over a
 * reasonable time period"; the lease is that period).
 */
export const DEFAULT_TIMING: HubTiming = { intentAttempts: 4, retryBaseMs: 60_000, retryMaxMs: 3_600_000, failAfter: 6, sweepMs: 60_000 };

/** The answer to a verification of intent. Anything but a 2xx echoing the challenge confirms nothing. */
export function judgeEcho(status: number, body: Buffer, challenge: string): 'confirmed' | 'retry' | 'not_confirmed' {
  if (status >= 200 && status < 300) return body.toString('utf8') === challenge ? 'confirmed' : 'not_confirmed';
  // The callback is in trouble (or asks us to wait), it did not say no: ask again later.
  if (status >= 500 || status === 429) return 'retry';
  return 'not_confirmed';
}

export function isDelivered(status: number): boolean {
  return status >= 200 && status < 300;
}

/** Request failures that say nothing about the subscriber's intent and may pass: try again later. */
export function isTransient(code: FetchErrorCode): boolean {
  return code === 'FETCH_NETWORK' || code === 'FETCH_TIMEOUT' || code === 'FETCH_DNS_FAILED';
}

/** Request failures that mean the callback cannot be asked at all (the address policy, a bad URL). */
export function isUnreachable(code: FetchErrorCode): boolean {
  return code === 'FETCH_ADDRESS_BLOCKED' || code === 'FETCH_URL_INVALID' || isTransient(code);
}

/** The wait after `failures` failures in a row: retryBaseMs doubling up to retryMaxMs; retryMaxMs once failing. */
export function retryDelayMs(failures: number, t: Pick<HubTiming, 'retryBaseMs' | 'retryMaxMs' | 'failAfter'>): number {
  if (failures >= t.failAfter) return t.retryMaxMs;
  return doublingBackoffMs(failures, t.retryBaseMs, t.retryMaxMs);
}

/** What each of the surface's outcome counters counts: its HELP line on /metrics. */
export const METRIC_HELP = {
  verifications: 'WebSub verifications of intent by outcome (confirmed, not_confirmed, unreachable), and denials sent (denied).',
  deliveries:
    'WebSub content deliveries by outcome (delivered: a 2xx; failed: anything else, retried; dropped: the subscription ended first; given_up: a feed change that failed every try, skipped).',
  refusals:
    'Well-formed WebSub requests refused by a bound, by reason (not_subscribed 422; host_pending, client_pending 429: WEBSUB_MAX_PENDING; host_full 503: WEBSUB_MAX_PER_HOST; full 503: WEBSUB_MAX_SUBSCRIPTIONS; host_topics, topic_host_full, topics_full 503: WEBSUB_MAX_TOPICS_PER_HOST, WEBSUB_MAX_PER_TOPIC_HOST, WEBSUB_MAX_TOPICS; unknown_unsubscribes 429: a client past 10 unsubscribes of unknown pairs in a second, refused from memory).',
};
