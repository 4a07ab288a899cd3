// Owns the root error handler: every error no route answered becomes one JSON answer with its status and
// code, and a 5xx never sends its message (a driver's text, a path, a host): that goes to the log, under the
// request id the answer names. The protocol scopes (XML-RPC, RSS Ping, WebSub) format their own refusals.
import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';

/** What a client is told of a 5xx: the status's own meaning and what to do, never the error's text. */
const SERVER_SIDE: Record<number, string> = {
  503: 'The service cannot answer this request right now (its database or a queue is busy or down); try again shortly.',
};
const INTERNAL = 'The request failed on the server; the failure is logged under this request id.';

export interface ErrorAnswer {
  statusCode: number;
  code?: string;
  error: string;
  message: string;
  requestId?: string;
}

/** The answer for `err` (pure: the handler below logs and sends it). */
export function errorAnswer(err: Pick<FastifyError, 'message'> & { statusCode?: number; code?: string }, requestId: string): ErrorAnswer {
  const status = typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
  const code = typeof err.code === 'string' && err.code !== '' ? err.code : undefined;
  if (status < 500) return { statusCode: status, ...(code ? { code } : {}), error: STATUS_CODES[status] ?? 'Error', message: err.message };
  return {
    statusCode: status,
    ...(code ? { code } : {}),
    error: STATUS_CODES[status] ?? 'Error',
    message: SERVER_SIDE[status] ?? INTERNAL,
    requestId,
  };
}

export function rootErrorHandler(err: FastifyError, req: FastifyRequest, reply: FastifyReply): FastifyReply {
  const answer = errorAnswer(err, String(req.id));
  if (answer.statusCode >= 500) req.log.error({ err }, 'request failed');
  if (answer.statusCode === 503) reply.header('retry-after', '10');
  return reply.code(answer.statusCode).send(answer);
}
