// Owns the HTTP decisions for a published document, as pure functions of request headers and the current
// rendering: content coding by Accept-Encoding q-values (RFC 9110 §12.5.3), entity tags and their
// comparison (§8.8.3, §13.1.2 If-None-Match, §13.1.3 If-Modified-Since, precedence §13.2.2), and RFC 3229
// delta selection with the `feed` instance-manipulation (RFC 3229 with feeds).
import { LRUCache } from 'lru-cache';
import type { Encoding } from '../codec.js';

/** Which coding to send: the highest q among those we store; ties prefer br, then gzip, then identity. */
// Clients send a handful of distinct Accept-Encoding values; parsing each request's anew was a visible share
// of a 304's cost in a profile. Least recently used values go first: a client sending a new value every
// request evicts one entry each time, never the whole cache (it used to be cleared when full).
const negotiated = new LRUCache<string, Encoding>({ max: 256 });
/** The same for renderings stored without br (the open hour's appended gzip stream). */
const negotiatedWithoutBr = new LRUCache<string, Encoding>({ max: 256 });
/** Longer Accept-Encoding values are negotiated each time, not remembered. */
const NEGOTIATED_KEY_MAX = 256;

export function negotiateEncoding(acceptEncoding: string | undefined, brStored = true): Encoding {
  if (acceptEncoding === undefined) return 'identity';
  const cache = brStored ? negotiated : negotiatedWithoutBr;
  let enc = cache.get(acceptEncoding);
  if (enc === undefined) {
    enc = negotiateEncodingUncached(acceptEncoding, brStored);
    if (acceptEncoding.length <= NEGOTIATED_KEY_MAX) cache.set(acceptEncoding, enc);
  }
  return enc;
}

function negotiateEncodingUncached(acceptEncoding: string, brStored: boolean): Encoding {
  const q: Partial<Record<string, number>> = {};
  for (const part of acceptEncoding.split(',')) {
    const [rawName, ...params] = part.split(';');
    const name = rawName.trim().toLowerCase();
    if (!name) continue;
    let weight = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p);
      if (m) weight = Number(m[1]);
    }
    if (!Number.isFinite(weight) || weight < 0 || weight > 1) continue;
    const key = name === 'x-gzip' ? 'gzip' : name;
    // A coding listed twice keeps its best weight.
    q[key] = Math.max(q[key] ?? 0, weight);
  }
  const star = q['*'];
  const weightOf = (c: Encoding): number => {
    if (q[c] !== undefined) return q[c] as number;
    if (star !== undefined) return star;
    // identity is acceptable unless excluded (§12.5.3), but a client that lists codings prefers them;
    // other codings only when listed.
    return c === 'identity' ? 0.001 : 0;
  };
  let best: Encoding = 'identity';
  let bestQ = 0;
  for (const c of ['br', 'gzip', 'identity'] as const) {
    if (c === 'br' && !brStored) continue;
    const w = weightOf(c);
    if (w > bestQ) {
      best = c;
      bestQ = w;
    }
  }
  // Nothing acceptable: send identity rather than 406; every client can read it (§12.5.3 allows either).
  return bestQ > 0 ? best : 'identity';
}

/** A rendering as its validators name it: the rendering id and its cursor (microseconds since the epoch). */
export interface RenderingRef {
  id: number;
  cursorUs: number;
}

const SUFFIX: Record<Encoding, string> = { identity: '', gzip: '-gz', br: '-br' };

/** The opaque token in every ETag and the `?since=` cursor: `<id base36>.<cursor base36>`. */
export function renderingToken(r: RenderingRef): string {
  return `${r.id.toString(36)}.${r.cursorUs.toString(36)}`;
}

/** Strong ETag of one coding of a rendering (each coding is a distinct representation, §8.8.3). */
export function etagFor(r: RenderingRef, enc: Encoding): string {
  return `"${renderingToken(r)}${SUFFIX[enc]}"`;
}

const TOKEN = /^([0-9a-z]{1,11})\.([0-9a-z]{1,11})$/;

/** Parses a cursor token; null when it is not one of ours. */
export function parseToken(token: string): RenderingRef | null {
  const m = TOKEN.exec(token);
  if (!m) return null;
  const id = parseInt(m[1], 36);
  const cursorUs = parseInt(m[2], 36);
  if (!Number.isSafeInteger(id) || !Number.isSafeInteger(cursorUs) || id <= 0) return null;
  return { id, cursorUs };
}

// Our coding suffix, then whatever a compressing proxy appended (Apache mod_deflate "-gzip", nginx and
// others ";gzip" or "-br"): all name the same rendering.
const TAG_BODY = /^([0-9a-z]{1,11}\.[0-9a-z]{1,11})((?:[-;+][A-Za-z0-9]{1,16})*)$/;

export interface IfNoneMatch {
  any: boolean;
  /** Renderings named by the listed tags (weak or strong: If-None-Match compares weakly). */
  refs: RenderingRef[];
}

/**
 * Entity tags of ours read from one If-None-Match. A client names the few renderings it holds (one per
 * coding a proxy may have stored); the rest of a longer list is ignored, which at worst answers a plain 200.
 */
export const IF_NONE_MATCH_MAX_REFS = 16;

/** Parses If-None-Match: `*` or a list of entity-tags. Tags that are not ours are ignored. */
export function parseIfNoneMatch(header: string | undefined): IfNoneMatch | null {
  if (header === undefined) return null;
  const out: IfNoneMatch = { any: false, refs: [] };
  if (header.trim() === '*') {
    out.any = true;
    return out;
  }
  // Tags are quoted and may contain commas; tolerate the unquoted tags some clients echo back.
  const re = /\s*(?:W\/)?(?:"([^"]*)"|([^",\s]+))\s*(?:,|$)/gy;
  let m: RegExpExecArray | null;
  while (re.lastIndex < header.length && (m = re.exec(header)) !== null) {
    const body = m[1] ?? m[2] ?? '';
    if (body === '*') out.any = true;
    const t = TAG_BODY.exec(body);
    if (t) {
      const ref = parseToken(t[1]);
      if (ref) out.refs.push(ref);
    }
    if (m[0] === '' || out.refs.length >= IF_NONE_MATCH_MAX_REFS) break;
  }
  return out;
}

/** True when A-IM lists the `feed` instance-manipulation with a non-zero q (RFC 3229 §10.5.3). */
export function acceptsFeedIm(aIm: string | undefined): boolean {
  if (!aIm) return false;
  for (const part of aIm.split(',')) {
    const [name, ...params] = part.split(';');
    if (name.trim().toLowerCase() !== 'feed') continue;
    const q = params.map((p) => /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p)).find(Boolean);
    if (!q || Number(q[1]) > 0) return true;
  }
  return false;
}

/** An HTTP-date (IMF-fixdate, RFC 850 or asctime) in ms, or null when it is not one (§5.6.7). */
export function parseHttpDate(v: string | undefined): number | null {
  if (!v) return null;
  const s = v.trim();
  if (
    !/^(?:[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT|[A-Z][a-z]{5,8}, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})$/.test(
      s,
    )
  ) {
    return null;
  }
  const asctime = /^[A-Z][a-z]{2} ([A-Z][a-z]{2}) ([ \d]\d) (\d{2}:\d{2}:\d{2}) (\d{4})$/.exec(s);
  const ms = asctime ? Date.parse(`${asctime[2].trim()} ${asctime[1]} ${asctime[4]} ${asctime[3]} GMT`) : Date.parse(s);
  return Number.isFinite(ms) ? ms : null;
}

export interface RequestConditions {
  ifNoneMatch?: string;
  ifModifiedSince?: string;
  aIm?: string;
}

export type Decision =
  | { kind: 'full' }
  | { kind: 'not-modified' }
  /** Delta from a base rendering the client named (the caller checks the base is known and recent). */
  | { kind: 'delta'; bases: RenderingRef[] };

/**
 * What to answer for a GET/HEAD of a document whose current rendering is `current`:
 * If-None-Match first (weakly: any coding of the current rendering, or `*`, → 304); only without it,
 * If-Modified-Since against Last-Modified. Otherwise, with `A-IM: feed` and tags naming other renderings,
 * a delta is possible; the caller falls back to the full 200 when none of those bases is usable.
 */
export function decide(req: RequestConditions, current: RenderingRef, lastModifiedMs: number, deltas: boolean): Decision {
  const inm = parseIfNoneMatch(req.ifNoneMatch);
  if (inm) {
    if (inm.any || inm.refs.some((r) => r.id === current.id && r.cursorUs === current.cursorUs)) return { kind: 'not-modified' };
    if (deltas && acceptsFeedIm(req.aIm)) {
      const bases = inm.refs.filter((r) => r.id !== current.id);
      if (bases.length) return { kind: 'delta', bases };
    }
    return { kind: 'full' };
  }
  const ims = parseHttpDate(req.ifModifiedSince);
  if (ims !== null && lastModifiedMs <= ims) return { kind: 'not-modified' };
  return { kind: 'full' };
}
