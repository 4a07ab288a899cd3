// Owns WebSub publish as an intake protocol (PubSubHubbub 0.4 §7.1, W3C WebSub §4 leaves publishing to the
// hub): `hub.mode=publish` with one or several `hub.url` (0.4, what WordPress's plugin sends) or
// `hub.topic` values becomes one ping per topic through the one intake path (same screens, validation,
// throttle and durable commit as every ping), its feed the topic and its weblog the feed's own <link>
// (or the topic's origin while none is known). Answered 204 once every topic's ping is committed, else
// the refusal's status from intake's table with a one-line reason per topic.
import type { Db } from '../../platform/db/database.js';
import { REFUSAL_STATUS, type Refused } from '../ping/refusals.js';
import type { PingResult, PingService } from '../ping/ping-service.js';
import type { ExtraWrite } from '../ping/ping-batcher.js';
import { normalizeUrls, type RawPing } from '../ping/validate.js';
import { topicSites, type TopicSite } from './topic-repository.js';

/**
 * URLs one publish may name: a bound on parsing only (the form is at most 16 KiB anyway). What a publish
 * costs is bounded by MAX_PUBLISH_WEBLOGS: WordPress's WebSub plugin (4.0.0) names every feed of the post,
 * 2 x (2 + tags + categories), and PubSubHubbub's Python publisher batches 100 URLs a request; a bound of
 * 20 URLs refused a post with 9 tags and categories whole, and the plugin does not retry.
 */
export const MAX_PUBLISH_URLS = 200;

/**
 * Weblogs one publish may name: each is a ping (a commit, a verification fetch). Topics of one weblog are
 * one ping, and the others cost a check only when someone subscribes to them (queueTopicChecks).
 */
export const MAX_PUBLISH_WEBLOGS = 10;

/** The spellings publishers use: 0.4's hub.url, WebSub's hub.topic, and PHP-style repeated `[]` fields. */
const TOPIC_FIELDS = ['hub.url', 'hub.url[]', 'hub.topic', 'hub.topic[]'] as const;

export type PublishForm = { ok: true; topics: string[] } | { ok: false; reason: string };

/** The topics a publish form names, normalised and without repeats, or why it names none usable. */
export function readPublishForm(form: Record<string, unknown>): PublishForm {
  const raw: string[] = [];
  for (const f of TOPIC_FIELDS) {
    const v = form[f];
    if (typeof v === 'string') raw.push(v);
    else if (Array.isArray(v)) for (const s of v) if (typeof s === 'string') raw.push(s);
  }
  const named = raw.map((s) => s.trim()).filter((s) => s !== '');
  if (named.length === 0) return { ok: false, reason: 'hub.url (or hub.topic) is required to publish' };
  if (named.length > MAX_PUBLISH_URLS) return { ok: false, reason: `at most ${MAX_PUBLISH_URLS} topics may be published at once` };
  const n = normalizeUrls(named, 'topic');
  return n.ok ? { ok: true, topics: n.urls } : n;
}

/** The ping a published topic is: its feed the topic, its weblog the feed's site (else the topic's origin). */
export function topicPing(topic: string, site: TopicSite | undefined, client: { addr: string | null; userAgent: string | null }): RawPing {
  const url = site?.siteUrl ?? `${new URL(topic).origin}/`;
  return {
    method: 'websub',
    name: site?.title || new URL(url).hostname,
    url,
    rssUrl: topic,
    clientAddr: client.addr,
    userAgent: client.userAgent,
  };
}

export interface PublishAnswer {
  status: number;
  /** One line per refused topic (empty on success). */
  body: string;
  retryAfterSec?: number;
}

/** 204 when every topic was accepted; otherwise the first refusal's status and each topic's outcome. */
export function publishAnswer(topics: readonly string[], results: readonly PingResult[]): PublishAnswer {
  const refused = results.filter((r): r is Refused => !r.ok);
  if (refused.length === 0) return { status: 204, body: '' };
  const first = refused[0];
  const body =
    topics.length === 1
      ? first.message
      : topics.map((t, i) => `${t}: ${results[i].ok ? 'accepted' : (results[i] as Refused).message}`).join('\n');
  return { status: REFUSAL_STATUS[first.reason], body, retryAfterSec: first.retryAfterSec };
}

/** Topics of one weblog in one publish: one ping (the throttle is the weblog's), its feed the first topic. */
export interface WeblogTopics {
  raw: RawPing;
  topics: string[];
}

/** Groups a publish's topics by the weblog each names, in the order they were given. */
export function groupByWeblog(
  topics: readonly string[],
  sites: ReadonlyMap<string, TopicSite>,
  client: { addr: string | null; userAgent: string | null },
): WeblogTopics[] {
  const groups: WeblogTopics[] = [];
  for (const t of topics) {
    const raw = topicPing(t, sites.get(t), client);
    const g = groups.find((x) => x.raw.url === raw.url);
    if (g) g.topics.push(t);
    else groups.push({ raw, topics: [t] });
  }
  return groups;
}

/**
 * Runs a publish through intake. Topics of one weblog make one ping (WordPress publishes its RSS and Atom
 * feeds in one request: one ping each would have the second throttled), verified by fetching the first;
 * `others` is written in that ping's transaction for the rest (the hub queues a check of those that have
 * subscribers). Every ping is admitted first (a screen or validation refusing one refuses the request and
 * nothing is stored), then all are committed; the answer comes after the commits. A throttled weblog
 * (published again within PING_MIN_INTERVAL) is refused on its own.
 */
export async function publishTopics(
  pings: PingService,
  db: Db,
  topics: readonly string[],
  client: { addr: string | null; userAgent: string | null },
  others?: (topics: readonly string[]) => ExtraWrite | undefined,
): Promise<PublishAnswer> {
  // What verification knows of the feeds; a database that does not answer leaves the origins (the
  // commit then refuses the pings as unavailable, or takes them).
  const sites = await topicSites(db, topics).catch(() => new Map<string, TopicSite>());
  const groups = groupByWeblog(topics, sites, client);
  if (groups.length > MAX_PUBLISH_WEBLOGS) {
    return {
      status: 400,
      body: `at most ${MAX_PUBLISH_WEBLOGS} weblogs may be published at once (each is a ping); these topics name ${groups.length}`,
    };
  }
  const admitted = [];
  for (const g of groups) {
    const a = pings.admit(g.raw);
    if (!a.ok) return publishAnswer([g.topics[0]], [a.result]);
    admitted.push(a.ping);
  }
  const results = await Promise.all(
    admitted.map((p, i) => pings.store(p, groups[i].topics.length > 1 ? others?.(groups[i].topics.slice(1)) : undefined)),
  );
  const byTopic = new Map<string, PingResult>();
  groups.forEach((g, i) => g.topics.forEach((t) => byTopic.set(t, results[i])));
  return publishAnswer(
    topics,
    topics.map((t) => byTopic.get(t) as PingResult),
  );
}
