// Owns request ids: every request gets one, logged as `reqId` on each of its log lines and returned in the
// X-Request-Id response header, so an operator can find the lines of one client's complaint.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export const REQUEST_ID_HEADER = 'x-request-id';

// What a proxy's id may look like: short, printable, no spaces (it is copied into every log line).
const SAFE_ID = /^[\w.:@/+=-]{1,128}$/;

/**
 * Fastify's default ids ("req-1") restart at 1 in every process, so lines of several instances collide.
 * A UUID does not. Behind our own proxy (TRUST_PROXY) the proxy's X-Request-Id is kept so its access log
 * and ours share the id; from anyone else the header is ignored.
 */
export function requestIdGenerator(trustProxy: boolean): (req: IncomingMessage) => string {
  return (req) => {
    if (trustProxy) {
      const h = req.headers[REQUEST_ID_HEADER];
      if (typeof h === 'string' && SAFE_ID.test(h)) return h;
    }
    return randomUUID();
  };
}
