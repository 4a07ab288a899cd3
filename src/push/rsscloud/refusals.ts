// Owns why a pleaseNotify is refused: the reasons, counted by pingd_rsscloud_subscribe_total{outcome}, and
// when each applies. Over REST every one is answered HTTP 200 with `<notifyResult success="false" msg="…"/>`,
// as rsscloud-server answers every refusal (2.x to 4.0.0; its 4.0.0 suite asserts the 200 for a resource it
// cannot read); over XML-RPC, fault 4 with the same message.

export type NotifyRefusal = 'invalid' | 'not_a_feed' | 'check_failed' | 'requester_full' | 'host_full' | 'full' | 'busy';

/** Retry-After of a refusal for lack of room: subscriptions expire within 25 hours, an hour is a fair wait. */
export const FULL_RETRY_AFTER_SEC = 3600;

export const NOTIFY_REFUSALS: Readonly<Record<NotifyRefusal, string>> = {
  invalid:
    'a parameter is missing or wrong: the protocol, the notifyProcedure of xml-rpc, the port, path or domain, a resource URL, too many resources',
  not_a_feed: 'a resource cannot be read as a feed',
  check_failed: 'the endpoint failed its check (the test notification, or the challenge when a domain was given)',
  requester_full: `the client already asked for RSSCLOUD_MAX_PER_REQUESTER subscriptions (Retry-After: ${FULL_RETRY_AFTER_SEC})`,
  host_full: `the endpoint's host already has RSSCLOUD_MAX_PER_HOST subscriptions (Retry-After: ${FULL_RETRY_AFTER_SEC})`,
  full: `the server keeps RSSCLOUD_MAX_SUBSCRIPTIONS already (Retry-After: ${FULL_RETRY_AFTER_SEC})`,
  busy: "RSSCLOUD_CONCURRENCY requests are being checked already, or a resource's host cannot be asked yet (Retry-After)",
};
