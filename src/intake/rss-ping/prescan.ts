// Owns what is checked on an rss_ping before any XML parser runs: markup that must never be parsed (a DTD,
// Object.prototype names), the document element's name, and one linear pass that counts what makes parsing
// expensive (elements, attributes, nesting, comments/CDATA/PIs), refuses a document beyond the limits below
// and reads <site_uri> when it is plain text, so that a throttled weblog can be answered before the parse.
// A payload is one item (RSS Ping, "Payload"): the limits are far above what a real rss_ping holds; they
// bound what a hostile one costs.
import { forbiddenMarkup } from '../../platform/xml/forbidden.js';

/** Element nesting, counted from <rss_ping> (1), <payload> (2) and down through the payload: docs/design/hostile-input.md, "Limits". */
export const MAX_DEPTH = 100;
/** Elements in the whole request, payload included: a one-item feed has tens, a long XHTML entry a few hundred. */
export const MAX_ELEMENTS = 1000;
/** Attributes in the whole request (namespace declarations included): an element costs ~10 µs to parse, an attribute ~3. */
export const MAX_ATTRIBUTES = 1000;
/** Attributes on one element: a feed's root declares at most a few dozen namespaces. */
export const MAX_ATTRIBUTES_PER_ELEMENT = 64;
/** Comments, CDATA sections and processing instructions together: a payload has a handful. */
export const MAX_OTHER_MARKUP = 1000;
/** feed_uri elements (RSS Ping, "Core Elements"): one per format a site publishes. */
export const MAX_FEEDS = 20;

/** Why the request cannot be read at all (a DTD or declaration, an Object.prototype name); null when neither is there. */
export function forbiddenInRssPing(s: string): string | null {
  const what = forbiddenMarkup(s);
  if (!what) return null;
  return what.startsWith('The element name') ? `${what} not allowed.` : `${what} not allowed in an rss_ping.`;
}

/**
 * The name of the first element, after any processing instructions and comments; null if there is none.
 * A loop, not a regular expression: /^(?:<\?[\s\S]*?\?>\s*|<!--[\s\S]*?-->\s*)*</ backtracks
 * exponentially in the number of leading PIs or comments (30 of them blocked the event loop for seconds).
 */
export function firstElementName(s: string): string | null {
  let i = 0;
  for (;;) {
    while (i < s.length && /\s/.test(s[i])) i++;
    if (s.startsWith('<?', i)) {
      const e = s.indexOf('?>', i + 2);
      if (e < 0) return null;
      i = e + 2;
    } else if (s.startsWith('<!--', i)) {
      const e = s.indexOf('-->', i + 4);
      if (e < 0) return null;
      i = e + 3;
    } else break;
  }
  const m = /^<([A-Za-z_][\w.:-]*)/.exec(s.slice(i, i + 257));
  return m ? m[1] : null;
}

export type Prescan =
  | {
      ok: true;
      /** The text of the one <site_uri>, when it is plain ASCII text (no references, CDATA or comments); else null. */
      siteUri: string | null;
      /** Attributes counted in the payload and on its start tag: what the rest of the rss_ping may add to. */
      payloadAttributes: number;
    }
  | { ok: false; message: string };

type Where = 'payload' | 'rss_ping';
const fmt = (n: number) => n.toLocaleString('en-US');

/** The refusals, worded once: the pre-scan and the attribute fix in parse.ts give the same ones. */
export const refusal = {
  nestedTooDeep: (where: Where) =>
    `The ${where} is not well-formed XML (elements nested deeper than ${MAX_DEPTH} levels, counting from <rss_ping>).`,
  elements: () => `The rss_ping has more than ${fmt(MAX_ELEMENTS)} elements (payload included).`,
  attributes: () => `The rss_ping has more than ${fmt(MAX_ATTRIBUTES)} attributes (payload included).`,
  attributesOnOneElement: (where: Where) => `An element of the ${where} has more than ${fmt(MAX_ATTRIBUTES_PER_ELEMENT)} attributes.`,
  otherMarkup: () => `The rss_ping has more than ${fmt(MAX_OTHER_MARKUP)} comments, CDATA sections and processing instructions.`,
  feeds: () => `The rss_ping has more than ${MAX_FEEDS} <feed_uri> elements.`,
};

// Character codes.
const LT = 60,
  GT = 62,
  SLASH = 47,
  QMARK = 63,
  BANG = 33,
  EQ = 61,
  DQ = 34,
  SQ = 39,
  AMP = 38;
// What \s matches in a latin1 string, as the lenient reader (attributes.ts, readStartTag) splits attributes.
const isSpace = (c: number) => c === 32 || (c >= 9 && c <= 13) || c === 0xa0;
// An attribute name as the lenient reader takes it: up to 256 of [^\s=/>"'<].
const isAttrNameChar = (c: number) => !isSpace(c) && c !== EQ && c !== SLASH && c !== GT && c !== DQ && c !== SQ && c !== LT;
const isAsciiNameStart = (c: number) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
const isAsciiNameChar = (c: number) => isAsciiNameStart(c) || (c >= 48 && c <= 57) || c === 46 || c === 58 || c === 45;
// The start of an element name; any non-ASCII byte may start one (UTF-8 names), counting too many is safe.
const isNameStart = (c: number) => isAsciiNameStart(c) || c === 58 || c >= 128;

/**
 * Scans the request (its latin1 view: every supported encoding is ASCII-compatible, so markup is found byte
 * for byte). A refusal says whether the payload (the content of <rss_ping>'s <payload>) or the rest of the
 * rss_ping is at fault. Linear in the length of `s`.
 */
export function prescan(s: string): Prescan {
  const n = s.length;
  let depth = 0;
  let elements = 0;
  let attributes = 0;
  let other = 0;
  let feeds = 0;
  let siteUris = 0;
  let siteUri: string | null = null;
  let payloadAttributes = 0;
  let payloadDepth = 0; // the depth of the open <payload>, 0 outside it
  let i = 0;
  for (;;) {
    const lt = s.indexOf('<', i);
    if (lt < 0 || lt + 1 >= n) break;
    const c = s.charCodeAt(lt + 1);
    if (c === SLASH) {
      const gt = s.indexOf('>', lt + 2);
      if (gt < 0) break;
      if (depth > 0) depth--;
      if (depth < payloadDepth) payloadDepth = 0;
      i = gt + 1;
      continue;
    }
    if (c === QMARK || c === BANG) {
      if (++other > MAX_OTHER_MARKUP) return { ok: false, message: refusal.otherMarkup() };
      // Where each ends, searched from where the parser searches (so that `<!-->` is no comment).
      const [close, from] =
        c === QMARK ? ['?>', 2] : s.startsWith('<!--', lt) ? ['-->', 4] : s.startsWith('<![CDATA[', lt) ? [']]>', 9] : ['>', 2];
      const e = s.indexOf(close, lt + from);
      if (e < 0) break;
      i = e + close.length;
      continue;
    }
    if (!isNameStart(c)) {
      i = lt + 1; // a "<" that starts no tag: the validator says what is wrong with it
      continue;
    }
    // The name as the attribute fix reads it ([A-Za-z_][\w.:-]*: what follows is attributes), else up to a space.
    let j = lt + 2;
    if (isAsciiNameStart(c)) while (j < n && isAsciiNameChar(s.charCodeAt(j))) j++;
    else while (j < n && !isSpace(s.charCodeAt(j)) && s.charCodeAt(j) !== SLASH && s.charCodeAt(j) !== GT) j++;
    const name = depth === 1 ? s.slice(lt + 1, j) : '';
    const inPayload = payloadDepth > 0 || (name === 'payload' && payloadDepth === 0);
    const where = payloadDepth > 0 ? 'payload' : 'rss_ping';
    if (++elements > MAX_ELEMENTS) return { ok: false, message: refusal.elements() };
    if (depth + 1 > MAX_DEPTH) return { ok: false, message: refusal.nestedTooDeep(where) };
    // The attributes, read as parse.ts reads them: quoted or unquoted values, value-less names.
    let own = 0;
    let selfClosing = false;
    let closed = false;
    for (;;) {
      while (j < n && isSpace(s.charCodeAt(j))) j++;
      if (j >= n) break;
      const d = s.charCodeAt(j);
      if (d === GT) {
        closed = true;
        j++;
        break;
      }
      if (d === SLASH && s.charCodeAt(j + 1) === GT) {
        closed = selfClosing = true;
        j += 2;
        break;
      }
      const nameStart = j;
      while (j < n && j - nameStart < 256 && isAttrNameChar(s.charCodeAt(j))) j++;
      if (j === nameStart) break; // not an attribute: the tag is malformed, and the validator will say so
      if (++own > MAX_ATTRIBUTES_PER_ELEMENT) return { ok: false, message: refusal.attributesOnOneElement(where) };
      if (++attributes > MAX_ATTRIBUTES) return { ok: false, message: refusal.attributes() };
      if (inPayload) payloadAttributes++;
      while (j < n && isSpace(s.charCodeAt(j))) j++;
      if (s.charCodeAt(j) !== EQ) continue;
      j++;
      while (j < n && isSpace(s.charCodeAt(j))) j++;
      const q = s.charCodeAt(j);
      if (q === DQ || q === SQ) {
        const e = s.indexOf(q === DQ ? '"' : "'", j + 1);
        if (e < 0) {
          j = n;
          break;
        }
        j = e + 1;
      } else {
        const valueStart = j;
        while (j < n && j - valueStart < 2048 && !isSpace(s.charCodeAt(j)) && s.charCodeAt(j) !== GT) j++;
        // `version=2/>`: the slash closes the tag (as in parse.ts).
        if (j > valueStart && s.charCodeAt(j - 1) === SLASH && s.charCodeAt(j) === GT) j--;
      }
    }
    if (!closed) {
      if (j >= n) break;
      i = j; // a malformed tag: go on from where it stopped making sense
      continue;
    }
    if (depth === 1) {
      if (name === 'feed_uri' && ++feeds > MAX_FEEDS) return { ok: false, message: refusal.feeds() };
      if (name === 'site_uri' && ++siteUris === 1 && !selfClosing) siteUri = plainText(s, j, 'site_uri');
      if (name === 'payload' && !selfClosing && payloadDepth === 0) payloadDepth = 2;
    }
    if (!selfClosing) depth++;
    i = j;
  }
  return { ok: true, siteUri: siteUris === 1 ? siteUri : null, payloadAttributes };
}

/** The content from `from` to `</name>` when it is plain ASCII text (no markup, no references); else null. */
function plainText(s: string, from: number, name: string): string | null {
  const lt = s.indexOf('<', from);
  if (lt < 0 || s.charCodeAt(lt + 1) !== SLASH || !s.startsWith(name, lt + 2)) return null;
  let k = lt + 2 + name.length;
  while (k < s.length && isSpace(s.charCodeAt(k))) k++;
  if (s.charCodeAt(k) !== GT) return null;
  const text = s.slice(from, lt);
  for (let t = 0; t < text.length; t++) {
    const c = text.charCodeAt(t);
    if (c === AMP || c >= 128) return null;
  }
  return text.trim();
}
