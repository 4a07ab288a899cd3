// Owns the decisions of a polite feed client, as pure functions: what a response or a failure means for
// the ping (the verification outcome), when the feed may be asked again after failures (exponential
// backoff; Retry-After is read by ../platform/retry.ts), and when a redirect moves the feed for good. The
// rules come from the aggregator-behaviour guide (status codes, backoff, Retry-After) and the RSS Feed
// State document (301 vs 302 redirects, XML redirects, 410 Gone).
import type { FetchErrorCode } from '../platform/fetch/safe-fetch.js';
import { doublingBackoffMs } from '../platform/retry.js';
import type { Outcome } from '../platform/outcomes.js';

/** What a failed fetch (no HTTP answer to judge) means for the ping. */
export function outcomeOfFetchError(code: FetchErrorCode): Outcome {
  switch (code) {
    case 'FETCH_ADDRESS_BLOCKED':
    case 'FETCH_URL_INVALID':
      return 'refused';
    case 'FETCH_TOO_LARGE':
      return 'too_large';
    default:
      // DNS, connect, timeout, a body that cannot be decoded, too many redirects, our own bound on
      // requests in flight: nothing was learnt about the feed, it may answer later.
      return 'unreachable';
  }
}

/** Failures that count towards the feed's backoff (the feed or its host is in trouble, not our policy). */
export function isFailure(outcome: Outcome): boolean {
  return outcome === 'unreachable';
}

export type StatusClass = '2xx' | '3xx' | '4xx' | '5xx' | 'other';

export function statusClass(status: number): StatusClass {
  if (status >= 200 && status < 300) return '2xx';
  if (status >= 300 && status < 400) return '3xx';
  if (status >= 400 && status < 500) return '4xx';
  if (status >= 500 && status < 600) return '5xx';
  return 'other';
}

/** What an HTTP status means before the body is read: a final outcome, or 'body' (200/226: parse it). */
export function outcomeOfStatus(status: number): Outcome | 'body' {
  if (status === 200 || status === 226 || status === 203) return 'body';
  if (status === 304) return 'not_modified';
  if (status === 410) return 'gone';
  if (status >= 500 || status === 429 || status === 408) return 'unreachable';
  // 404, 403, 401, other 4xx and anything unexpected: there is no feed for us at this address.
  return 'not_a_feed';
}

export const BACKOFF_MIN_MS = 60_000;
export const BACKOFF_MAX_MS = 24 * 3600_000;

/** Exponential backoff after `failures` consecutive failures: 1 min, 2, 4, … up to 24 h. */
export function backoffMs(failures: number): number {
  if (failures <= 0) return 0;
  return doublingBackoffMs(failures, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
}

export interface MoveState {
  movedTo: string | null;
  movedSeen: number;
}

/** Fetches in a row that must see the same permanent redirect before the stored URL follows it. */
export const MOVE_CONFIRMATIONS = 2;

/**
 * Where the feed moved for good, from the redirects of one fetch: the target of the last permanent
 * (301/308) hop of an unbroken run of permanent hops from the start. A 302/303/307 anywhere before it means
 * the address is only borrowed (the RSS Feed State document: clients MUST NOT update on a 302).
 */
export function permanentTarget(hops: readonly { status: number; to: string }[]): string | undefined {
  let target: string | undefined;
  for (const h of hops) {
    if (h.status !== 301 && h.status !== 308) break;
    target = h.to;
  }
  return target;
}

/**
 * Whether a permanent move seen now should update the stored URL, and the state to keep: at once for
 * http → https of the same host (nothing else changes hands), else after MOVE_CONFIRMATIONS fetches in a
 * row named the same target (a one-off misconfiguration must not lose the feed's address).
 */
export function decideMove(current: string, seen: string | undefined, state: MoveState): { adopt: string | undefined; state: MoveState } {
  if (!seen || seen === current) return { adopt: undefined, state: { movedTo: null, movedSeen: 0 } };
  if (isHttpsUpgrade(current, seen)) return { adopt: seen, state: { movedTo: null, movedSeen: 0 } };
  const count = state.movedTo === seen ? state.movedSeen + 1 : 1;
  if (count >= MOVE_CONFIRMATIONS) return { adopt: seen, state: { movedTo: null, movedSeen: 0 } };
  return { adopt: undefined, state: { movedTo: seen, movedSeen: count } };
}

function isHttpsUpgrade(from: string, to: string): boolean {
  try {
    const a = new URL(from);
    const b = new URL(to);
    return (
      a.protocol === 'http:' && b.protocol === 'https:' && a.hostname === b.hostname && a.pathname === b.pathname && a.search === b.search
    );
  } catch {
    return false;
  }
}
