// Owns what a client is told of an error no route answered: one decision (errorAnswer: a 4xx keeps its
// message, which is meant for the client; anything else is a 5xx that never sends its message, a driver's
// text, a path, a host) and its log (a 5xx, under the request id), made here once. The root handler sends it
// as JSON; the protocol scopes (XML-RPC, RSS Ping, rssCloud, WebSub) take the same decision through
// errorHandler() and only write it in their own form (a fault, a <result>, a line of text).
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

/** Sends the decision in one protocol's own form. */
export type ErrorFormat = (answer: ErrorAnswer, req: FastifyRequest, reply: FastifyReply) => FastifyReply;

/** An error handler that decides with errorAnswer, logs a 5xx, and leaves the wording to `format`. */
export function errorHandler(format: ErrorFormat): (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => FastifyReply {
  return (err, req, reply) => {
    const answer = errorAnswer(err, String(req.id));
    if (answer.statusCode >= 500) req.log.error({ err }, 'request failed');
    return format(answer, req, reply);
  };
}

export const rootErrorHandler = errorHandler((answer, _req, reply) => {
  if (answer.statusCode === 503) reply.header('retry-after', '10');
  return reply.code(answer.statusCode).send(answer);
});
