// Owns who may use the operator API: a request that came in over the server's admin socket (pingd.sock in
// DATA_DIR, whose file permissions are the authorization), or one over HTTP with `Authorization: Bearer
// <ADMIN_TOKEN>`, compared in constant time. One rule for /api/admin/* and every other operator-only route.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ERROR_STATUS } from './errors.js';

/**
 * Requests the admin socket's server handed to the app. Marked by that server rather than read off the
 * connection: a Unix-socket connection has no remoteAddress, but neither has a TCP one whose peer already
 * reset it, and a TCP request must never pass for a local one.
 */
const overAdminSocket = new WeakSet<IncomingMessage>();

/** For the admin socket's server only: this request came over the socket, so it is the operator's. */
export function trustAsAdmin(req: IncomingMessage): void {
  overAdminSocket.add(req);
}

/** The 401 answers' messages (tests compare them whole). */
export const ADMIN_REFUSALS = {
  off: 'The operator API over HTTP is off: ADMIN_TOKEN is not set. Set it and send "Authorization: Bearer <token>", or use the socket pingd.sock in DATA_DIR.',
  denied: 'This needs ADMIN_TOKEN: send "Authorization: Bearer <token>".',
} as const;

const sha256 = (s: string) => createHash('sha256').update(s).digest();

/**
 * The onRequest hook of an operator-only route: passes a request over the admin socket or with the right
 * bearer token, answers anything else 401 `{"error":"ADMIN_UNAUTHORIZED","message":…}`. Both sides are
 * hashed first, so the comparison takes the same time whatever the length or content of a guess.
 */
export function adminOnly(token: string | undefined): (req: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined> {
  const expected = token ? sha256(token) : undefined;
  return async function adminOnly(req, reply) {
    if (overAdminSocket.has(req.raw)) return undefined;
    let message: string = ADMIN_REFUSALS.off;
    if (expected) {
      const m = /^Bearer\s+(.+?)\s*$/i.exec(req.headers.authorization ?? '');
      if (m !== null && timingSafeEqual(sha256(m[1]), expected)) return undefined;
      message = ADMIN_REFUSALS.denied;
    }
    return reply
      .code(ERROR_STATUS.ADMIN_UNAUTHORIZED)
      .header('www-authenticate', 'Bearer realm="pingd admin"')
      .header('cache-control', 'no-store')
      .send({ error: 'ADMIN_UNAUTHORIZED', message });
  };
}
