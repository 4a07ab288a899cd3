// Owns what the live stream says and to whom: an event as Server-Sent Events text (WHATWG HTML, "Server-sent
// events"), the reset and retry frames, and the request's resume point and filters with their refusals.
// Pure functions; the hub and the route do the I/O.
import type { EventRow } from './event-repository.js';

export type EventType = 'ping' | 'verified';
export const EVENT_TYPES: readonly EventType[] = ['ping', 'verified'];

/** An event ready to send: its position, what filters look at, and its frame (formatted once for all clients). */
export interface StreamEvent {
  pos: number;
  type: EventType;
  /** The weblog's host name, lower case (for `?host=`). */
  host: string;
  /** The ping's tags, lower case (for `?tag=`). */
  tags: string[];
  frame: string;
}

export interface StreamFilter {
  /** That host and its subdomains. */
  host: string | null;
  tag: string | null;
  types: ReadonlySet<EventType>;
}

/** The weblog's host a stream filter matches: the URL's hostname (no port), lower case; '' when it does not parse. */
function eventHost(url: string): string {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return '';
  }
}

/**
 * The frame of one event. `data` is one line of JSON (JSON.stringify escapes every line break, so an event
 * never splits), `id` the position a reconnecting client names in Last-Event-ID.
 */
export function toStreamEvent(r: EventRow): StreamEvent {
  const data =
    r.type === 'ping'
      ? {
          id: r.pingId,
          name: r.name,
          url: r.url,
          changesUrl: r.changesUrl,
          rssUrl: r.rssUrl,
          tags: r.tags ?? [],
          method: r.method,
          receivedAt: r.receivedAt.toISOString(),
        }
      : { id: r.pingId, url: r.url, outcome: r.outcome, newItems: r.newItems ?? [] };
  return {
    pos: r.pos,
    type: r.type,
    host: eventHost(r.url),
    tags: (r.tags ?? []).map((t) => t.toLowerCase()),
    frame: `id: ${r.pos}\nevent: ${r.type}\ndata: ${JSON.stringify(data)}\n\n`,
  };
}

/**
 * Sent first when the client's resume point cannot be honoured: it is older than what retention keeps
 * (events after it may be gone) or newer than any event (another server's id). Its id is where the stream
 * continues, so a later reconnect resumes from there instead of being reset again.
 */
export function resetFrame(continueAt: number, asked: number, reason: 'pruned' | 'unknown', oldestKept: number): string {
  const message =
    reason === 'pruned'
      ? `Events after ${asked} are no longer all kept (retention deleted up to ${oldestKept}); continuing with new events.`
      : `Event ${asked} is not one this server has sent; continuing with new events.`;
  return `id: ${continueAt}\nevent: reset\ndata: ${JSON.stringify({ reason, lastEventId: asked, continueAt, message })}\n\n`;
}

/** Tells EventSource clients how long to wait before reconnecting. */
export const retryFrame = (ms: number): string => `retry: ${ms}\n\n`;

export function matches(f: StreamFilter, e: StreamEvent): boolean {
  if (!f.types.has(e.type)) return false;
  if (f.host !== null && e.host !== f.host && !e.host.endsWith(`.${f.host}`)) return false;
  if (f.tag !== null && !e.tags.includes(f.tag)) return false;
  return true;
}

export interface StreamQuery {
  since?: string;
  host?: string;
  tag?: string;
  types?: string;
}

export type StreamRequest = { ok: true; from: number | null; filter: StreamFilter } | { ok: false; message: string };

/** Positions are bigints in the database; a resume point beyond this is not one we sent. */
const MAX_ID_DIGITS = 15;
const HOST = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

function position(raw: string): number | null {
  const v = raw.trim();
  return v.length <= MAX_ID_DIGITS && /^\d+$/.test(v) ? Number(v) : null;
}

/**
 * Where to start and what to send. Last-Event-ID wins over `?since=`: an EventSource that was opened with
 * `?since=` keeps that URL on every reconnect and names its newer position in the header.
 */
export function parseStreamRequest(q: StreamQuery, lastEventId: string | undefined): StreamRequest {
  let from: number | null = null;
  if (lastEventId !== undefined && lastEventId.trim() !== '') {
    from = position(lastEventId);
    if (from === null) return { ok: false, message: 'Last-Event-ID must be the id of an event this stream sent (a decimal number).' };
  } else if (q.since !== undefined) {
    from = position(q.since);
    if (from === null)
      return { ok: false, message: 'since must be the id of an event this stream sent (a decimal number; 0 = everything still kept).' };
  }
  let host: string | null = null;
  if (q.host !== undefined) {
    let h = q.host.trim().toLowerCase().replace(/\.$/, '');
    try {
      // An internationalised name is matched in its ASCII form, as the weblog URLs are stored.
      if (/[^\x00-\x7f]/.test(h)) h = new URL(`http://${h}/`).hostname;
    } catch {
      /* refused below */
    }
    if (!HOST.test(h))
      return { ok: false, message: 'host must be a domain name such as example.com (it matches that host and its subdomains).' };
    host = h;
  }
  let tag: string | null = null;
  if (q.tag !== undefined) {
    tag = q.tag.trim().toLowerCase();
    if (tag === '') return { ok: false, message: 'tag must not be empty.' };
  }
  let types: Set<EventType> = new Set(EVENT_TYPES);
  if (q.types !== undefined) {
    const named = q.types
      .split(',')
      .map((t) => t.trim())
      .filter((t) => t !== '');
    const unknown = named.filter((t) => !(EVENT_TYPES as readonly string[]).includes(t));
    if (named.length === 0 || unknown.length > 0)
      return { ok: false, message: `types must be a comma-separated list of ${EVENT_TYPES.join(', ')}.` };
    types = new Set(named as EventType[]);
  }
  return { ok: true, from, filter: { host, tag, types } };
}
