// Owns what the live stream says and to whom: an event as Server-Sent Events text (WHATWG HTML, "Server-sent
// events"), the control frames (reset, live, cursor, retry), the request's resume point, filters and mode
// with their refusals, and the published filter caps. Pure functions; the hub and the route do the I/O.
import type { EventRow } from './event-repository.js';
import type { PingMethod } from '../../intake/ping/validate.js';
import { OUTCOMES } from '../../platform/outcomes.js';

export type EventType = 'ping' | 'verified';
export const EVENT_TYPES: readonly EventType[] = ['ping', 'verified'];

/** The `method` a `ping` event carries (how the ping arrived), the values `?method=` takes. */
export const STREAM_METHODS = ['ping', 'extendedPing', 'pingSiteForm', 'rssPing'] as const satisfies readonly PingMethod[];
/** The `outcome` a `verified` event carries, the values `?outcome=` takes: the verifier's own list. */
export const STREAM_OUTCOMES = OUTCOMES;

/**
 * How many values one request may name per filter. A host filter is one substring test per host per row
 * in a replay's query and per event in memory: 100 hosts cost a live event about as much as its JSON (as
 * Jetstream v2 caps wantedDids/wantedCollections, and NIP-11 publishes `max_filters`).
 */
export const FILTER_CAPS = { host: 100, tag: 20 } as const;

/** Every query parameter /stream takes (anything else is refused, naming these). */
export const STREAM_PARAMETERS = ['since', 'host', 'tag', 'types', 'method', 'outcome', 'until', 'mode', 'spam'] as const;

/** An event ready to send: its position, what filters look at, and its frame (formatted once for all clients). */
export interface StreamEvent {
  pos: number;
  type: EventType;
  /** The weblog's host name, lower case (for `?host=`). */
  readonly host: string;
  /** The ping's tags, lower case (for `?tag=`). */
  tags: string[];
  /** How the ping arrived (`ping` events; null on `verified`). */
  method: string | null;
  /** The verification's outcome (`verified` events; null on `ping`). */
  outcome: string | null;
  /** The weblog is held as spam (SPAM_FILTER=hold). */
  held: boolean;
  frame: string;
}

export interface StreamFilter {
  /** Any of these hosts and their subdomains (null: any host). */
  hosts: readonly string[] | null;
  /** Any of these tags, lower case (null: any). */
  tags: readonly string[] | null;
  /** `ping` events with one of these methods (null: any); `verified` events carry no method and pass. */
  methods: ReadonlySet<string> | null;
  /** `verified` events with one of these outcomes (null: any); `ping` events carry no outcome and pass. */
  outcomes: ReadonlySet<string> | null;
  types: ReadonlySet<EventType>;
  /** `?spam=include`: events of weblogs held as spam too (otherwise they are not sent). */
  spam: boolean;
}

/** No filter: every event (but those of weblogs held as spam, as without `?spam=include`). */
export const ALL_EVENTS: StreamFilter = {
  hosts: null,
  tags: null,
  methods: null,
  outcomes: null,
  types: new Set(EVENT_TYPES),
  spam: false,
};

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
 * never splits), `id` the position a reconnecting client names in Last-Event-ID. A `ping` event read from
 * the database comes with its frame written there (event-repository.ts's pingFrame, the same bytes).
 */
export function toStreamEvent(r: EventRow): StreamEvent {
  return new FormattedEvent(
    r.pos,
    r.type,
    r.url,
    r.tags === null ? [] : r.tags.map((t) => t.toLowerCase()),
    r.type === 'ping' ? r.method : null,
    r.type === 'verified' ? r.outcome : null,
    r.held,
    r.frame ?? formatFrame(r),
  );
}

/** A frame formatted here from the row's fields (`verified` events; the reference pingFrame is tested against). */
export function formatFrame(r: EventRow): string {
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
          receivedAt: r.receivedAt?.toISOString() ?? null,
          ...(r.held ? { held: true } : {}),
        }
      : { id: r.pingId, url: r.url, outcome: r.outcome, newItems: r.newItems ?? [], ...(r.held ? { held: true } : {}) };
  return `id: ${r.pos}\nevent: ${r.type}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * A StreamEvent whose host is parsed only when a filter asks for it: parsing the URL was ~1.5 µs of the
 * ~13 µs of pingd CPU a replayed event cost (1M-ping replay bench), and most connections filter on no host.
 */
class FormattedEvent implements StreamEvent {
  private parsedHost: string | undefined;

  constructor(
    readonly pos: number,
    readonly type: EventType,
    private readonly url: string,
    readonly tags: string[],
    readonly method: string | null,
    readonly outcome: string | null,
    readonly held: boolean,
    readonly frame: string,
  ) {}

  get host(): string {
    this.parsedHost ??= eventHost(this.url);
    return this.parsedHost;
  }
}

/**
 * Sent first when the client's resume point cannot be honoured as asked. `pruned`: it is older than what
 * retention keeps; the stream replays from the oldest event still kept, so only what was deleted is lost
 * (the AT Protocol relay's OutdatedCursor). `unknown`: newer than any event (another server's id); the
 * stream continues with new events. Its id is where the stream continues, so a later reconnect resumes from
 * there instead of being reset again.
 */
export function resetFrame(continueAt: number, asked: number, reason: 'pruned' | 'unknown', prunedThrough: number): string {
  const message =
    reason === 'pruned'
      ? `Events ${asked + 1}–${prunedThrough} were deleted by retention; continuing from the oldest event still kept.`
      : `Event ${asked} is not one this server has sent; continuing with new events.`;
  return `id: ${continueAt}\nevent: reset\ndata: ${JSON.stringify({ reason, lastEventId: asked, continueAt, message })}\n\n`;
}

/**
 * End of stored events (Nostr's EOSE): the replay has reached `position`, what follows is live. Its id
 * moves the client's resume point there, past the events its filter skipped.
 */
export const liveFrame = (position: number): string => `id: ${position}\nevent: live\ndata: ${JSON.stringify({ position })}\n\n`;

/**
 * Cursor advance: a block with an id and no data. An EventSource sets its last event id from it without
 * dispatching anything (HTML, "Server-sent events", dispatch: the buffer is set before the empty-data
 * return), so a filtered stream that sees nothing for hours still reconnects from near now.
 */
export const cursorFrame = (position: number): string => `id: ${position}\n\n`;

/** Tells EventSource clients how long to wait before reconnecting. */
export const retryFrame = (ms: number): string => `retry: ${ms}\n\n`;

export function matches(f: StreamFilter, e: StreamEvent): boolean {
  if (!f.types.has(e.type)) return false;
  if (e.held && !f.spam) return false;
  if (f.hosts !== null && !f.hosts.some((h) => e.host === h || e.host.endsWith(`.${h}`))) return false;
  if (f.tags !== null && !f.tags.some((t) => e.tags.includes(t))) return false;
  if (f.methods !== null && e.type === 'ping' && !f.methods.has(e.method ?? '')) return false;
  if (f.outcomes !== null && e.type === 'verified' && !f.outcomes.has(e.outcome ?? '')) return false;
  return true;
}

/** The query as the route's schema lets it through: a repeated parameter is an array. */
export type StreamQuery = Record<string, string | string[] | undefined>;

/** Where a stream starts: after a position, or at the first event at or after a time. */
export type ResumePoint = { at: 'position'; pos: number; header: boolean } | { at: 'time'; time: Date };

export interface StreamRequestOk {
  ok: true;
  /** null: live from now. */
  from: ResumePoint | null;
  filter: StreamFilter;
  /** `?until=live` / `?mode=replay`: the stored events, the `live` marker, then the end. */
  replayOnly: boolean;
}
export type StreamRequest = StreamRequestOk | { ok: false; message: string };

/** Positions are bigints in the database; a resume point beyond this is not one we sent. */
const MAX_ID_DIGITS = 15;
const HOST = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;
/** RFC 3339 §5.6 date-time (a time zone is required: a bare local time means nothing to a server). */
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})$/;

/** A Last-Event-ID or since= that names a position: a decimal number of at most MAX_ID_DIGITS digits. */
export function position(raw: string): number | null {
  const v = raw.trim();
  return v.length <= MAX_ID_DIGITS && /^\d+$/.test(v) ? Number(v) : null;
}

/** The values of a parameter, each comma-separated list split too, blanks dropped. */
function values(v: string | string[] | undefined): string[] | null {
  if (v === undefined) return null;
  return (Array.isArray(v) ? v : [v])
    .flatMap((x) => x.split(','))
    .map((x) => x.trim())
    .filter((x) => x !== '');
}

function one(q: StreamQuery, name: string): string | undefined {
  const v = q[name];
  return Array.isArray(v) ? v[v.length - 1] : v;
}

const list = (xs: readonly string[]) => xs.join(', ');

/**
 * Where to start, what to send, and whether to stop at the end of the stored events. Last-Event-ID wins
 * over `?since=`: an EventSource that was opened with `?since=` keeps that URL on every reconnect and names
 * its newer position in the header. Within a filter the values are alternatives (OR); across filters all
 * must hold (AND).
 */
export function parseStreamRequest(q: StreamQuery, lastEventId: string | undefined): StreamRequest {
  const unknown = Object.keys(q).filter((k) => !(STREAM_PARAMETERS as readonly string[]).includes(k));
  if (unknown.length > 0)
    return {
      ok: false,
      message: `Unknown parameter ${unknown.map((k) => JSON.stringify(k)).join(', ')}; /stream takes ${list(STREAM_PARAMETERS)}.`,
    };

  let from: ResumePoint | null = null;
  const since = one(q, 'since');
  if (lastEventId !== undefined && lastEventId.trim() !== '') {
    const pos = position(lastEventId);
    if (pos === null) return { ok: false, message: 'Last-Event-ID must be the id of an event this stream sent (a decimal number).' };
    from = { at: 'position', pos, header: true };
  } else if (since !== undefined) {
    const pos = position(since);
    if (pos !== null) from = { at: 'position', pos, header: false };
    else {
      const time = RFC3339.test(since.trim()) ? new Date(since.trim()) : null;
      if (time === null || Number.isNaN(time.getTime()))
        return {
          ok: false,
          message:
            'since must be the id of an event this stream sent (a decimal number; 0 = everything still kept) or an RFC 3339 time such as 2026-11-23T02:10:04Z.',
        };
      from = { at: 'time', time };
    }
  }

  let hosts: string[] | null = null;
  const namedHosts = values(q.host);
  if (namedHosts !== null) {
    if (namedHosts.length > FILTER_CAPS.host) return { ok: false, message: `host may be given at most ${FILTER_CAPS.host} times.` };
    hosts = [];
    for (const raw of namedHosts) {
      let h = raw.toLowerCase().replace(/\.$/, '');
      try {
        // An internationalised name is matched in its ASCII form, as the weblog URLs are stored.
        if (/[^\x00-\x7f]/.test(h)) h = new URL(`http://${h}/`).hostname;
      } catch {
        /* refused below */
      }
      if (!HOST.test(h))
        return { ok: false, message: 'host must be a domain name such as example.com (it matches that host and its subdomains).' };
      if (!hosts.includes(h)) hosts.push(h);
    }
    if (hosts.length === 0) return { ok: false, message: 'host must not be empty.' };
  }

  let tags: string[] | null = null;
  const namedTags = values(q.tag);
  if (namedTags !== null) {
    if (namedTags.length > FILTER_CAPS.tag) return { ok: false, message: `tag may be given at most ${FILTER_CAPS.tag} times.` };
    tags = [...new Set(namedTags.map((t) => t.toLowerCase()))];
    if (tags.length === 0) return { ok: false, message: 'tag must not be empty.' };
  }

  const set = <T extends string>(name: string, allowed: readonly T[]): { ok: true; v: Set<T> | null } | { ok: false; message: string } => {
    const named = values(q[name]);
    if (named === null) return { ok: true, v: null };
    const bad = named.filter((x) => !(allowed as readonly string[]).includes(x));
    if (named.length === 0 || bad.length > 0) return { ok: false, message: `${name} must be one or more of ${list(allowed)}.` };
    return { ok: true, v: new Set(named as T[]) };
  };
  const types = set('types', EVENT_TYPES);
  if (!types.ok) return types;
  const methods = set('method', STREAM_METHODS);
  if (!methods.ok) return methods;
  const outcomes = set('outcome', STREAM_OUTCOMES);
  if (!outcomes.ok) return outcomes;

  const until = one(q, 'until');
  const mode = one(q, 'mode');
  if (until !== undefined && until !== 'live') return { ok: false, message: 'until must be live (the stored events, then the end).' };
  if (mode !== undefined && mode !== 'replay' && mode !== 'live')
    return { ok: false, message: 'mode must be replay (the stored events, then the end) or live (the default).' };
  const replayOnly = until === 'live' || mode === 'replay';
  const spam = one(q, 'spam');
  if (spam !== undefined && spam !== 'include' && spam !== 'exclude')
    return { ok: false, message: 'spam must be include (events of weblogs held as spam too) or exclude (the default).' };
  if (replayOnly && from === null) return { ok: false, message: 'A replay (until=live or mode=replay) needs since or Last-Event-ID.' };

  return {
    ok: true,
    from,
    filter: { hosts, tags, methods: methods.v, outcomes: outcomes.v, types: types.v ?? new Set(EVENT_TYPES), spam: spam === 'include' },
    replayOnly,
  };
}
