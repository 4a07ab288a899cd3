// Owns request ids: every request gets one, logged as `reqId` on each of its log lines and returned in the
// X-Request-Id response header, so an operator can find the lines of one client's complaint.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

export const REQUEST_ID_HEADER = 'x-request-id';

// What a proxy's id may look like: short, printable, no spaces (it is copied into every log line).
const SAFE_ID = /^[\w.:@/+=-]{1,128}$/;

/**
 * Ids of one process: 80 random bits drawn at start-up, then a counter. Fastify's default ids ("req-1")
 * restart at 1 in every process, so lines of several instances collided; a random prefix per process does
 * not (two instances share a prefix with probability ~n²/2^81). A randomUUID() per request cost ~1.5 µs of
 * a 304's CPU (bench/results/evidence/2026-11-23-wrk.md); this is a string concatenation. Shaped like a UUID
 * (36 characters, hex and dashes, 8-4-4-4-12; not an RFC 9562 UUID) so log tooling keeps its patterns:
 * the last group is the counter in hex, 2^48 requests before it wraps.
 */
export function requestIdSource(): () => string {
  const r = randomBytes(10).toString('hex');
  const prefix = `${r.slice(0, 8)}-${r.slice(8, 12)}-${r.slice(12, 16)}-${r.slice(16, 20)}-`;
  let n = 0;
  return () => {
    n = n >= 0xffffffffffff ? 1 : n + 1;
    return prefix + n.toString(16).padStart(12, '0');
  };
}

/**
 * Fastify's genReqId. Behind our own proxy (TRUST_PROXY) the proxy's X-Request-Id is kept so its access
 * log and ours share the id; from anyone else the header is ignored.
 */
export function requestIdGenerator(trustProxy: boolean, next: () => string = requestIdSource()): (req: IncomingMessage) => string {
  return (req) => {
    if (trustProxy) {
      const h = req.headers[REQUEST_ID_HEADER];
      if (typeof h === 'string' && SAFE_ID.test(h)) return h;
    }
    return next();
  };
}

/** The onRequest hook that answers the id (every route but the polled ones, which set it themselves). */
export function setRequestIdHeader(req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  reply.header(REQUEST_ID_HEADER, req.id);
  done();
}
