// Owns pingserver-side authentication (RSS Ping, "Authentication (draft)"): fetch payload_hash_uri once
// and compare the digest it serves with the SHA1 (or MD5) of the payload bytes exactly as sent. Only a
// hash URI on the site's own host can authenticate a ping: otherwise anyone could "authenticate" a ping
// for someone else's site with a hash file on their own server.
import { createHash } from 'node:crypto';
import type { HashAlgorithm } from './parse.js';
import type { SafeFetcher } from '../../platform/fetch/safe-fetch.js';
import { FetchError } from '../../platform/fetch/safe-fetch.js';

export const HASH_FETCH_MAX_BYTES = 4096;
export const HASH_FETCH_MAX_REDIRECTS = 3;

export type HashCheck =
  | { outcome: 'match'; algorithm: HashAlgorithm; note: string }
  | { outcome: 'mismatch'; algorithm: HashAlgorithm; note: string }
  | { outcome: 'unavailable'; note: string };

const XML_SPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/** The bytes with leading and trailing XML whitespace removed. */
export function trimBytes(b: Buffer): Buffer {
  let s = 0;
  let e = b.length;
  while (s < e && XML_SPACE.has(b[s])) s++;
  while (e > s && XML_SPACE.has(b[e - 1])) e--;
  return b.subarray(s, e);
}

/** The digests that authenticate a payload: of its bytes exactly as sent, and of the same bytes trimmed. */
export function payloadDigests(bytes: Buffer, algorithm: HashAlgorithm): string[] {
  const d = (b: Buffer) => createHash(algorithm).update(b).digest('hex');
  const exact = d(bytes);
  const trimmed = d(trimBytes(bytes));
  return exact === trimmed ? [exact] : [exact, trimmed];
}

/** What a hash URI served, if it is a hex digest (case-insensitive, surrounding whitespace ignored). */
export function servedDigest(body: Buffer): string | null {
  const t = body.toString('latin1').trim().toLowerCase();
  return /^(?:[0-9a-f]{40}|[0-9a-f]{32})$/.test(t) ? t : null;
}

/** Same site: the same host name, a leading "www." ignored (RSS Ping's own example mixes the two). */
export function sameSite(siteUrl: string, hashUrl: URL): boolean {
  const bare = (h: string) =>
    h
      .toLowerCase()
      .replace(/^www\./, '')
      .replace(/\.$/, '');
  return bare(new URL(siteUrl).hostname) === bare(hashUrl.hostname);
}

const ALG_NAME: Record<HashAlgorithm, string> = { sha1: 'SHA1', md5: 'MD5' };

/**
 * Fetches the hash URI and compares. `algorithm` is the element's attribute; when absent, SHA1 — or MD5
 * when what is served is an MD5-sized digest. Never throws: an unusable hash URI leaves the ping
 * unauthenticated, with the reason in the note.
 */
export async function checkPayloadHash(
  fetcher: SafeFetcher,
  opts: { siteUrl: string; hashUri: string; algorithm: HashAlgorithm | null; payload: Buffer },
): Promise<HashCheck> {
  let url: URL;
  try {
    url = new URL(opts.hashUri.trim());
  } catch {
    return { outcome: 'unavailable', note: 'payload_hash_uri is not an absolute URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { outcome: 'unavailable', note: 'payload_hash_uri is not an http(s) URL' };
  if (!sameSite(opts.siteUrl, url))
    return {
      outcome: 'unavailable',
      note: `payload_hash_uri is not on the site's host (${new URL(opts.siteUrl).hostname}), so it was not fetched`,
    };
  let body: Buffer;
  try {
    const r = await fetcher.get(url.href, {
      maxBytes: HASH_FETCH_MAX_BYTES,
      maxRedirects: HASH_FETCH_MAX_REDIRECTS,
      accept: 'text/plain, */*;q=0.1',
    });
    if (r.status < 200 || r.status > 299)
      return { outcome: 'unavailable', note: `payload_hash_uri could not be fetched (HTTP ${r.status})` };
    body = r.body;
  } catch (err) {
    if (err instanceof FetchError) {
      const why = err.code === 'FETCH_ADDRESS_BLOCKED' ? `refused as unsafe: ${err.message}` : err.message;
      return { outcome: 'unavailable', note: `payload_hash_uri could not be fetched (${why})` };
    }
    throw err;
  }
  const served = servedDigest(body);
  const algorithm: HashAlgorithm = opts.algorithm ?? (served?.length === 32 ? 'md5' : 'sha1');
  const want = algorithm === 'md5' ? 32 : 40;
  if (!served || served.length !== want)
    return { outcome: 'unavailable', note: `payload_hash_uri did not serve a ${ALG_NAME[algorithm]} hex digest` };
  if (payloadDigests(opts.payload, algorithm).includes(served)) {
    return { outcome: 'match', algorithm, note: `the ${ALG_NAME[algorithm]} of the payload matches payload_hash_uri` };
  }
  return {
    outcome: 'mismatch',
    algorithm,
    note: `The ${ALG_NAME[algorithm]} of the payload does not match the hash served at payload_hash_uri.`,
  };
}
