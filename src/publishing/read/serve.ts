// Owns answering GET/HEAD for published documents (RFC 9110/9111): validators, conditional requests,
// pre-compressed codings chosen by Accept-Encoding, RFC 3229 `feed` deltas (226 IM Used) and the
// cache-friendly `?since=` cursor. The same handler serves every document; only its policy differs.
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { decide, etagFor, negotiateEncoding, parseIfNoneMatch, parseToken, type RenderingRef } from './conditional.js';
import type { Encoding } from '../codec.js';
import type { DeltaCut, RenderingMeta } from '../rendering-repository.js';
import type { Reader } from './reader.js';
import { MAX_REPEATS } from '../../platform/http-schema.js';

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
  links?(req: RequestOrigin): string;
}

/** What the Link header is made from: the request's scheme and Host (a FastifyRequest is one). */
export interface RequestOrigin {
  protocol: string;
  host: string;
}

export interface ResponseRecorder {
  (document: string, status: number, bytes: number): void;
}

const CONTENT_ENCODING: Record<Encoding, string | undefined> = { identity: undefined, gzip: 'gzip', br: 'br' };

type Query = Record<string, string | string[] | undefined>;

/** Distinct Link values (Host header values) whose 304 heads are kept per rendering and coding. */
const HEADS_MAX = 32;

/**
 * What a rendering answers with, made once per rendering rather than per request (a rendering is served
 * thousands of times; formatting its date and ETags, then six header calls, were a visible share of a 304's
 * cost in a profile): the validator strings, and the whole head of its 304 per coding and Link value.
 */
interface Validators {
  etag: Record<Encoding, string>;
  lastModified: string;
  heads: Map<string, Readonly<Record<string, string>>>;
}

const validatorCache = new WeakMap<RenderingMeta, Validators>();

function validatorsOf(meta: RenderingMeta): Validators {
  let v = validatorCache.get(meta);
  if (!v) {
    const ref: RenderingRef = { id: meta.id, cursorUs: meta.cursorUs };
    v = {
      etag: { identity: etagFor(ref, 'identity'), gzip: etagFor(ref, 'gzip'), br: etagFor(ref, 'br') },
      lastModified: new Date(meta.updatedMs).toUTCString(),
      heads: new Map(),
    };
    validatorCache.set(meta, v);
  }
  return v;
}

function varyOf(policy: ServePolicy): string {
  return policy.deltas ? 'Accept-Encoding, A-IM' : 'Accept-Encoding';
}

/** The 304's head (RFC 9110 §15.4.5: the validators, Cache-Control and Vary a 200 would carry, and the Link). */
function notModifiedHead(
  meta: RenderingMeta,
  v: Validators,
  policy: ServePolicy,
  enc: Encoding,
  link: string | undefined,
): Readonly<Record<string, string>> {
  const key = link === undefined ? enc : `${enc} ${link}`;
  let h = v.heads.get(key);
  if (h === undefined) {
    const head: Record<string, string> = {
      etag: v.etag[enc],
      'last-modified': v.lastModified,
      vary: varyOf(policy),
      'cache-control': policy.cacheControl(meta),
    };
    if (link !== undefined) head.link = link;
    h = Object.freeze(head);
    if (v.heads.size < HEADS_MAX) v.heads.set(key, h);
  }
  return h;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

/**
 * The poll that costs least: If-None-Match naming exactly one of the current rendering's ETags (what a
 * client echoes back), no `?since=`, the rendering known without asking the database. Answered with the
 * pre-built head, by string comparison; null when the request needs serveDocument (which decides the same
 * for it: a tag of the current rendering in any coding is a 304, §13.1.2 weak comparison, before any
 * If-Modified-Since or A-IM).
 */
export function serveNotModified(
  reader: Reader,
  path: string,
  policy: ServePolicy,
  req: FastifyRequest,
  reply: FastifyReply,
  record: ResponseRecorder,
): FastifyReply | null {
  if (policy.deltas && (req.query as Query | undefined)?.since !== undefined) return null;
  const head = notModifiedHeadFor(reader, path, policy, req.headers, req, record);
  return head === null ? null : reply.code(304).headers(head).send();
}

/**
 * serveNotModified's decision and head for a request without `?since=`, from its headers alone (the HTTP
 * server's early answers use it before Fastify sees the request): null when serveDocument must answer.
 * Records the 304 when there is one.
 */
export function notModifiedHeadFor(
  reader: Reader,
  path: string,
  policy: ServePolicy,
  headers: IncomingHttpHeaders,
  origin: RequestOrigin,
  record: ResponseRecorder,
): Readonly<Record<string, string>> | null {
  const inm = headers['if-none-match'];
  if (typeof inm !== 'string') return null;
  const meta = reader.fresh(path);
  if (meta === undefined) return null;
  const v = validatorsOf(meta);
  if (inm !== v.etag.gzip && inm !== v.etag.identity && inm !== v.etag.br) return null;
  const enc = negotiateEncoding(header(headers, 'accept-encoding'), meta.brLength > 0);
  record(policy.document, 304, 0);
  return notModifiedHead(meta, v, policy, enc, policy.links?.(origin));
}

/** A full (200) or delta (226) body with its length and coding; HEAD gets the head only. */
async function sendBody(
  reply: FastifyReply,
  head: boolean,
  meta: RenderingMeta,
  enc: Encoding,
  policy: ServePolicy,
  record: ResponseRecorder,
  status: number,
  length: number,
  body: () => Promise<Buffer | NodeJS.ReadableStream>,
): Promise<FastifyReply> {
  reply.code(status).header('content-type', meta.contentType).header('content-length', String(length));
  const ce = CONTENT_ENCODING[enc];
  if (ce) reply.header('content-encoding', ce);
  record(policy.document, status, head ? 0 : length);
  if (head) return reply.send();
  return reply.send(await body());
}

/** A cursor is `<id>.<µs>` in base 36, at most 23 characters; anything much longer is not one. */
export const SINCE_MAX = 64;

/**
 * Whether a `?since=` value is within what any route accepts (http-schema.ts queryParam: each value at most
 * SINCE_MAX characters, at most MAX_REPEATS of them). Checked by the handler rather than by a querystring
 * schema, which Fastify would validate on every poll.
 */
export function sinceWithinLimits(since: string | string[]): boolean {
  if (typeof since === 'string') return since.length <= SINCE_MAX;
  return since.length <= MAX_REPEATS && since.every((s) => typeof s === 'string' && s.length <= SINCE_MAX);
}

/** 400 for a `?since=` that is not one of our cursors. */
export function refuseSince(reply: FastifyReply, policy: ServePolicy, record: ResponseRecorder): FastifyReply {
  record(policy.document, 400, 0);
  reply.code(400).header('content-type', 'text/plain; charset=utf-8').header('cache-control', 'no-store');
  return reply.send(
    'since must be a cursor taken from this document\'s ETag (the text between the quotes, without any "-gz"/"-br" suffix).\n',
  );
}

function notModified(reply: FastifyReply, policy: ServePolicy, record: ResponseRecorder): FastifyReply {
  record(policy.document, 304, 0);
  return reply.code(304).send();
}

export async function serveDocument(
  reader: Reader,
  path: string,
  policy: ServePolicy,
  req: FastifyRequest,
  reply: FastifyReply,
  record: ResponseRecorder,
): Promise<FastifyReply> {
  const meta = await reader.current(path);
  if (!meta) {
    record(policy.document, policy.missing.status, 0);
    reply.code(policy.missing.status).header('content-type', 'text/plain; charset=utf-8').header('cache-control', 'no-store');
    if (policy.missing.retryAfterSec) reply.header('retry-after', String(policy.missing.retryAfterSec));
    return reply.send(`${policy.missing.message}\n`);
  }
  // A rendering without br (the open hour's appended gzip) gets the client's next choice.
  const enc = negotiateEncoding(header(req.headers, 'accept-encoding'), meta.brLength > 0);
  const current: RenderingRef = { id: meta.id, cursorUs: meta.cursorUs };
  const head = req.method === 'HEAD';
  const q = (req.query ?? {}) as Query;
  const sinceRaw = policy.deltas ? q.since : undefined;

  const v = validatorsOf(meta);
  if (policy.links) reply.header('link', policy.links(req));

  // ------------------------------------------------------------------------------------------------------
  // GET /changes.xml?since=<cursor>: the delta as an ordinary, cacheable 200 (its own URL per cursor).
  if (sinceRaw !== undefined) {
    const token = Array.isArray(sinceRaw) ? sinceRaw[0] : sinceRaw;
    const base = parseToken(token ?? '');
    if (!base) return refuseSince(reply, policy, record);
    reply
      .header('etag', v.etag[enc])
      .header('last-modified', v.lastModified)
      .header('cache-control', policy.cacheControl(meta))
      .header('vary', 'Accept-Encoding');
    const inm = parseIfNoneMatch(header(req.headers, 'if-none-match'));
    if (inm && (inm.any || inm.refs.some((r) => r.id === current.id && r.cursorUs === current.cursorUs)))
      return notModified(reply, policy, record);
    const cut = await reader.deltaCut(meta, base.id, base.cursorUs);
    if (cut)
      return sendBody(reply, head, meta, enc, policy, record, 200, reader.deltaLength(meta, cut, enc), () =>
        reader.deltaBody(meta, cut, enc),
      );
    // An unknown or too old cursor: the whole document (whose ETag gives the next cursor).
    return sendBody(reply, head, meta, enc, policy, record, 200, reader.fullLength(meta, enc), () => reader.fullBody(meta, enc));
  }

  // ------------------------------------------------------------------------------------------------------
  reply.header('etag', v.etag[enc]).header('last-modified', v.lastModified).header('vary', varyOf(policy));
  const d = decide(
    {
      ifNoneMatch: header(req.headers, 'if-none-match'),
      ifModifiedSince: header(req.headers, 'if-modified-since'),
      aIm: header(req.headers, 'a-im'),
    },
    current,
    meta.updatedMs,
    policy.deltas,
  );
  if (d.kind === 'not-modified') {
    reply.header('cache-control', policy.cacheControl(meta));
    return notModified(reply, policy, record);
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
      return sendBody(reply, head, meta, enc, policy, record, 226, reader.deltaLength(meta, found, enc), () =>
        reader.deltaBody(meta, found, enc),
      );
    }
  }
  reply.header('cache-control', policy.cacheControl(meta));
  return sendBody(reply, head, meta, enc, policy, record, 200, reader.fullLength(meta, enc), () => reader.fullBody(meta, enc));
}
