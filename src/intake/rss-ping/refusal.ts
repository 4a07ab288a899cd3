// Owns an rss_ping's refusal as the adapter answers it: the outcome label it is counted under in
// pingd_rssping_total, its HTTP status (REFUSAL_STATUS), its message and any Retry-After, whether this
// adapter decided it or intake did.
import { REFUSAL_STATUS, type RefusalReason, type Refused, type RssPingRefusalReason } from '../ping/refusals.js';

/** The outcome label of pingd_rssping_total: accepted, or why it was refused. */
export type RssPingOutcome = 'accepted' | Exclude<RefusalReason, 'rate_limited'> | RssPingRefusalReason;

/** A refusal decided by this adapter or by intake: its outcome label gives its status (REFUSAL_STATUS). */
export class RssPingRefusal extends Error {
  readonly status: number;
  constructor(
    readonly outcome: Exclude<RssPingOutcome, 'accepted'>,
    message: string,
    readonly retryAfterSec?: number,
  ) {
    super(message);
    this.status = REFUSAL_STATUS[outcome];
  }

  /** Intake's refusal (screens, validation, throttle, storage), as this adapter answers it. */
  static of(r: Refused): RssPingRefusal {
    // A client over its rate limit is counted with the throttled ones here, as it always was.
    return new RssPingRefusal(r.reason === 'rate_limited' ? 'throttled' : r.reason, r.message, r.retryAfterSec);
  }
}
