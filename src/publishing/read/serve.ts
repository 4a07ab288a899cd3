// Owns answering GET/HEAD for published documents (RFC 9110/9111): validators, conditional requests,
// pre-compressed codings chosen by Accept-Encoding, RFC 3229 `feed` deltas (226 IM Used) and the
// cache-friendly `?since=` cursor. The same handler serves every document; only its policy differs.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { decide, etagFor, negotiateEncoding, parseIfNoneMatch, parseToken, type RenderingRef } from './conditional.js';
import type { Encoding } from '../codec.js';
import type { DeltaCut, RenderingMeta } from '../rendering-store.js';
import type { Reader } from './reader.js';

export const IMMUTABLE = 'public, max-age=31536000, immutable';

export interface ServePolicy {
  /** Metrics label. */
  document: string;
  /** RFC 3229 feed deltas and `?since=`. */
  deltas: boolean;
  /** Cache-Control of full responses (the 226 is always `no-store, im`). */
  cacheControl(meta: RenderingMeta): string;
  /** What to answer when nothing is rendered at the path yet. */
  missing: { status: 404 | 503; message: string; retryAfterSec?: number };
  /** The Link header of every answer with the document's validators (WebSub's rel=hub and rel=self). */
  links?(req: FastifyRequest): string;
}

export interface ResponseSink {
  (document: string, status: number, bytes: number): void;
}

const CONTENT_ENCODING: Record<Encoding, string | undefined> = { identity: undefined, gzip: 'gzip', br: 'br' };

type Query = Record<string, string | string[] | undefined>;

// A rendering's validator strings, made once per rendering rather than per request (a rendering is served
// thousands of times; formatting its date and ETags was a visible share of a 304's cost in a profile).
const validatorCache = new WeakMap<RenderingMeta, { etag: Record<Encoding, string>; lastModified: string }>();

function validatorsOf(meta: RenderingMeta): { etag: Record<Encoding, string>; lastModified: string } {
  let v = validatorCache.get(meta);
  if (!v) {
    const ref: RenderingRef = { id: meta.id, cursorUs: meta.cursorUs };
    v = { etag: { identity: etagFor(ref, 'identity'), gzip: etagFor(ref, 'gzip'), br: etagFor(ref, 'br') }, lastModified: new Date(meta.updatedMs).toUTCString() };
    validatorCache.set(meta, v);
  }
  return v;
}

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

export async function serveDocument(reader: Reader, path: string, policy: ServePolicy, req: FastifyRequest, reply: FastifyReply, record: ResponseSink): Promise<FastifyReply> {
  const meta = await reader.current(path);
  if (!meta) {
    record(policy.document, policy.missing.status, 0);
    reply.code(policy.missing.status).header('content-type', 'text/plain; charset=utf-8').header('cache-control', 'no-store');
    if (policy.missing.retryAfterSec) reply.header('retry-after', String(policy.missing.retryAfterSec));
    return reply.send(`${policy.missing.message}\n`);
  }
  const enc = negotiateEncoding(header(req, 'accept-encoding'));
  const current: RenderingRef = { id: meta.id, cursorUs: meta.cursorUs };
  const head = req.method === 'HEAD';
  const q = (req.query ?? {}) as Query;
  const sinceRaw = policy.deltas ? q.since : undefined;

  const v = validatorsOf(meta);
  const validators = (r: FastifyReply) => r.header('etag', v.etag[enc]).header('last-modified', v.lastModified);
  if (policy.links) reply.header('link', policy.links(req));

  const sendBody = async (status: number, length: number, load: () => Promise<Buffer | NodeJS.ReadableStream>) => {
    reply.code(status).header('content-type', meta.contentType).header('content-length', String(length));
    const ce = CONTENT_ENCODING[enc];
    if (ce) reply.header('content-encoding', ce);
    record(policy.document, status, head ? 0 : length);
    if (head) return reply.send();
    return reply.send(await load());
  };

  const notModified = () => {
    record(policy.document, 304, 0);
    return reply.code(304).send();
  };

  // ------------------------------------------------------------------------------------------------------
  // GET /changes.xml?since=<cursor>: the delta as an ordinary, cacheable 200 (its own URL per cursor).
  if (sinceRaw !== undefined) {
    const token = Array.isArray(sinceRaw) ? sinceRaw[0] : sinceRaw;
    const base = parseToken(token ?? '');
    if (!base) {
      record(policy.document, 400, 0);
      reply.code(400).header('content-type', 'text/plain; charset=utf-8').header('cache-control', 'no-store');
      return reply.send('since must be a cursor taken from this document\'s ETag (the text between the quotes, without any "-gz"/"-br" suffix).\n');
    }
    validators(reply).header('cache-control', policy.cacheControl(meta)).header('vary', 'Accept-Encoding');
    const inm = parseIfNoneMatch(header(req, 'if-none-match'));
    if (inm && (inm.any || inm.refs.some((r) => r.id === current.id && r.cursorUs === current.cursorUs))) return notModified();
    const cut = await reader.deltaCut(meta, base.id, base.cursorUs);
    if (cut) return sendBody(200, reader.deltaLength(meta, cut, enc), () => reader.deltaBody(meta, cut, enc));
    // An unknown or too old cursor: the whole document (whose ETag gives the next cursor).
    return sendBody(200, reader.fullLength(meta, enc), () => reader.fullBody(meta, enc));
  }

  // ------------------------------------------------------------------------------------------------------
  validators(reply).header('vary', policy.deltas ? 'Accept-Encoding, A-IM' : 'Accept-Encoding');
  const d = decide({ ifNoneMatch: header(req, 'if-none-match'), ifModifiedSince: header(req, 'if-modified-since'), aIm: header(req, 'a-im') }, current, meta.updatedMs, policy.deltas);
  if (d.kind === 'not-modified') {
    reply.header('cache-control', policy.cacheControl(meta));
    return notModified();
  }
  if (d.kind === 'delta') {
    // The newest base the client named that we still know gives the smallest delta.
    let cut: DeltaCut | undefined;
    for (const b of [...d.bases].sort((x, y) => y.cursorUs - x.cursorUs)) {
      cut = await reader.deltaCut(meta, b.id, b.cursorUs);
      if (cut) break;
    }
    if (cut) {
      const found = cut;
      reply.header('cache-control', 'no-store, im').header('im', 'feed');
      return sendBody(226, reader.deltaLength(meta, found, enc), () => reader.deltaBody(meta, found, enc));
    }
  }
  reply.header('cache-control', policy.cacheControl(meta));
  return sendBody(200, reader.fullLength(meta, enc), () => reader.fullBody(meta, enc));
}
