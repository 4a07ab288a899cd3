// Owns the decisions about a subscription request, as pure functions (WebSub §5.1, §5.2): whether the form
// is well-formed (else a one-line reason for the 400), whether its topic is one of our documents, any other
// feed (the open hub: checked by fetching it once the subscriber confirmed) or neither (a denial),
// the lease granted, the URLs the hub writes (the callback with the hub.* parameters, the hub's own), and
// the host a callback is counted under.
import { normalizeUrl, PingValidationError } from '../../intake/ping/validate.js';

export type Mode = 'subscribe' | 'unsubscribe';

export interface SubscriptionRequest {
  callback: string;
  mode: Mode;
  topic: string;
  /** hub.lease_seconds as asked (subscribe), or undefined. */
  leaseSeconds: number | undefined;
  secret: string | undefined;
}

export type ParsedRequest = { ok: true; request: SubscriptionRequest } | { ok: false; reason: string };

/** WebSub §5.1: hub.secret MUST be less than 200 bytes. */
export const MAX_SECRET_BYTES = 200;
/** Longest callback and topic URL taken (longer: 400 from the route's schema). */
export const MAX_URL_CHARS = 2048;

/**
 * Reads the form's hub.* parameters (others are ignored, WebSub §5.1). Checked in the order the spec lists
 * them, so a request with several mistakes always hears about the same one first.
 */
export function parseSubscriptionRequest(form: Record<string, unknown>): ParsedRequest {
  const field = (name: string): string | undefined => {
    const v = form[name];
    return typeof v === 'string' ? v : undefined;
  };
  const callbackRaw = field('hub.callback')?.trim();
  if (!callbackRaw) return refuse('hub.callback is required');
  let callback: URL;
  try {
    callback = new URL(callbackRaw);
  } catch {
    return refuse('hub.callback must be an absolute http or https URL');
  }
  if (callback.protocol !== 'http:' && callback.protocol !== 'https:') return refuse('hub.callback must be an absolute http or https URL');
  if (callback.username || callback.password) return refuse('hub.callback must not contain a user name or password');
  if (callbackRaw.includes('#')) return refuse('hub.callback must not contain a fragment');

  const mode = field('hub.mode')?.trim();
  if (!mode) return refuse('hub.mode is required');
  if (mode !== 'subscribe' && mode !== 'unsubscribe') return refuse('hub.mode must be subscribe, unsubscribe or publish');

  const topicRaw = field('hub.topic')?.trim();
  if (!topicRaw) return refuse('hub.topic is required');
  if (!URL.canParse(topicRaw)) return refuse('hub.topic must be an absolute URL');

  const leaseRaw = field('hub.lease_seconds')?.trim();
  let leaseSeconds: number | undefined;
  if (leaseRaw !== undefined && leaseRaw !== '') {
    if (!/^\d+$/.test(leaseRaw) || /^0+$/.test(leaseRaw)) return refuse('hub.lease_seconds must be a positive integer');
    leaseSeconds = Number(leaseRaw);
  }

  // An empty hub.secret is taken as none: an empty HMAC key would authenticate nothing.
  const secret = field('hub.secret') || undefined;
  if (secret !== undefined && Buffer.byteLength(secret, 'utf8') >= MAX_SECRET_BYTES)
    return refuse(`hub.secret must be less than ${MAX_SECRET_BYTES} bytes`);

  return { ok: true, request: { callback: callback.href, mode, topic: new URL(topicRaw).href, leaseSeconds, secret } };
}

function refuse(reason: string): ParsedRequest {
  return { ok: false, reason };
}

/**
 * Which of our documents a topic URL names, or why it names none (the hub.reason of the denial, WebSub
 * §5.2). Ours: exactly `<base><path>` for one of the document paths, where base is PUBLIC_URL, or the
 * origin the request came to when PUBLIC_URL is unset; no query, no fragment.
 */
export function topicPath(
  topic: string,
  base: string,
  paths: readonly string[],
): { ok: true; path: string } | { ok: false; reason: string } {
  const want = new URL(topic).href;
  for (const p of paths) if (new URL(`${base}${p}`).href === want) return { ok: true, path: p };
  return { ok: false, reason: `not a topic of this hub; the topics are ${paths.map((p) => `${base}${p}`).join(', ')}` };
}

export type TopicKind =
  | { kind: 'document'; path: string }
  /** Any other http(s) feed: `topic` as intake normalises a feed URL (so a ping's feed names the same row). */
  | { kind: 'feed'; topic: string; host: string }
  | { kind: 'deny'; reason: string };

/**
 * What a subscription's topic is (WebSub §5.1, §5.2): one of our documents; any other http(s) URL off our
 * own origin (a feed, to be checked by fetching it once the subscriber confirmed); or a denial (another
 * URL of ours, a scheme pingd does not fetch, a URL intake would refuse as a feed).
 */
export function classifyTopic(topic: string, base: string, paths: readonly string[]): TopicKind {
  const ours = topicPath(topic, base, paths);
  if (ours.ok) return { kind: 'document', path: ours.path };
  const u = new URL(topic);
  if (u.origin === new URL(base).origin) return { kind: 'deny', reason: ours.reason };
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    return { kind: 'deny', reason: 'hub.topic must be an http or https URL of a feed' };
  try {
    const normal = normalizeUrl(topic, 'topic');
    return { kind: 'feed', topic: normal, host: new URL(normal).hostname.toLowerCase() };
  } catch (err) {
    if (err instanceof PingValidationError) return { kind: 'deny', reason: err.message };
    throw err;
  }
}

export interface LeaseBounds {
  min: number;
  max: number;
  default: number;
}

/** The lease granted: the one asked for, clamped to [min, max]; the default when none was asked. */
export function grantedLease(asked: number | undefined, b: LeaseBounds): number {
  if (asked === undefined) return b.default;
  return Math.min(b.max, Math.max(b.min, asked));
}

/** The callback with hub.* parameters added, its own query kept as it was (WebSub §5.3). */
export function withParams(callback: string, params: Record<string, string>): string {
  const extra = new URLSearchParams(params).toString();
  if (!callback.includes('?')) return `${callback}?${extra}`;
  return callback.endsWith('?') || callback.endsWith('&') ? `${callback}${extra}` : `${callback}&${extra}`;
}

/** The base of a delivery's Link rel="hub": PUBLIC_URL, else the topic's own origin. */
export function hubBase(publicUrl: string | undefined, topic: string): string {
  return publicUrl ?? new URL(topic).origin;
}

/**
 * The host a callback's bounds are counted under (WEBSUB_MAX_PER_HOST, WEBSUB_MAX_PENDING, the worker's
 * requests in flight): its name or address literal, lower case, without the port, so one machine answering
 * on many ports is one host.
 */
export function callbackHost(callback: string): string {
  return new URL(callback).hostname.toLowerCase();
}
