// Owns the answers Fastify gives before any route runs (a path segment too long for the router, a path that
// is not a valid URL): plain text with the request id, never an echo of the path (up to 16 kB of it).
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { REQUEST_ID_HEADER } from '../../platform/request-id.js';

const ANSWERS: Record<string, { status: number; message: string }> = {
  FST_ERR_MAX_PARAM_LENGTH: { status: 414, message: 'The request path is too long.' },
  FST_ERR_BAD_URL: { status: 400, message: 'The request path is not a valid URL.' },
};

export function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const a = ANSWERS[err.code] ?? {
    status: err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 400,
    message: 'The request cannot be routed.',
  };
  void reply.code(a.status).header('content-type', 'text/plain; charset=utf-8').header(REQUEST_ID_HEADER, req.id).send(`${a.message}\n`);
}
