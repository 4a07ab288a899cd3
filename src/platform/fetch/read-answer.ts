// Owns reading an answer's body within its bounds: the bytes a push reads of what a subscriber says back
// (readSome), a fetched document whole up to its size cap and decompressed within it (readBody), and the
// rule that a body cut off by pingd's own deadline is a failure, never a short success.
import zlib from 'node:zlib';
import { promisify } from 'node:util';
import type { IncomingMessage } from 'node:http';
import { FetchError } from './fetch-error.js';

const gunzip = promisify(zlib.gunzip);
const inflate = promisify(zlib.inflate);
const inflateRaw = promisify(zlib.inflateRaw);
const brotliDecompress = promisify(zlib.brotliDecompress);

/**
 * A body cut off by our deadline is a failure, never a short success. A body without Content-Length or
 * chunking ends when the connection closes (RFC 9112 §6.3), and Node reports the close our own abort causes
 * as that end, `complete` and all: a feed dripping a byte a second came back as a 200 of what had arrived.
 */
function cutOff(signal: AbortSignal, timeoutMs: number, url: string): FetchError | undefined {
  return signal.aborted ? new FetchError('FETCH_TIMEOUT', `the answer was cut off: not complete within ${timeoutMs} ms`, url) : undefined;
}

/**
 * Reads an answer as it comes: `take` sees each chunk and returns a value to stop there (the connection is
 * dropped) or throws; `end` makes the value once the answer is complete. Listeners rather than `for await`:
 * the async iterator's stream bookkeeping (end-of-stream, its listeners) was ~8% of the main thread in a
 * push fan-out profile (bench/push.ts, rssCloud, N=100). An answer that closes before its end fails as the
 * iterator did ("Premature close").
 */
function collect<T>(res: IncomingMessage, take: (chunk: Buffer) => T | undefined, end: () => T): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const settle = (f: () => T, drop: boolean) => {
      if (settled) return;
      settled = true;
      res.off('data', onData);
      res.off('end', onEnd);
      res.off('error', onError);
      res.off('close', onClose);
      if (drop) res.destroy();
      try {
        resolve(f());
      } catch (err) {
        reject(err);
      }
    };
    const onData = (chunk: Buffer) => {
      let v: T | undefined;
      try {
        v = take(chunk);
      } catch (err) {
        settle(() => {
          throw err;
        }, true);
        return;
      }
      if (v !== undefined) settle(() => v as T, true);
    };
    const onEnd = () => settle(end, false);
    const onError = (err: Error) =>
      settle(() => {
        throw err;
      }, false);
    const onClose = () =>
      settle(() => {
        throw new Error('Premature close');
      }, false);
    res.on('data', onData);
    res.on('end', onEnd);
    res.on('error', onError);
    res.on('close', onClose);
  });
}

/**
 * The first `maxBytes` of an answer; the connection is dropped after them. 'truncate': its size is the
 * peer's business, and the first bytes are the answer. 'fail': an answer over the cap is FETCH_TOO_LARGE.
 */
export async function readSome(
  res: IncomingMessage,
  maxBytes: number,
  signal: AbortSignal,
  timeoutMs: number,
  url: string,
  oversize: 'truncate' | 'fail',
): Promise<Buffer> {
  const tooLarge = () => new FetchError('FETCH_TOO_LARGE', `the answer is larger than ${maxBytes} bytes`, url);
  const declared = Number(res.headers['content-length']);
  if (oversize === 'fail' && Number.isFinite(declared) && declared > maxBytes) {
    res.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  return collect(
    res,
    (chunk) => {
      chunks.push(chunk);
      size += chunk.length;
      if (oversize === 'fail' ? size > maxBytes : size >= maxBytes) {
        if (oversize === 'fail') throw tooLarge();
        return Buffer.concat(chunks).subarray(0, maxBytes);
      }
      return undefined;
    },
    () => {
      const cut = cutOff(signal, timeoutMs, url);
      if (cut) throw cut;
      return Buffer.concat(chunks);
    },
  );
}

export async function readBody(
  res: IncomingMessage,
  maxBytes: number,
  url: string,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<Buffer> {
  const tooLarge = () => new FetchError('FETCH_TOO_LARGE', `the answer is larger than ${maxBytes} bytes`, url);
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    res.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  const raw = await collect(
    res,
    (chunk) => {
      size += chunk.length;
      if (size > maxBytes) throw tooLarge();
      chunks.push(chunk);
      return undefined;
    },
    () => {
      const cut = cutOff(signal, timeoutMs, url);
      if (cut) throw cut;
      return Buffer.concat(chunks);
    },
  );
  const encoding = String(res.headers['content-encoding'] ?? '')
    .trim()
    .toLowerCase();
  if (encoding === '' || encoding === 'identity') return raw;
  // The compressed body is already bounded; maxOutputLength bounds what it expands to (gzip bombs). The
  // asynchronous forms decompress on libuv's thread pool: a 5 MB feed is no work for the event loop.
  try {
    const opts = { maxOutputLength: maxBytes };
    if (encoding === 'gzip' || encoding === 'x-gzip') return await gunzip(raw, opts);
    // "deflate" is zlib-wrapped by the letter of HTTP and raw in some servers' hands: take both.
    if (encoding === 'deflate') return raw[0] === 0x78 ? await inflate(raw, opts) : await inflateRaw(raw, opts);
    if (encoding === 'br') return await brotliDecompress(raw, opts);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' || err instanceof RangeError) throw tooLarge();
    throw new FetchError('FETCH_BAD_RESPONSE', `the ${encoding} body cannot be decompressed`, url, { cause: err });
  }
  throw new FetchError('FETCH_BAD_RESPONSE', `unsupported Content-Encoding ${JSON.stringify(encoding.slice(0, 40))}`, url);
}
