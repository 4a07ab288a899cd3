// Owns the XML-RPC endpoint (POST /RPC2, /rpc2 and /): body bytes in, methodResponse out. Every answer is
// HTTP 200 (a refused ping is flerror 1, a bad call a <fault>), because WordPress reads a fault or a
// non-200 on extendedPing as "unsupported" and pings again.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../platform/config.js';
import { FAULT, XmlRpcFault, parseMethodCall } from './parse.js';
import { faultXml, pingResponseXml, responseXml } from './serialize.js';
import { pingFromCall, systemCall } from './methods.js';
import { THANKS } from '../ping/ping-service.js';
import { intakeRoute } from '../ping/plugin.js';
import { errorHandler } from '../../platform/error-handler.js';
import { RPC_PATHS } from '../../platform/public-url.js';

const XML_TYPE = 'text/xml; charset=utf-8';
// The success reply never varies: built once. A string, not a Buffer: Node writes a string body in one
// write with the head, a Buffer beside it (writev): a bare Node server sending this reply answered wrk
// (64 connections, 3 × 4 s each) at 44,100 requests/s as a string against 40,400 as a Buffer, here.
const THANKS_XML = pingResponseXml(false, THANKS);

function sendXml(reply: FastifyReply, body: string, status = 200): FastifyReply {
  return reply.code(status).header('content-type', XML_TYPE).send(body);
}

export default async function xmlrpcRoutes(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  // Clients send text/xml, application/xml, form types, or no Content-Type at all (Ghost, davexmlrpc):
  // take every body as bytes and decode it by its XML declaration ourselves.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: opts.config.BODY_LIMIT }, (_req, body, done) => done(null, body));

  // A client's error is a fault with its HTTP status; a failure of ours is a fault over HTTP 200, as an
  // XML-RPC server answers every call it read.
  app.setErrorHandler(
    errorHandler((a, _req, reply) => {
      if (a.statusCode >= 500) return sendXml(reply, faultXml(FAULT.INTERNAL_ERROR, 'Internal error; please try again later.'), 200);
      const msg = a.statusCode === 413 ? `Request body larger than ${opts.config.BODY_LIMIT} bytes.` : a.message;
      return sendXml(reply, faultXml(FAULT.INVALID_REQUEST, msg), a.statusCode);
    }),
  );

  const handler = async (req: FastifyRequest, reply: FastifyReply) => {
    let call;
    try {
      call = parseMethodCall(req.body as Buffer | undefined, req.headers['content-type']);
      if (call.methodName === 'weblogUpdates.ping' || call.methodName === 'weblogUpdates.extendedPing') {
        const raw = pingFromCall(call.methodName, call.params);
        raw.clientAddr = req.ip;
        raw.userAgent = req.headers['user-agent'] ?? null;
        const result = await app.pings.accept(raw);
        if (result.ok) return sendXml(reply, THANKS_XML);
        return sendXml(reply, pingResponseXml(true, result.message));
      }
      const extra = app.xmlrpcMethods.get(call.methodName);
      if (extra) return sendXml(reply, responseXml(await extra.call(call.params, req)));
      return sendXml(reply, responseXml(systemCall(call.methodName, call.params, app.xmlrpcMethods)));
    } catch (err) {
      if (err instanceof XmlRpcFault) return sendXml(reply, faultXml(err.faultCode, err.faultString));
      throw err;
    }
  };

  const timed = intakeRoute(app);
  for (const url of RPC_PATHS) app.post(url, timed, handler);
}
