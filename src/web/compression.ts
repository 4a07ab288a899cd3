// Owns the content coding of what the pages send (RFC 9110 §8.4; the coding chosen by Accept-Encoding
// q-values with publishing's negotiateEncoding, so a page and changes.xml agree on what a client accepts):
// a page's HTML is compressed per request by the web context's onSend hook, and the hashed assets once per
// coding, kept with their bytes (asset-manifest.ts). The published documents have their own precompressed
// path (src/publishing/) outside this context, and GET /api/stats compresses its cached answer itself.
import zlib from 'node:zlib';
import { promisify } from 'node:util';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { negotiateEncoding } from '../publishing/read/conditional.js';
import { brotliOptions, gzipOptions, type Encoding } from '../publishing/codec.js';

export type Coding = Exclude<Encoding, 'identity'>;

/** Bodies smaller than this are sent as they are: a few hundred bytes saved do not pay for a zlib round. */
export const MIN_COMPRESS_BYTES = 1024;

/** Types worth compressing (what the pages' context sends: HTML, the assets' CSS and JavaScript, JSON errors). */
const COMPRESSIBLE = /^(?:text\/|application\/(?:json|javascript|xml)|image\/svg\+xml)/i;

/**
 * A page is made per request (no-store), so it is compressed per request, synchronously: pages are a few
 * kB (their lists are bounded: 20 pings, 10 hosts, 20 recent), and a thread-pool round trip costs more
 * than the work. Measured in a running app between requests (a loaded 2-core machine, so ranges): the home
 * page (4.3 kB) took 185–220 µs to brotli 5 (1,471 B), 110–140 µs to gzip 6 (1,661 B), 160–350 µs to
 * brotli 4 (1,599 B); /status (5.2 kB) about the same. Brotli 11 saves ~13% more in 14–22 ms a page.
 */
const PAGE_GZIP: zlib.ZlibOptions = { level: 6 };
const pageBrotli = (bytes: number): zlib.BrotliOptions => ({
  params: {
    [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
    [zlib.constants.BROTLI_PARAM_QUALITY]: 5,
    [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes,
  },
});

export function compressPage(coding: Coding, body: Buffer): Buffer {
  return coding === 'br' ? zlib.brotliCompressSync(body, pageBrotli(body.length)) : zlib.gzipSync(body, PAGE_GZIP);
}

const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

/**
 * A file that never changes while the process runs, compressed once at the tightest settings (publishing's:
 * brotli 11 and gzip 9 below 256 KiB), on the thread pool. Measured on uPlot's build (51,081 B): brotli 11
 * took 107 ms once for 19,834 B, where a per-request brotli 4 (@fastify/compress's default) costs 1.2 ms
 * of CPU on every request for 22,731 B; gzip 9 took 1.9 ms for 22,080 B.
 */
export function compressOnce(coding: Coding, body: Buffer): Promise<Buffer> {
  return coding === 'br' ? brotli(body, brotliOptions(body.length)) : gzip(body, gzipOptions(body.length));
}

/** Which coding to send: the best the request accepts of those we make (identity when none). */
export function codingFor(req: FastifyRequest): Encoding {
  return negotiateEncoding(req.headers['accept-encoding']);
}

/** Marks a reply as chosen by Accept-Encoding (every variant says so, the uncompressed one too: §12.5.5). */
export function varyByEncoding(reply: FastifyReply): void {
  const v = reply.getHeader('vary');
  if (v === undefined) {
    reply.header('vary', 'Accept-Encoding');
    return;
  }
  const s = Array.isArray(v) ? v.join(', ') : String(v);
  if (!/(?:^|,)\s*(?:accept-encoding|\*)\s*(?:,|$)/i.test(s)) reply.header('vary', `${s}, Accept-Encoding`);
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** false: the route's answers leave uncompressed (the GET ping's, ping-form.ts says why). */
    compress?: false;
  }
}

/**
 * The web context's onSend hook: a text body of a compressible type, sent uncoded so far, leaves in the
 * coding the request prefers. Streams, replies that chose a coding themselves (the assets) and routes that
 * say `config: { compress: false }` pass as they are.
 */
export async function compressReply(req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  if (req.routeOptions.config.compress === false) return payload;
  if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return payload;
  if (reply.hasHeader('content-encoding')) return payload;
  const type = reply.getHeader('content-type');
  if (typeof type !== 'string' || !COMPRESSIBLE.test(type)) return payload;
  varyByEncoding(reply);
  const body = typeof payload === 'string' ? Buffer.from(payload) : payload;
  if (body.length < MIN_COMPRESS_BYTES || reply.statusCode === 204 || reply.statusCode === 304) return payload;
  const coding = codingFor(req);
  if (coding === 'identity') return payload;
  reply.header('content-encoding', coding);
  return compressPage(coding, body);
}

/** Whether If-None-Match names `etag` (weak comparison, §13.1.2), or is `*`. */
export function matchesIfNoneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const bare = etag.replace(/^W\//, '');
  return header.split(',').some((t) => {
    const tag = t.trim();
    return tag === '*' || tag.replace(/^W\//, '') === bare;
  });
}
