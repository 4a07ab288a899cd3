// Owns why a pleaseNotify is refused and the HTTP status each reason is answered with over REST (the body
// is rsscloud-server's `<notifyResult success="false" msg="…"/>` either way; XML-RPC answers a fault).

export type NotifyRefusal = 'invalid' | 'not_a_feed' | 'check_failed' | 'requester_full' | 'host_full' | 'full' | 'busy';

export const NOTIFY_REFUSAL_STATUS: Readonly<Record<NotifyRefusal, number>> = {
  invalid: 400,
  not_a_feed: 422,
  check_failed: 422,
  requester_full: 503,
  host_full: 503,
  full: 503,
  busy: 503,
};

/** Retry-After of a refusal for lack of room: subscriptions expire within 25 hours, an hour is a fair wait. */
export const FULL_RETRY_AFTER_SEC = 3600;
