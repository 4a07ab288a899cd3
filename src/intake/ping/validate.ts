// Owns the validation rules every ping passes, whatever the protocol it came in by: URL normalisation,
// name cleaning and tag parsing. Pure functions; the refusal messages are what clients see.
import { HAS_CONTROL, stripControls } from '../../platform/xml/escape.js';
import { PingdError } from '../../platform/errors.js';

export const MAX_URL_LENGTH = 2048;
export const MAX_NAME_LENGTH = 1024;
export const MAX_TAGS = 50;
export const MAX_TAG_LENGTH = 100;

/** Every way a ping arrives, as the `method` of a stored ping and of pingd_pings_total. */
export const PING_METHODS = ['ping', 'extendedPing', 'pingSiteForm', 'rssPing', 'websub', 'rssCloud'] as const;
export type PingMethod = (typeof PING_METHODS)[number];

/** A ping as a protocol adapter hands it over, before validation. */
export interface RawPing {
  method: PingMethod;
  name: string | null;
  url: string | null;
  changesUrl?: string | null;
  rssUrl?: string | null;
  tags?: string | null;
  clientAddr?: string | null;
  userAgent?: string | null;
}

/** A ping that passed validation: what gets stored. */
export interface ValidPing {
  method: PingMethod;
  name: string;
  url: string;
  changesUrl: string | null;
  rssUrl: string | null;
  tags: string[] | null;
  clientAddr: string | null;
  userAgent: string | null;
}

export class PingValidationError extends PingdError<'PING_INVALID'> {
  constructor(
    message: string,
    readonly field: string,
  ) {
    super('PING_INVALID', message);
  }
}

const HTML_NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' };

/**
 * Decodes ONE level of HTML character references. WordPress sends the blog name through esc_html before
 * the XML encoder, so "Joe's & Co" arrives as "Joe&#039;s &amp; Co" after XML decoding; a literal
 * "&amp;" in a name is therefore read as "&". Unknown named references are left as they are.
 */
export function decodeHtmlReferences(s: string): string {
  if (!s.includes('&')) return s;
  return s.replace(/&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});/g, (m, ref: string) => {
    if (ref[0] === '#') {
      const cp = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      if (cp === 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return '';
      return String.fromCodePoint(cp);
    }
    return HTML_NAMED[ref] ?? HTML_NAMED[ref.toLowerCase()] ?? m;
  });
}

/** Name rule: HTML references decoded once, controls removed, whitespace folded, trimmed, 1..1024 chars. */
export function cleanName(raw: string | null | undefined): string {
  if (raw == null) throw new PingValidationError('The weblog name is missing.', 'name');
  const name = stripControls(decodeHtmlReferences(raw)).replace(/\s+/g, ' ').trim();
  if (name === '') throw new PingValidationError('The weblog name is empty.', 'name');
  if ([...name].length > MAX_NAME_LENGTH)
    throw new PingValidationError(`The weblog name is longer than ${MAX_NAME_LENGTH} characters.`, 'name');
  return name;
}

/** Query parameters that only track a visit (Google Analytics' utm_*, ad click ids); never part of a weblog's identity. */
const TRACKING_PARAM = /^(?:utm_[a-z_]+|fbclid|gclid|msclkid)$/i;

/**
 * Each of `raw` through normalizeUrl, each URL once, in order; or the first refusal's message (for a
 * caller that answers in its own form: a WebSub publish's hub.url list, an rssCloud request's resources).
 */
export function normalizeUrls(raw: readonly string[], field: string): { ok: true; urls: string[] } | { ok: false; reason: string } {
  const urls: string[] = [];
  for (const s of raw) {
    let u: string;
    try {
      u = normalizeUrl(s, field);
    } catch (err) {
      if (err instanceof PingValidationError) return { ok: false, reason: err.message };
      throw err;
    }
    if (!urls.includes(u)) urls.push(u);
  }
  return { ok: true, urls };
}

/**
 * URL rule: absolute http(s), no credentials, at most 2048 characters; normalised by WHATWG URL
 * serialisation (scheme and host lower-cased, default port dropped, IDN hosts in punycode, empty path
 * becomes "/"), fragment removed, the host's root dot and campaign-tracking parameters dropped (a host with
 * an empty label refused). Nothing else is changed, so that one weblog is one weblog without guessing (http
 * and https, or www and bare host, stay distinct).
 */
export function normalizeUrl(raw: string | null | undefined, field = 'url'): string {
  const label = field === 'url' ? 'The weblog URL' : `The ${field}`;
  if (raw == null || raw.trim() === '') throw new PingValidationError(`${label} is missing.`, field);
  const s = raw.trim();
  if (s.length > MAX_URL_LENGTH) throw new PingValidationError(`${label} is longer than ${MAX_URL_LENGTH} characters.`, field);
  if (HAS_CONTROL.test(s) || /\s/.test(s)) {
    throw new PingValidationError(`${label} contains whitespace or control characters.`, field);
  }
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    throw new PingValidationError(`${label} is not an absolute URL: it must start with http:// or https://.`, field);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new PingValidationError(`${label} must use http or https, not ${u.protocol.slice(0, -1)}.`, field);
  }
  if (u.username || u.password) throw new PingValidationError(`${label} must not contain a user name or password.`, field);
  if (!u.hostname) throw new PingValidationError(`${label} has no host.`, field);
  // One site, one identity: "example.com." is example.com (the root's dot), but a host with an empty label
  // ("example.com..", "a..example.com") is no host at all (REGRESSION: each such spelling counted as a new
  // weblog, escaping the throttle).
  if (u.hostname.endsWith('.') && !u.hostname.endsWith('..')) u.hostname = u.hostname.slice(0, -1);
  if (u.hostname.split('.').some((label) => label === '')) throw new PingValidationError(`${label} has a malformed host name.`, field);
  // Campaign-tracking parameters name the same page: they are dropped, so `?utm_source=x` is not a new weblog.
  // Only when there is a query: reading u.searchParams makes a URLSearchParams, and u.hash = '' re-serialises
  // the whole href even when there is no fragment (5-8 µs a ping, bench/results/evidence/2026-11-23-wrk.md).
  if (u.search) for (const k of [...u.searchParams.keys()]) if (TRACKING_PARAM.test(k)) u.searchParams.delete(k);
  if (u.hash || s.includes('#')) u.hash = '';
  const out = u.href;
  if (out.length > MAX_URL_LENGTH) throw new PingValidationError(`${label} is longer than ${MAX_URL_LENGTH} characters.`, field);
  return out;
}

function optionalUrl(raw: string | null | undefined, field: string): string | null {
  if (raw == null || raw.trim() === '') return null;
  return normalizeUrl(raw, field);
}

/** Tags rule: `|`-delimited (the extendedPing fifth parameter), trimmed, empties dropped, at most 50. */
export function parseTags(raw: string | null | undefined): string[] | null {
  if (raw == null) return null;
  const tags = stripControls(raw)
    .split('|')
    .map((t) => t.replace(/\s+/g, ' ').trim())
    .filter((t) => t !== '');
  if (tags.length === 0) return null;
  if (tags.length > MAX_TAGS) throw new PingValidationError(`More than ${MAX_TAGS} tags.`, 'tags');
  for (const t of tags)
    if ([...t].length > MAX_TAG_LENGTH) throw new PingValidationError(`A tag is longer than ${MAX_TAG_LENGTH} characters.`, 'tags');
  return tags;
}

/** Applies every rule; throws PingValidationError with the first problem found. */
export function validatePing(raw: RawPing): ValidPing {
  return {
    method: raw.method,
    name: cleanName(raw.name),
    url: normalizeUrl(raw.url, 'url'),
    changesUrl: optionalUrl(raw.changesUrl, 'changesUrl'),
    rssUrl: optionalUrl(raw.rssUrl, 'rssUrl'),
    tags: parseTags(raw.tags),
    clientAddr: raw.clientAddr ?? null,
    userAgent: raw.userAgent ? stripControls(raw.userAgent).slice(0, 512) : null,
  };
}
