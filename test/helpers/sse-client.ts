// Test client for Server-Sent Events: a raw HTTP reader that parses the stream the way the WHATWG HTML
// "Server-sent events" section tells a browser's EventSource to (fields id/event/data/retry, comments,
// blank line dispatches; the last event id survives events without one and is set by a block with an id and
// no data, which dispatches nothing), and can reconnect with it.
import http from 'node:http';
import { waitFor } from './wait.js';

export interface SseEvent {
  id: string;
  event: string;
  data: string;
}

export interface SseConnection {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The events dispatched, but the end-of-replay markers (`event: live`, in `live`). */
  events: SseEvent[];
  /** The `event: live` markers. */
  live: SseEvent[];
  /** Every block that set the last event id without an event (cursor advances), by id. */
  cursors: string[];
  comments: string[];
  retry: number | null;
  /** The id of the last event received (what EventSource sends as Last-Event-ID). */
  lastEventId: string;
  ended: boolean;
  /** Resolves once the response has ended (or the connection dropped). */
  finished: Promise<void>;
  /** Resolves when `n` events have arrived (rejects after timeoutMs with what arrived). */
  waitFor(n: number, timeoutMs?: number): Promise<SseEvent[]>;
  waitUntil(pred: (c: SseConnection) => boolean, timeoutMs?: number, what?: string): Promise<void>;
  /** The body of a non-200 answer. */
  body: string;
  close(): void;
}

export function openStream(url: string, headers: Record<string, string> = {}): Promise<SseConnection> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => {
      let finish!: () => void;
      const finished = new Promise<void>((r) => (finish = r));
      const c: SseConnection = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        events: [],
        live: [],
        cursors: [],
        comments: [],
        retry: null,
        lastEventId: headers['last-event-id'] ?? '',
        ended: false,
        finished,
        body: '',
        waitFor: (n, timeoutMs) => c.waitUntil((x) => x.events.length >= n, timeoutMs, `${n} events`).then(() => c.events.slice(0, n)),
        async waitUntil(pred, timeoutMs = 15_000, what = 'condition') {
          await waitFor(() => pred(c), {
            what: () => `${what}; have ${c.events.length} events, ended=${c.ended}`,
            timeoutMs,
            intervalMs: 10,
          });
        },
        close: () => {
          req.destroy();
          res.destroy();
        },
      };
      let buf = '';
      let id = c.lastEventId;
      let event = '';
      let data: string[] = [];
      let sawId = false;
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (c.status !== 200) {
          c.body += chunk;
          return;
        }
        buf += chunk;
        let nl: number;
        while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
          if (line === '') {
            // HTML, "Server-sent events", dispatch: the last event id is set first, even when no event follows.
            if (sawId && data.length === 0) c.cursors.push(id);
            c.lastEventId = id;
            if (data.length > 0) {
              const e = { id, event: event || 'message', data: data.join('\n') };
              (e.event === 'live' ? c.live : c.events).push(e);
            }
            sawId = false;
            event = '';
            data = [];
            continue;
          }
          if (line.startsWith(':')) {
            c.comments.push(line.slice(1).trim());
            continue;
          }
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let value = colon < 0 ? '' : line.slice(colon + 1);
          if (value.startsWith(' ')) value = value.slice(1);
          if (field === 'id') {
            id = value;
            sawId = true;
          } else if (field === 'event') event = value;
          else if (field === 'data') data.push(value);
          else if (field === 'retry' && /^\d+$/.test(value)) c.retry = Number(value);
        }
      });
      const end = () => {
        c.ended = true;
        finish();
      };
      res.on('end', end);
      res.on('close', end);
      res.on('error', end);
      resolve(c);
    });
    req.on('error', reject);
  });
}

export interface StreamFollower {
  /** Every connection answered, in order (the current one last). */
  connections: SseConnection[];
  /** Connection attempts that got no answer (refused, reset). */
  failedOpens: number;
  /** The events of every connection, in the order they arrived. */
  events(): SseEvent[];
  /** Ends the current connection as a dropped link would: the follower reconnects, as after any end. */
  drop(): void;
  /** Stops following. */
  close(): void;
}

/**
 * Follows a stream the way an EventSource does (HTML, "Server-sent events", processing model): when a
 * connection ends or cannot be made, it waits the reconnection time (the last `retry:` the server sent, 3 s
 * until then) and connects again with the last event id as Last-Event-ID. An answer other than a 200 stream
 * ends it for good. Resolves once the first attempt is over: answered (its start decided by the server), or failed.
 */
export async function followStream(url: string, headers: Record<string, string> = {}): Promise<StreamFollower> {
  let closed = false;
  let retryMs = 3000;
  let lastEventId = '';
  let wake: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  let first: (() => void) | undefined;
  const firstAnswer = new Promise<void>((r) => (first = r));
  const f: StreamFollower = {
    connections: [],
    failedOpens: 0,
    events: () => f.connections.flatMap((c) => c.events),
    drop: () => f.connections.at(-1)?.close(),
    close() {
      closed = true;
      clearTimeout(timer);
      wake?.();
      f.connections.at(-1)?.close();
    },
  };
  void (async () => {
    while (!closed) {
      try {
        const c = await openStream(url, lastEventId === '' ? headers : { ...headers, 'last-event-id': lastEventId });
        f.connections.push(c);
        first?.();
        if (closed) c.close();
        await c.finished;
        if (c.status !== 200) return;
        lastEventId = c.lastEventId;
        if (c.retry !== null) retryMs = c.retry;
      } catch {
        f.failedOpens++;
        first?.();
      }
      if (closed) return;
      await new Promise<void>((r) => {
        wake = r;
        timer = setTimeout(r, retryMs);
      });
    }
  })();
  await firstAnswer;
  return f;
}

/** The JSON data of the events of one type. */
export function dataOf<T = any>(events: SseEvent[], type = 'ping'): T[] {
  return events.filter((e) => e.event === type).map((e) => JSON.parse(e.data) as T);
}
