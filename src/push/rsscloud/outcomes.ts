// Owns what a subscriber's answer means, as pure functions: whether a notification was received (a 2xx,
// as rsscloud-server's notify-one.js judges it), whether the endpoint check passed (a 2xx to the test POST;
// a 2xx whose body is exactly the challenge when a domain was given, notify-one-challenge.js), and when a
// failed notification is tried again or given up.
import { doublingBackoffMs } from '../../platform/retry.js';

export type NotifyOutcome = 'delivered' | 'failed' | 'dropped';
export const NOTIFY_OUTCOMES: readonly NotifyOutcome[] = ['delivered', 'failed', 'dropped'];

export interface NotifyTiming {
  /** Tries of one notification (the first included) before it is dropped and counted. */
  attempts: number;
  /** First wait after a failed try; doubled after each further failure up to retryMaxMs. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** How often expired subscriptions are deleted. */
  sweepMs: number;
}

/**
 * 1 min doubling (1, 2, 4, 8 min between five tries: a quarter of an hour), then dropped: a change an
 * endpoint missed for that long is stale, and the next change notifies it again. rsscloud-server tries once.
 */
export const DEFAULT_NOTIFY_TIMING: NotifyTiming = { attempts: 5, retryBaseMs: 60_000, retryMaxMs: 3_600_000, sweepMs: 60_000 };

export function isReceived(status: number): boolean {
  return status >= 200 && status < 300;
}

/** The endpoint check's answer: a 2xx, echoing the challenge when there is one. Null when it passed, else why not. */
export function judgeCheck(status: number, body: Buffer, challenge: string | null): string | null {
  if (!isReceived(status)) return `the endpoint answered HTTP ${status}`;
  if (challenge !== null && body.toString('utf8') !== challenge) return 'the endpoint did not answer with the challenge';
  return null;
}

/** After a failed try number `attempts`: drop it, or the wait before the next. */
export function afterFailure(attempts: number, t: NotifyTiming): { drop: true } | { drop: false; waitMs: number } {
  if (attempts >= t.attempts) return { drop: true };
  return { drop: false, waitMs: doublingBackoffMs(attempts, t.retryBaseMs, t.retryMaxMs) };
}

/** What each of the surface's outcome counters counts: its HELP line on /metrics. */
export const METRIC_HELP = {
  notifications:
    'rssCloud notifications by outcome (delivered: a 2xx; failed: anything else, retried; dropped: tries spent or the subscription expired).',
  requests:
    'rssCloud pleaseNotify requests by outcome (subscribed, or the refusal: invalid, not_a_feed, check_failed, requester_full, host_full, full, busy; each answered 200 with success="false" over REST, fault 4 over XML-RPC).',
};
