// Owns reading an `rss_ping` document (RSS Ping, "Root element", "Core Elements", "Payload") from request
// bytes. Real senders copy RSS Ping's examples, which are not well-formed XML, so this reader is lenient
// where the draft is loose and strict where a mistake would matter:
//   lenient: unquoted attribute values (`version=2`), a missing version, an XML declaration or namespace
//     declarations inside/on <payload>, any Content-Type, unknown extra elements, feed_uri type spelling;
//   strict: DOCTYPE/entity declarations anywhere, a root other than <rss_ping>, a version other than 2.x,
//     duplicated single elements, missing site_name/site_uri/feed_uri/payload, an outer document that is
//     still not well-formed after the attribute fix, an unknown character encoding or hash algorithm, and
//     (before any parser runs) more elements, attributes or nesting than prescan.ts allows.
// The payload's bytes are cut out of the request bytes BEFORE any parsing, because pingserver-side
// authentication hashes them exactly as sent.
import { XMLParser } from 'fast-xml-parser';
import { contentTypeCharset } from '../../platform/xml/decode.js';
import { PingdError } from '../../platform/errors.js';
import { UNTRUSTED_XML } from '../../platform/xml/parser-options.js';
import { decodeAttrValue, escAttr, readStartTag, type Attr } from './attributes.js';
import { validatedLongText } from './long-text.js';
import {
  firstElementName,
  forbiddenInRssPing,
  MAX_ATTRIBUTES,
  MAX_ATTRIBUTES_PER_ELEMENT,
  MAX_DEPTH,
  MAX_FEEDS,
  prescan,
  refusal,
} from './prescan.js';

export class RssPingError extends PingdError<'RSSPING_INVALID'> {
  constructor(message: string) {
    super('RSSPING_INVALID', message);
  }
}

export type HashAlgorithm = 'sha1' | 'md5';

export interface FeedRef {
  uri: string;
  /** The type attribute as sent (trimmed), e.g. "RSS 2.0"; null when absent. */
  type: string | null;
}

export interface PayloadPart {
  /** The bytes between `<payload …>` and `</payload>`, exactly as sent (what the hash covers). */
  bytes: Buffer;
  /** Those bytes decoded to text. */
  text: string;
  /** Attributes of the payload start tag (type, encoding, namespace declarations), decoded. */
  attributes: Record<string, string>;
  type: string | null;
  encoding: string | null;
}

export interface RssPingDocument {
  version: string | null;
  siteName: string | null;
  siteUri: string | null;
  feeds: FeedRef[];
  payloadHash: { value: string; algorithm: HashAlgorithm | null } | null;
  payloadHashUri: { uri: string; algorithm: HashAlgorithm | null } | null;
  publisherMboxHash: { value: string; algorithm: HashAlgorithm | null } | null;
  payload: PayloadPart;
  /** The character encoding the request was read with, and where it came from. */
  charset: { label: string; from: 'bom' | 'declaration' | 'content-type' | 'payload-encoding' | 'payload-declaration' | 'default' };
}

export { MAX_FEEDS };

const DECL_ENCODING = /^\s*<\?xml[^>]*?\bencoding\s*=\s*["']?([A-Za-z0-9._:-]{1,40})/;

// us-ascii is what Perl and old PHP declare while sending UTF-8 (a superset): read it as UTF-8.
// iso-8859-1 is read as windows-1252 (its superset, as browsers and the WHATWG decoder do).
const CHARSET_ALIASES: Record<string, string> = { 'us-ascii': 'utf-8', ascii: 'utf-8', 'ansi_x3.4-1968': 'utf-8', utf8: 'utf-8' };

function decodeBytes(buf: Buffer, label: string): string {
  const key = CHARSET_ALIASES[label] ?? label;
  if (key === 'utf-8') return buf.toString('utf8');
  let d: TextDecoder;
  try {
    d = new TextDecoder(key, { fatal: false });
  } catch {
    throw new RssPingError(`Unsupported character encoding ${JSON.stringify(label)}: send UTF-8 or ISO-8859-1.`);
  }
  if (d.encoding.startsWith('utf-16')) throw new RssPingError('UTF-16 rss_pings are not supported: send UTF-8 or ISO-8859-1.');
  return d.decode(buf);
}

/**
 * Rewrites every start tag with its attributes double-quoted, so that `<rss_ping version=2>` becomes
 * well-formed; comments, CDATA sections and processing instructions are left alone. With `budget`, the
 * attributes it writes are counted against it: they are what the parser will read, and on decoded text a
 * Unicode space separates unquoted attributes the pre-scan (which reads bytes) took for one.
 */
export function quoteAttributes(xml: string, budget?: { total: number }): string {
  let out = '';
  let i = 0;
  let total = 0;
  for (;;) {
    const lt = xml.indexOf('<', i);
    if (lt < 0) return out + xml.slice(i);
    out += xml.slice(i, lt);
    const rest = xml.slice(lt, lt + 9);
    const skipTo = rest.startsWith('<!--') ? '-->' : rest.startsWith('<![CDATA[') ? ']]>' : rest.startsWith('<?') ? '?>' : null;
    if (skipTo) {
      const e = xml.indexOf(skipTo, lt);
      if (e < 0) return out + xml.slice(lt);
      out += xml.slice(lt, e + skipTo.length);
      i = e + skipTo.length;
      continue;
    }
    const name = /^<([A-Za-z_][\w.:-]*)/.exec(xml.slice(lt, lt + 256));
    if (!name) {
      out += '<';
      i = lt + 1;
      continue;
    }
    const tag = readStartTag(xml, lt + name[0].length);
    if (!tag) return out + xml.slice(lt);
    if (budget) {
      if (tag.attrs.length > MAX_ATTRIBUTES_PER_ELEMENT) throw new RssPingError(refusal.attributesOnOneElement('rss_ping'));
      if ((total += tag.attrs.length) > budget.total) throw new RssPingError(refusal.attributes());
    }
    out += `<${name[1]}${tag.attrs.map((a) => ` ${a.name}="${escAttr(a.value)}"`).join('')}${tag.selfClosing ? '/>' : '>'}`;
    i = tag.end;
  }
}

const PAYLOAD_START = /<payload(?=[\s/>])/g;
const PAYLOAD_END = /<\/payload\s*>/g;

interface PayloadRegion {
  start: number;
  contentStart: number;
  contentEnd: number;
  end: number;
  attrs: Attr[];
}

/** Finds the one <payload> element in the (latin1 view of the) request, by string search. */
function findPayload(bin: string): PayloadRegion {
  PAYLOAD_START.lastIndex = 0;
  const m = PAYLOAD_START.exec(bin);
  if (!m)
    throw new RssPingError('The rss_ping has no <payload>: RSS Ping carries the new item (a feed with one item, an item or an entry).');
  const tag = readStartTag(bin, m.index + '<payload'.length);
  if (!tag) throw new RssPingError('The <payload> start tag is not closed.');
  if (tag.selfClosing) throw new RssPingError('The <payload> is empty: it must hold a feed with one item, an RSS item or an Atom entry.');
  // The last end tag: a CDATA section inside the payload may mention "</payload>" as text.
  let end: RegExpExecArray | null = null;
  PAYLOAD_END.lastIndex = tag.end;
  for (let e = PAYLOAD_END.exec(bin); e; e = PAYLOAD_END.exec(bin)) end = e;
  if (!end) throw new RssPingError('The <payload> element is not closed: </payload> is missing.');
  const region = { start: m.index, contentStart: tag.end, contentEnd: end.index, end: end.index + end[0].length, attrs: tag.attrs };
  const inner = bin.slice(region.contentStart, region.contentEnd);
  PAYLOAD_START.lastIndex = region.end;
  // Not /<\/payload\s*>[\s\S]*<payload[\s/>]/ on the inner text: that backtracks once per "</payload>"
  // in it (quadratic; 16,000 of them took 1.5 s). The first end tag, then a start tag after it, is linear.
  const innerEnd = /<\/payload\s*>/.exec(inner);
  if (PAYLOAD_START.exec(bin) || (innerEnd !== null && /<payload[\s/>]/.test(inner.slice(innerEnd.index))))
    throw new RssPingError('The rss_ping has more than one <payload>; send one item per ping.');
  return region;
}

const outerParser = new XMLParser({
  ...UNTRUSTED_XML,
  ignoreAttributes: false,
  attributeNamePrefix: '',
  attributesGroupName: '@',
  trimValues: true,
  // The parser refuses an element with more than maxNestedTags open ancestors: <rss_ping> nested MAX_DEPTH
  // deep is accepted (the pre-scan refuses deeper first; this only backs it up).
  maxNestedTags: MAX_DEPTH - 1,
  // Every child of <rss_ping> is a list, so that duplicates can be told apart from single elements.
  isArray: (_name, jpath, _leaf, isAttribute) => !isAttribute && String(jpath).split('.').length === 2,
});

type Node = string | { '#text'?: string; '@'?: Record<string, string>; [k: string]: unknown };

const SINGLE = ['site_name', 'site_uri', 'payload_hash', 'payload_hash_uri', 'publisher_mbox_hash'] as const;

function textOf(node: Node, element: string): string {
  if (typeof node === 'string') return node.trim();
  const children = Object.keys(node).filter((k) => k !== '#text' && k !== '@');
  if (children.length > 0) throw new RssPingError(`<${element}> must hold text, not elements.`);
  return String(node['#text'] ?? '').trim();
}

function attrsOf(node: Node): Record<string, string> {
  return typeof node === 'string' ? {} : (node['@'] ?? {});
}

/**
 * The hash algorithm named by an element's attributes. RSS Ping makes the attribute mandatory but never
 * names it (and its examples omit it), so any attribute whose value is a hash name is read; a value that
 * names another algorithm is refused, no attribute at all is null (the caller's default applies).
 */
export function hashAlgorithmOf(attrs: Record<string, string>, element: string): HashAlgorithm | null {
  const preferred = ['algorithm', 'type', 'hash', 'method', 'alg'];
  const names = [...preferred.filter((n) => n in attrs), ...Object.keys(attrs).filter((n) => !preferred.includes(n))];
  for (const n of names) {
    const v = attrs[n]
      .trim()
      .toLowerCase()
      .replace(/[-_\s]/g, '');
    if (v === 'sha1') return 'sha1';
    if (v === 'md5') return 'md5';
    if (preferred.includes(n) && v !== '')
      throw new RssPingError(`Unsupported hash algorithm ${JSON.stringify(attrs[n].slice(0, 40))} on <${element}>: use SHA1 or MD5.`);
  }
  return null;
}

/**
 * An rss_ping that passed the checks made before any parser runs (encoding, DOCTYPE, document element, one
 * payload, the pre-scan's limits): `siteUri` is what the caller may use to refuse a throttled weblog before
 * paying for the parse; the rest is for readRssPing.
 */
export interface ScannedRssPing {
  /** The text of the one <site_uri> when the pre-scan could read it (plain ASCII text); else null. */
  siteUri: string | null;
  /** Attributes the pre-scan counted in the payload and on its start tag. */
  readonly payloadAttributes: number;
  readonly buf: Buffer;
  readonly bin: string;
  readonly region: PayloadRegion;
  readonly charset: RssPingDocument['charset'] | null;
  readonly contentType: string | undefined;
}

/** The cheap half of parseRssPing: refuses what can be refused without parsing. Linear in the body. */
export function scanRssPing(body: Buffer | undefined, contentType?: string): ScannedRssPing {
  if (!body || body.length === 0 || body.toString('latin1').trim() === '')
    throw new RssPingError('Empty request: POST an rss_ping document.');
  let buf = body;
  let charset: RssPingDocument['charset'] | null = null;
  if (buf.length >= 2 && ((buf[0] === 0xfe && buf[1] === 0xff) || (buf[0] === 0xff && buf[1] === 0xfe))) {
    throw new RssPingError('UTF-16 rss_pings are not supported: send UTF-8 or ISO-8859-1.');
  }
  if (buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) {
    buf = buf.subarray(3);
    charset = { label: 'utf-8', from: 'bom' };
  }
  // Every supported encoding is ASCII-compatible: markup can be found in a byte-for-char view.
  const bin = buf.toString('latin1');
  const forbidden = forbiddenInRssPing(bin);
  if (forbidden) throw new RssPingError(forbidden);
  // Named first, so that another kind of document (an XML-RPC call sent here by mistake) is told so.
  const first = firstElementName(bin);
  if (first === null) throw new RssPingError('The request is not an XML document: POST an rss_ping document.');
  if (first !== 'rss_ping') throw new RssPingError(`The document element must be <rss_ping>, not <${first.slice(0, 40)}>.`);
  // The limits before findPayload, which reads the payload's start tag attribute by attribute.
  const scan = prescan(bin);
  if (!scan.ok) throw new RssPingError(scan.message);
  const region = findPayload(bin);
  return { siteUri: scan.siteUri, payloadAttributes: scan.payloadAttributes, buf, bin, region, charset, contentType };
}

/** Parses an rss_ping request body. Throws RssPingError (RSSPING_INVALID, 400) with the reason. */
export function parseRssPing(body: Buffer | undefined, contentType?: string): RssPingDocument {
  return readRssPing(scanRssPing(body, contentType));
}

/** The full parse of a scanned rss_ping (the outer document; the payload is parsed by payload.ts). */
export function readRssPing(scanned: ScannedRssPing): RssPingDocument {
  const { buf, bin, region, contentType } = scanned;
  let charset = scanned.charset;
  const payloadBin = bin.slice(region.contentStart, region.contentEnd);
  const rawAttrs = Object.fromEntries(region.attrs.map((a) => [a.name, decodeAttrValue(a.value)]));
  if (!charset) {
    const decl = DECL_ENCODING.exec(bin.slice(0, 256));
    const ct = contentTypeCharset(contentType);
    const innerDecl = DECL_ENCODING.exec(payloadBin.slice(0, 512));
    const attrEnc = rawAttrs.encoding?.trim();
    charset = decl
      ? { label: decl[1].toLowerCase(), from: 'declaration' }
      : ct
        ? { label: ct, from: 'content-type' }
        : attrEnc
          ? { label: attrEnc.toLowerCase(), from: 'payload-encoding' }
          : innerDecl
            ? { label: innerDecl[1].toLowerCase(), from: 'payload-declaration' }
            : { label: 'utf-8', from: 'default' };
  }
  const label = charset.label;
  const payloadBytes = buf.subarray(region.contentStart, region.contentEnd);
  const payloadText = decodeBytes(payloadBytes, label);
  const outerText = decodeBytes(Buffer.from(bin.slice(0, region.start) + '<payload/>' + bin.slice(region.end), 'latin1'), label);

  const fixed = quoteAttributes(outerText, { total: MAX_ATTRIBUTES - scanned.payloadAttributes });
  const valid = validatedLongText(fixed);
  // The validator's message can quote the whole open-tag stack (as long as the request): bound it.
  if (typeof valid !== 'string')
    throw new RssPingError(`The rss_ping is not well-formed XML (${valid.msg.slice(0, 200)} at line ${valid.line}).`);
  let doc: Record<string, unknown>;
  try {
    doc = outerParser.parse(valid) as Record<string, unknown>;
  } catch (err) {
    const m = (err as Error).message;
    throw new RssPingError(
      /nested/i.test(m) ? refusal.nestedTooDeep('rss_ping') : `The rss_ping is not well-formed XML (${m.slice(0, 200)}).`,
    );
  }
  const roots = Object.keys(doc).filter((k) => k !== '#text' && k !== '?xml');
  if (roots.length !== 1 || roots[0] !== 'rss_ping')
    throw new RssPingError(`The document element must be <rss_ping>, not <${(roots[0] ?? '').slice(0, 40)}>.`);
  const root = doc.rss_ping as Record<string, unknown> | string;
  if (typeof root !== 'object' || root === null) throw new RssPingError('The <rss_ping> element is empty.');
  const rootAttrs = (root['@'] as Record<string, string> | undefined) ?? {};
  const version = rootAttrs.version?.trim() ?? null;
  // RSS Ping: "version 2 (where 2.0 is implied if there is no '.0')". A missing version is read as 2.
  if (version !== null && !/^2(\.\d+)?$/.test(version))
    throw new RssPingError(`Unsupported rss_ping version ${JSON.stringify(version.slice(0, 20))}: this server reads version 2.`);

  const list = (name: string): Node[] => (Array.isArray(root[name]) ? (root[name] as Node[]) : []);
  for (const name of SINGLE) {
    if (list(name).length > 1) throw new RssPingError(`The rss_ping has more than one <${name}>.`);
  }
  const single = (name: (typeof SINGLE)[number]): { text: string; attrs: Record<string, string> } | null => {
    const n = list(name)[0];
    if (n === undefined) return null;
    const text = textOf(n, name);
    return text === '' ? null : { text, attrs: attrsOf(n) };
  };

  const siteName = single('site_name');
  const siteUri = single('site_uri');
  if (!siteName) throw new RssPingError('The rss_ping has no <site_name>.');
  if (!siteUri) throw new RssPingError('The rss_ping has no <site_uri>.');
  const feedNodes = list('feed_uri');
  if (feedNodes.length === 0) throw new RssPingError('The rss_ping has no <feed_uri>: name at least one feed the item comes from.');
  if (feedNodes.length > MAX_FEEDS) throw new RssPingError(`The rss_ping has more than ${MAX_FEEDS} <feed_uri> elements.`);
  const feeds: FeedRef[] = feedNodes.map((n) => {
    const uri = textOf(n, 'feed_uri');
    if (uri === '') throw new RssPingError('A <feed_uri> is empty.');
    const type = attrsOf(n).type?.replace(/\s+/g, ' ').trim();
    return { uri, type: type ? type : null };
  });

  const ph = single('payload_hash');
  const phu = single('payload_hash_uri');
  const pmh = single('publisher_mbox_hash');
  const payloadType = rawAttrs.type?.replace(/\s+/g, ' ').trim() || null;
  const payloadEncoding = rawAttrs.encoding?.trim() || null;
  return {
    version,
    siteName: siteName.text,
    siteUri: siteUri.text,
    feeds,
    payloadHash: ph ? { value: ph.text, algorithm: hashAlgorithmOf(ph.attrs, 'payload_hash') } : null,
    payloadHashUri: phu ? { uri: phu.text, algorithm: hashAlgorithmOf(phu.attrs, 'payload_hash_uri') } : null,
    publisherMboxHash: pmh ? { value: pmh.text, algorithm: hashAlgorithmOf(pmh.attrs, 'publisher_mbox_hash') } : null,
    payload: { bytes: Buffer.from(payloadBytes), text: payloadText, attributes: rawAttrs, type: payloadType, encoding: payloadEncoding },
    charset,
  };
}

/** Parses a feed_uri type such as "RSS 2.0" or "atom 0.3" into a canonical "Name version"; null if it is not one. */
export function canonicalFeedType(type: string | null): string | null {
  if (!type) return null;
  const m = /^([A-Za-z][\w-]*)\s+(\d+(?:\.\d+)*)$/.exec(type.trim());
  if (!m) return null;
  const name = m[1].toLowerCase();
  const canon = name === 'rss' ? 'RSS' : name === 'atom' ? 'Atom' : name === 'rdf' ? 'RDF' : m[1];
  return `${canon} ${m[2]}`;
}
