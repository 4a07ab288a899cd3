// Owns what the hardening benchmark sends, one generator per amplification class: what an attacker sent
// against an earlier build, shaped so that the earlier and the current code each meet their own worst case.
// Weblog hosts are under the reserved `.example` top-level domain (RFC 2606): stored as text, never fetched.
import { createHash } from 'node:crypto';
import type { HostileRequest } from './hostile-http.js';

let seq = 0;
const PAD = 'x'.repeat(15_000);

/**
 * Unbounded memory through X-Forwarded-For: a ping whose header is ~15 KB of text no other request sent,
 * then a unique IPv6 address. Trusting every hop, the leftmost entry (the text) is the client; trusting the
 * one proxy in front, the rightmost (a new /64 each time: a new rate-limit key of an address's size).
 * `url` undefined: a weblog URL that is no URL, refused by validation after the rate limit has counted the
 * client (what a flood of 100k needs: memory per client without a database write per request).
 */
export function xffPing(url: string | undefined): HostileRequest {
  const i = ++seq;
  const v6 = `2001:db8:${(i >>> 16).toString(16)}:${(i & 0xffff).toString(16)}::1`;
  return {
    method: 'GET',
    path: `/pingSiteForm?name=XFF+Victim&url=${encodeURIComponent(url ?? 'xff-victim')}`,
    headers: { 'x-forwarded-for': `${i.toString(36)}${PAD}, ${v6}` },
  };
}

/**
 * Query amplification through If-None-Match with `A-IM: feed` (RFC 3229 with feeds): entity tags shaped as
 * ours (`"<rendering id>.<cursor>"`, weak or with a coding suffix), each naming a rendering that does not
 * exist, as many as fit in ~15 KB (Node refuses more than 16 KiB of headers). Ids are never repeated, so no
 * cache of earlier answers helps.
 */
export function inmFlood(path: string, cursor: string, aboveId: number, bytes = 15_000): { make: () => HostileRequest; tags: number } {
  let next = aboveId + 100_000;
  const tagsOf = () => {
    const out: string[] = [];
    let len = 0;
    for (;;) {
      const id = (next++).toString(36);
      const tag = out.length % 2 ? `W/"${id}.${cursor}-gz"` : `"${id}.${cursor}"`;
      if (len + tag.length + 2 > bytes) return out;
      out.push(tag);
      len += tag.length + 2;
    }
  };
  const tags = tagsOf().length;
  next = aboveId + 100_000;
  return {
    make: () => ({ method: 'GET', path, headers: { 'accept-encoding': 'gzip', 'a-im': 'feed', 'if-none-match': tagsOf().join(', ') } }),
    tags,
  };
}

/** GET /rssping/token for a registered publisher's site (RSS Ping, publisher-side authentication). */
export const tokenRequest = (site: string): HostileRequest => ({
  method: 'GET',
  path: `/rssping/token?site_uri=${encodeURIComponent(site)}`,
});

/** The one-time endpoint of publisher-side authentication: sha1(site_uri + password + token), hex. */
export const endpointOf = (site: string, password: string, token: string) =>
  createHash('sha1')
    .update(site + password + token, 'utf8')
    .digest('hex');

const ITEM_HEAD = (site: string) => `<item><title>Hello</title><link>${site}post</link>`;

/** An rss_ping document (RSS Ping, "Core Elements"): extra outer markup, payload attributes, item markup. */
export function rssPingXml(
  site: string,
  parts: { outer?: string; payloadAttrs?: string; itemInner?: string; rootAttrs?: string } = {},
): string {
  return (
    `<?xml version="1.0"?>\n<rss_ping version="2"${parts.rootAttrs ?? ''}>\n<site_name>RSS Victim</site_name>\n<site_uri>${site}</site_uri>\n` +
    `<feed_uri type="RSS 2.0">${site}feed.xml</feed_uri>\n${parts.outer ?? ''}` +
    `<payload type="RSS 2.0 fragment" encoding="utf-8"${parts.payloadAttrs ?? ''}>${ITEM_HEAD(site)}${parts.itemInner ?? ''}</item></payload>\n</rss_ping>\n`
  );
}

/** The largest n (up to `max`) for which make(n) is at most `limit` bytes. */
function fill(limit: number, make: (n: number) => string, max = limit): string {
  let lo = 0;
  let hi = max;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (Buffer.byteLength(make(mid)) <= limit) lo = mid;
    else hi = mid - 1;
  }
  return make(lo);
}

const attrs = (n: number, quoted = true) => Array.from({ length: n }, (_, i) => ` a${i.toString(36)}=${quoted ? '"1"' : '1'}`).join('');

/**
 * Expensive rss_ping bodies, each as close to the body limit as it goes: markup that costs a parser work
 * per byte (empty elements, attributes, unquoted attributes the lenient reader rewrites).
 */
export function rssPingShapes(site: string, limit: number): Record<string, Buffer> {
  const shapes: Record<string, (n: number) => string> = {
    'empty elements in the payload': (n) => rssPingXml(site, { itemInner: '<x/>'.repeat(n) }),
    'attributes on one payload element': (n) => rssPingXml(site, { itemInner: `<x${attrs(n)}/>` }),
    'attributed elements in the payload': (n) => rssPingXml(site, { itemInner: '<x a="1" b="2" c="3" d="4"/>'.repeat(n) }),
    'empty elements in the rss_ping': (n) => rssPingXml(site, { outer: '<x/>'.repeat(n) }),
    'unquoted attributes in the rss_ping': (n) => rssPingXml(site, { outer: `<x${attrs(n, false)}/>\n` }),
    'processing instructions in the payload': (n) => rssPingXml(site, { itemInner: '<?a?>'.repeat(n) }),
    // Markup a parser must decode but that adds no element or attribute: what stays under a count of either.
    'character references in the payload text': (n) => rssPingXml(site, { itemInner: `<description>${'&#233;'.repeat(n)}</description>` }),
    'entity references in the payload text': (n) => rssPingXml(site, { itemInner: `<description>${'&lt;b&gt;'.repeat(n)}</description>` }),
    // Not hostile: what any 256 KiB rss_ping costs (reading, and storing when accepted), to compare with.
    'plain text in the payload (reference)': (n) => rssPingXml(site, { itemInner: `<description>${'x'.repeat(n)}</description>` }),
    // Under a count of 1,000 elements and 1,000 attributes, the bytes spent on attribute values instead.
    '900 elements with long attribute values': (n) => rssPingXml(site, { itemInner: `<x a="${'v'.repeat(n)}"/>`.repeat(900) }),
  };
  // n is a count of repetitions, except for the last shape, where it is one value's length.
  const max = (k: string) => (k.startsWith('900') ? Math.ceil(limit / 900) : limit);
  return Object.fromEntries(Object.entries(shapes).map(([k, make]) => [k, Buffer.from(fill(limit, make, max(k)))]));
}

export const rssPingRequest = (body: Buffer, path = '/rssping'): HostileRequest => ({
  method: 'POST',
  path,
  headers: { 'content-type': 'text/xml' },
  body,
});

/** GET /pingSiteForm of one weblog URL. */
export const formPing = (url: string): HostileRequest => ({
  method: 'GET',
  path: `/pingSiteForm?name=Variant+Blog&url=${encodeURIComponent(url)}`,
});

/**
 * One site spelled many ways: each kind on a host of its own (so that one kind's acceptances never spend
 * another's allowance), its canonical URL pinged first, then `n` spellings.
 */
export const VARIANT_KINDS: Record<string, { host: string; spell: (host: string, i: number) => string }> = {
  'tracking parameters (?utm_source=N)': { host: 'www.utm-victim.example', spell: (h, i) => `https://${h}/?utm_source=s${i}` },
  'query parameters (?a=N)': { host: 'www.query-victim.example', spell: (h, i) => `https://${h}/?a=${i}` },
  'trailing dots (host. … host.{N})': { host: 'www.dots-victim.example', spell: (h, i) => `https://${h}${'.'.repeat(i)}/` },
  'upper-case host letters': { host: 'www.case-victim.example', spell: (h, i) => `https://${caseVariant(h, i)}/` },
  'fragments (#N)': { host: 'www.fragment-victim.example', spell: (h, i) => `https://${h}/#s${i}` },
  'distinct paths (/N/, distinct weblogs on one host)': { host: 'www.paths-victim.example', spell: (h, i) => `https://${h}/blog${i}/` },
};

/** The host with the letters chosen by the bits of i + 1 upper-cased (never the all-lower-case spelling). */
function caseVariant(host: string, i: number): string {
  let bits = i + 1;
  let out = '';
  for (const c of host) {
    if (/[a-z]/.test(c)) {
      out += bits & 1 ? c.toUpperCase() : c;
      bits >>>= 1;
    } else out += c;
  }
  return out;
}
