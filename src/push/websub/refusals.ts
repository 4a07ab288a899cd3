// Owns the hub's refusals of a well-formed subscription request (WebSub §5.1: "an appropriate HTTP error
// response code (4xx or 5xx)"), as data: each refusal's status, its Retry-After and its one-line reason.
// Which refusal applies is decided where the facts are counted (intent-repository.ts, queueIntent, in the
// statement that queues the intent); this is what the subscriber hears.

export type Refusal =
  | 'not_subscribed'
  | 'host_pending'
  | 'client_pending'
  | 'host_full'
  | 'full'
  | 'host_topics'
  | 'topic_host_full'
  | 'topics_full'
  // Decided by this instance's memory of a flood (refusal-memory.ts), not by the database.
  | 'unknown_unsubscribes';

export interface HubLimits {
  /** WEBSUB_MAX_SUBSCRIPTIONS: active and pending subscriptions in all. */
  maxSubscriptions: number;
  /** WEBSUB_MAX_PER_HOST: active and pending subscriptions with callbacks on one host. */
  maxPerHost: number;
  /** WEBSUB_MAX_PENDING: intents waiting for their request, per callback host and per client. */
  maxPending: number;
  /** WEBSUB_MAX_TOPICS_PER_HOST: distinct feed topics subscribed from callbacks on one host. */
  maxTopicsPerHost: number;
  /** WEBSUB_MAX_PER_TOPIC_HOST: subscriptions whose feed topic is on one host. */
  maxPerTopicHost: number;
  /** WEBSUB_MAX_TOPICS: feed topics with subscriptions, in all. */
  maxTopics: number;
}

export const WEBSUB_REFUSAL_STATUS: Record<Refusal, number> = {
  // Nothing to do: well-formed, but there is no subscription to end (RFC 9110 §15.5.21).
  not_subscribed: 422,
  // Too many requests waiting for their verification: a rate, not a lack of room.
  host_pending: 429,
  client_pending: 429,
  // No room: subscriptions end with their lease and are swept, so room comes back.
  host_full: 503,
  full: 503,
  // The open hub's bounds on what strangers can make it fetch and fan out: room comes back as leases end.
  host_topics: 503,
  topic_host_full: 503,
  topics_full: 503,
  // A client past the bound on unsubscribes of pairs the hub does not have: a rate, for a second.
  unknown_unsubscribes: 429,
};

/**
 * When a refused subscriber may try again. Waiting intents are done within a minute unless their callback
 * fails (then within the retries' few minutes); subscriptions end with their lease and are swept within
 * the hour.
 */
export const WEBSUB_RETRY_AFTER_SEC: Record<Refusal, number | null> = {
  not_subscribed: null,
  host_pending: 60,
  client_pending: 60,
  host_full: 3600,
  full: 3600,
  host_topics: 3600,
  topic_host_full: 3600,
  topics_full: 3600,
  unknown_unsubscribes: 1,
};

export function refusalReason(r: Refusal, limits: HubLimits, host: string, topicHost: string | null = null): string {
  switch (r) {
    case 'not_subscribed':
      return 'hub.callback has no subscription to hub.topic: there is nothing to unsubscribe';
    case 'host_pending':
      return `at most ${limits.maxPending} requests for callbacks on ${host} may wait for their verification at once; try again later`;
    case 'client_pending':
      return `at most ${limits.maxPending} requests from one client may wait for their verification at once; try again later`;
    case 'host_full':
      return `this hub keeps at most ${limits.maxPerHost} subscriptions with callbacks on one host and has no room for another on ${host}; try again later`;
    case 'full':
      return `this hub keeps at most ${limits.maxSubscriptions} subscriptions and has no room for another; try again later`;
    case 'host_topics':
      return `this hub keeps at most ${limits.maxTopicsPerHost} feed topics subscribed from callbacks on one host and has no room for another on ${host}; try again later`;
    case 'topic_host_full':
      return `this hub keeps at most ${limits.maxPerTopicHost} subscriptions to feeds on one host and has no room for another on ${topicHost ?? 'that host'}; try again later`;
    case 'topics_full':
      return `this hub keeps at most ${limits.maxTopics} feed topics and has no room for another; try again later`;
    case 'unknown_unsubscribes':
      return 'this client asked to end too many subscriptions this hub does not have within a second; try again in a second';
  }
}
