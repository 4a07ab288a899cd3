// Owns GET /stream: a request's resume point and filters checked (400 with the reason), the connection cap
// (503 with Retry-After), the SSE response (@fastify/sse: Accept negotiation, headers, the keep-alive
// comment, the connection's lifecycle), and its handover to the hub.
import type { FastifyInstance, FastifyPluginAsync, FastifyReply } from 'fastify';
import sseModule, { type SSEPluginOptions } from '@fastify/sse';
import { Type, type Static } from '@sinclair/typebox';
import { parseStreamRequest, retryFrame } from './events.js';
import { Subscriber, type Start, type StreamHub } from './hub.js';
import { ResponseSink } from './sink.js';

// The package's module.exports is the fastify-plugin-wrapped plugin (its `default` property is the bare,
// encapsulated one, whose onRoute hook would not see our route); its typings describe the namespace.
const fastifySse = sseModule as unknown as FastifyPluginAsync<SSEPluginOptions>;

const Query = Type.Object({
  since: Type.Optional(Type.String({ maxLength: 64 })),
  host: Type.Optional(Type.String({ maxLength: 300 })),
  tag: Type.Optional(Type.String({ maxLength: 200 })),
  types: Type.Optional(Type.String({ maxLength: 100 })),
});
type Query = Static<typeof Query>;

export interface StreamRoutesOptions {
  hub: StreamHub;
  maxClients: number;
  bufferBytes: number;
  heartbeatMs: number;
  retryMs: number;
  /** The open connections, ended on shutdown. */
  connections: Set<ResponseSink>;
  isClosing(): boolean;
  onOverflow(): void;
  onRefused(): void;
}

/** Retry-After of a refused connection: a few reconnection delays, so a crowd does not come back at once. */
const REFUSED_RETRY_SEC = 10;

function refuse(reply: FastifyReply, status: number, message: string, retryAfterSec?: number): FastifyReply {
  reply.code(status).header('content-type', 'text/plain; charset=utf-8').header('cache-control', 'no-store');
  if (retryAfterSec) reply.header('retry-after', String(retryAfterSec));
  return reply.send(`${message}\n`);
}

export async function streamRoutes(app: FastifyInstance, opts: StreamRoutesOptions): Promise<void> {
  const { hub } = opts;
  // The plugin's own keep-alive comment, every STREAM_HEARTBEAT_MS (its 30 s default is longer than many
  // proxies' idle timeouts).
  await app.register(fastifySse, { heartbeatInterval: opts.heartbeatMs });

  app.get<{ Querystring: Query }>('/stream', { sse: 'only', schema: { querystring: Query } }, async (req, reply) => {
    const lastEventId = req.headers['last-event-id'];
    const parsed = parseStreamRequest(req.query, Array.isArray(lastEventId) ? lastEventId[0] : lastEventId);
    if (!parsed.ok) return refuse(reply, 400, parsed.message);
    if (opts.isClosing()) return refuse(reply, 503, 'The server is shutting down; reconnect in a moment.', 1);
    if (hub.size >= opts.maxClients) {
      opts.onRefused();
      return refuse(reply, 503, `This server already serves ${opts.maxClients} streams; reconnect later.`, REFUSED_RETRY_SEC);
    }

    let start: Start;
    try {
      start = await hub.start(parsed.from);
    } catch (err) {
      req.log.warn({ err: { message: (err as Error).message } }, 'stream start failed');
      return refuse(reply, 503, 'The database is unavailable; reconnect in a moment.', 5);
    }
    reply.sse.keepAlive();
    // Events must leave as they happen: nothing here compresses or buffers the response.
    reply.sse.sendHeaders(200);
    const sink = new ResponseSink(reply.raw, opts.bufferBytes, opts.onOverflow);
    const sub = new Subscriber(parsed.filter, sink);
    opts.connections.add(sink);
    reply.sse.onClose(() => {
      hub.detach(sub);
      opts.connections.delete(sink);
    });
    sink.write(retryFrame(opts.retryMs) + (start.reset ?? ''));
    try {
      await hub.attach(sub, start.from);
    } catch (err) {
      // The database failed mid-replay: end the response; the client reconnects with its Last-Event-ID.
      req.log.warn({ err: { message: (err as Error).message } }, 'stream replay failed');
      sink.end();
    }
  });
}
