// Owns GET /stream: a request's resume point, filters and mode checked (400 with the reason), the refusals
// that ask a client to come back (the connection cap, the database away, shutdown: a 200 stream that ends
// at once), the SSE response (@fastify/sse: Accept negotiation, headers, the keep-alive comment, the
// connection's lifecycle), its place among STREAM_MAX_CLIENTS from admission to close (the refusal beyond
// it written before Fastify, an early answer), and its handover to the hub; and GET /stream/info, the
// stream's published limits.
import type { FastifyInstance, FastifyPluginAsync, FastifyReply } from 'fastify';
import sseModule, { type SSEPluginOptions } from '@fastify/sse';
import { Type, type Static } from '@sinclair/typebox';
import { parseStreamRequest, position, retryFrame, type StreamQuery } from './events.js';
import type { Start, StreamHub } from './hub.js';
import { Subscriber } from './subscriber.js';
import { ResponseSink } from './sink.js';
import { StreamInfo, streamInfo, type StreamSettings } from './info.js';
import type { EarlyAnswer } from '../../platform/http-server.js';

// The package's module.exports is the fastify-plugin-wrapped plugin (its `default` property is the bare,
// encapsulated one, whose onRoute hook would not see our route); its typings describe the namespace.
const fastifySse = sseModule as unknown as FastifyPluginAsync<SSEPluginOptions>;

/**
 * A parameter that may be repeated (`?host=a&host=b`; Fastify's query parser makes an array of it, and its
 * validator, coercing to arrays, makes one of a single value too). The caps are events.ts FILTER_CAPS,
 * refused there with their own message; the request line's size bounds the rest.
 */
const Many = Type.Optional(Type.Array(Type.String({ maxLength: 4096 })));
/** Parameters not named here are kept (additionalProperties) for parseStreamRequest to refuse by name. */
const Query = Type.Object({
  since: Type.Optional(Type.String({ maxLength: 64 })),
  host: Many,
  tag: Many,
  types: Many,
  method: Many,
  outcome: Many,
  until: Type.Optional(Type.String({ maxLength: 16 })),
  mode: Type.Optional(Type.String({ maxLength: 16 })),
});
type Query = Static<typeof Query>;

export interface StreamRoutesOptions {
  hub: StreamHub;
  settings: StreamSettings;
  /** The open connections, ended on shutdown. */
  connections: Set<ResponseSink>;
  isClosing(): boolean;
  onRefused(): void;
}

/**
 * Why a connection was asked to come back later (the `X-Pingd-Refused` header, `reason` in the event), and
 * how long to wait. The cap's delay is a few reconnection delays, so a crowd does not come back at once.
 */
export type StreamRefusal = 'shutting_down' | 'database_unavailable' | 'max_clients';
export const STREAM_REFUSAL_RETRY_MS: Readonly<Record<StreamRefusal, number>> = {
  shutting_down: 1000,
  database_unavailable: 5000,
  max_clients: 10_000,
};

/**
 * The body of a refusal. The WHATWG EventSource (browsers, npm `eventsource`) treats any answer but a 200
 * `text/event-stream` as final (HTML, "Server-sent events", processing model: it "fails the connection",
 * readyState CLOSED) and ignores Retry-After; a 200 stream that ends is a dropped connection, retried after
 * its `retry:`. So: the delay, the reason as a comment (for curl), and an `event: refused` for pages that
 * show it. The event carries back the client's own Last-Event-ID (already checked to be a decimal number),
 * so dispatching it never moves the client's resume point, however a client reads the spec's "last event
 * ID buffer".
 */
export function refusalFrame(reason: StreamRefusal, message: string, lastEventId?: string): string {
  const retryMs = STREAM_REFUSAL_RETRY_MS[reason];
  const id = lastEventId ? `id: ${lastEventId}\n` : '';
  return `retry: ${retryMs}\n: refused: ${message}\n\n${id}event: refused\ndata: ${JSON.stringify({ reason, message, retryMs })}\n\n`;
}

/** A client error: final, with the reason as text. */
function reject(reply: FastifyReply, status: number, message: string): FastifyReply {
  return reply.code(status).header('content-type', 'text/plain; charset=utf-8').header('cache-control', 'no-store').send(`${message}\n`);
}

/**
 * Come back later: a 200 event stream that ends at once (see refusalFrame). Retry-After (seconds) and
 * X-Pingd-Refused carry the same for clients that are not an EventSource.
 */
function refusalHead(reason: StreamRefusal): Record<string, string> {
  return {
    'content-type': 'text/event-stream',
    'cache-control': 'no-store',
    'retry-after': String(Math.ceil(STREAM_REFUSAL_RETRY_MS[reason] / 1000)),
    'x-pingd-refused': reason,
    // The client comes back after seconds on a new connection (an EventSource always does): the refused
    // one is closed rather than kept idle for the keep-alive timeout (65 s), 3,000 of them in a burst.
    connection: 'close',
  };
}

function refuse(reply: FastifyReply, reason: StreamRefusal, message: string, lastEventId: string | undefined): FastifyReply {
  return reply
    .code(200)
    .headers(refusalHead(reason))
    .send(refusalFrame(reason, message, lastEventId));
}

/**
 * The refusal beyond STREAM_MAX_CLIENTS, written by the HTTP server before Fastify sees the request (an early
 * answer): a burst of 3,000 connections over the cap held intake's canary ping up to 0.48 s at p99, each
 * refusal costing ~0.36 ms of the event loop, most of it Fastify's request, routing and the SSE plugin
 * (bench/results/attacks.md, A3). The same bytes and head; what it cannot answer the same way (a client that
 * refuses event streams, a Last-Event-ID that is no event's id: 406 and 400) goes on to the route. A full
 * server refuses before reading the query: its parameters are checked when a place is free.
 */
function earlyRefusal(hub: StreamHub, settings: StreamSettings, onRefused: () => void): EarlyAnswer {
  const message = `This server already serves ${settings.maxClients} streams; reconnect later.`;
  return {
    decide(req) {
      if (req.method !== 'GET' || hub.size < settings.maxClients) return null;
      const accept = req.headers.accept;
      if (accept !== undefined && !accept.includes('text/event-stream') && !accept.includes('*/*')) return null;
      const header = req.headers['last-event-id'];
      const lastEventId = (Array.isArray(header) ? header[0] : header)?.trim() || undefined;
      if (lastEventId !== undefined && position(lastEventId) === null) return null;
      onRefused();
      const body = refusalFrame('max_clients', message, lastEventId);
      return { status: 200, head: { ...refusalHead('max_clients'), 'content-length': String(Buffer.byteLength(body)) }, body };
    },
  };
}

export async function streamRoutes(app: FastifyInstance, opts: StreamRoutesOptions): Promise<void> {
  const { hub, settings } = opts;
  // The plugin's own keep-alive comment, every STREAM_HEARTBEAT_MS (its 30 s default is longer than many
  // proxies' idle timeouts).
  await app.register(fastifySse, { heartbeatInterval: settings.heartbeatMs });
  app.earlyAnswers.addPath('/stream', {
    ...earlyRefusal(hub, settings, opts.onRefused),
    answered: (_req, status, ms) => app.httpLatency('/stream', 'GET', status, ms),
  });

  app.get('/stream/info', { schema: { response: { 200: StreamInfo } } }, async (_req, reply) => {
    const ends = await hub.ends();
    return reply.header('cache-control', 'no-store').send(streamInfo(settings, ends, { open: hub.size, replaying: hub.replaying }));
  });

  app.get<{ Querystring: Query }>('/stream', { sse: 'only', schema: { querystring: Query } }, async (req, reply) => {
    const header = req.headers['last-event-id'];
    const lastEventId = (Array.isArray(header) ? header[0] : header)?.trim() || undefined;
    const parsed = parseStreamRequest(req.query as StreamQuery, lastEventId);
    if (!parsed.ok) return reject(reply, 400, parsed.message);
    if (opts.isClosing()) return refuse(reply, 'shutting_down', 'The server is shutting down; reconnect in a moment.', lastEventId);
    // The place is taken before anything here yields, and given back when the response closes, whichever
    // way: refused below, the client gone, cut off as too slow, ended on shutdown.
    const place = hub.admit(settings.maxClients);
    if (place === null) {
      opts.onRefused();
      return refuse(reply, 'max_clients', `This server already serves ${settings.maxClients} streams; reconnect later.`, lastEventId);
    }
    reply.raw.once('close', place);

    let start: Start;
    try {
      start = await hub.start(parsed.from);
    } catch (err) {
      place();
      req.log.warn({ err: { message: (err as Error).message } }, 'stream start failed');
      return refuse(reply, 'database_unavailable', 'The database is unavailable; reconnect in a moment.', lastEventId);
    }
    // The client went away while the stream started: nothing to serve (its close has given the place back).
    if (reply.raw.destroyed) return reply;
    // A replay-only EventSource reconnects after the end like after any drop; once it has everything, 204
    // (the one answer that stops an EventSource on purpose: HTML, "Server-sent events") ends it for good.
    const from = parsed.from;
    if (parsed.replayOnly && from?.at === 'position' && from.header && start.reset === undefined && start.from >= start.latest) {
      place();
      return reply.code(204).header('cache-control', 'no-store').send();
    }
    reply.sse.keepAlive();
    // Events must leave as they happen: nothing here compresses or buffers the response.
    reply.sse.sendHeaders(200);
    const sink = new ResponseSink(reply.raw, settings.bufferBytes);
    const sub = new Subscriber(parsed.filter, sink, {
      announce: parsed.from !== null,
      replayOnly: parsed.replayOnly,
      cursorMs: settings.cursorMs,
    });
    opts.connections.add(sink);
    reply.sse.onClose(() => {
      hub.detach(sub);
      opts.connections.delete(sink);
    });
    sink.write(retryFrame(settings.retryMs) + (start.reset ?? ''), true);
    try {
      await hub.attach(sub, start);
    } catch (err) {
      // The database failed mid-replay: end the response; the client reconnects with its Last-Event-ID.
      req.log.warn({ err: { message: (err as Error).message } }, 'stream replay failed');
      sink.end();
    }
  });
}
