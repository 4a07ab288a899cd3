// Owns who may use the operator API: a request that came in over the server's admin socket (pingd.sock in
// DATA_DIR, whose file permissions are the authorization), or one over HTTP with `Authorization: Bearer
// <ADMIN_TOKEN>`, compared in constant time. One rule for /api/admin/* and every other operator-only route.
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ERROR_STATUS } from './errors.js';
import { bearerCheck } from './bearer.js';

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

/**
 * The onRequest hook of an operator-only route: passes a request over the admin socket or with the right
 * bearer token (platform/bearer.ts: linear, constant-time), answers anything else 401
 * `{"error":"ADMIN_UNAUTHORIZED","message":…}`.
 */
export function adminOnly(token: string | undefined): (req: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined> {
  const authorised = token ? bearerCheck(token) : undefined;
  return async function adminOnly(req, reply) {
    if (overAdminSocket.has(req.raw)) return undefined;
    let message: string = ADMIN_REFUSALS.off;
    if (authorised) {
      if (authorised(req.headers.authorization)) return undefined;
      message = ADMIN_REFUSALS.denied;
    }
    return reply
      .code(ERROR_STATUS.ADMIN_UNAUTHORIZED)
      .header('www-authenticate', 'Bearer realm="pingd admin"')
      .header('cache-control', 'no-store')
      .send({ error: 'ADMIN_UNAUTHORIZED', message });
  };
}
