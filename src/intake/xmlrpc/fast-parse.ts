// Owns the fast path of reading a methodCall: a scanner for the exact shape nearly every ping has (string
// or untyped parameters, no comments, no attributes) that gives the same result as the full parser in a
// few microseconds instead of ~50 (profiled: fast-xml-parser's validate + parse was the largest
// cost of a ping). Anything it does not recognise, including every input that must be refused, returns
// undefined and goes through the full parser (parse.ts), which stays the reference: a property test
// checks the two agree on the fixture corpus and on generated inputs.
import type { MethodCall, XmlRpcValue } from './values.js';

const MAX_FAST_PARAMS = 32;
// What the full parser accepts as a declaration at the very start of the document (a subset of it).
const DECL =
  /^<\?xml[ \t\r\n]+version[ \t\r\n]*=[ \t\r\n]*(?:"1\.[0-9]"|'1\.[0-9]')(?:[ \t\r\n]+encoding[ \t\r\n]*=[ \t\r\n]*(?:"[A-Za-z][A-Za-z0-9._-]*"|'[A-Za-z][A-Za-z0-9._-]*'))?(?:[ \t\r\n]+standalone[ \t\r\n]*=[ \t\r\n]*(?:"(?:yes|no)"|'(?:yes|no)'))?[ \t\r\n]*\?>/;
const METHOD_NAME = /^[A-Za-z0-9_.:/]{1,128}$/;
// The references decoded here; any other `&` sends the document to the full parser.
const REF = /&(?:(amp|lt|gt|quot|apos)|#([0-9]{1,7})|#x([0-9a-fA-F]{1,6}));/g;
const PREDEFINED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d;
}

function skipWs(s: string, i: number): number {
  while (i < s.length && isWs(s.charCodeAt(i))) i++;
  return i;
}

// Code points whose numeric reference the full parser turns into the character itself (it drops or keeps
// others literally); outside these, the document takes the full path.
function plainCodePoint(cp: number): boolean {
  return (
    (cp >= 0x20 && cp < 0x7f) ||
    (cp >= 0xa0 && cp < 0xd800) ||
    (cp >= 0xe000 && cp < 0xfffe) ||
    (cp >= 0x10000 && cp <= 0x10ffff) ||
    cp === 0x09 ||
    cp === 0x0a
  );
}

/** Character data between tags: line ends normalised as XML says, references decoded; undefined = not handled here. */
function charData(raw: string): string | undefined {
  let s = raw;
  if (s.includes('\r')) s = s.replace(/\r\n?/g, '\n');
  if (!s.includes('&')) return s;
  // A `&` that is not one of these references (HTML names, malformed ones): the full parser decides.
  if (s.replace(REF, '').includes('&')) return undefined;
  let bad = false;
  const out = s.replace(REF, (_m, name: string | undefined, dec: string | undefined, hex: string | undefined) => {
    if (name) return PREDEFINED[name];
    const cp = dec !== undefined ? parseInt(dec, 10) : parseInt(hex as string, 16);
    if (!plainCodePoint(cp)) bad = true;
    return bad ? '' : String.fromCodePoint(cp);
  });
  return bad ? undefined : out;
}

const CDATA_OPEN = '<![CDATA[';

/** Reads `<value>…</value>` at i; returns the value and the index after it, or undefined. */
function readValue(s: string, i: number): [XmlRpcValue, number] | undefined {
  if (s.startsWith('<value/>', i)) return [{ type: 'string', value: '' }, i + 8];
  if (!s.startsWith('<value>', i)) return undefined;
  i += 7;
  let j = s.indexOf('<', i);
  if (j < 0) return undefined;
  if (s.startsWith('</value>', j)) {
    // Untyped: the text itself, whitespace included (XML-RPC spec).
    const v = charData(s.slice(i, j));
    return v === undefined ? undefined : [{ type: 'string', value: v }, j + 8];
  }
  // A typed value: only whitespace may stand around its element.
  for (let k = i; k < j; k++) if (!isWs(s.charCodeAt(k))) return undefined;
  let value: string | undefined;
  if (s.startsWith('<string/>', j)) {
    value = '';
    j += 9;
  } else if (s.startsWith('<string>', j)) {
    const start = j + 8;
    const r = readText(s, start, '</string>');
    if (!r) return undefined;
    [value, j] = r;
  } else if (s.startsWith(CDATA_OPEN, j) && j === i) {
    const r = readCdata(s, j, '</value>');
    if (!r) return undefined;
    return [{ type: 'string', value: r[0] }, r[1]];
  } else return undefined;
  j = skipWs(s, j);
  if (!s.startsWith('</value>', j)) return undefined;
  return [{ type: 'string', value }, j + 8];
}

/** Text (or one CDATA section) up to the closing tag `close` at start; returns it and the index after the tag. */
function readText(s: string, start: number, close: string): [string, number] | undefined {
  if (s.startsWith(CDATA_OPEN, start)) return readCdata(s, start, close);
  const end = s.indexOf('<', start);
  if (end < 0 || !s.startsWith(close, end)) return undefined;
  const v = charData(s.slice(start, end));
  return v === undefined ? undefined : [v, end + close.length];
}

function readCdata(s: string, start: number, close: string): [string, number] | undefined {
  const end = s.indexOf(']]>', start + CDATA_OPEN.length);
  if (end < 0 || !s.startsWith(close, end + 3)) return undefined;
  let v = s.slice(start + CDATA_OPEN.length, end);
  if (v.includes('\r')) v = v.replace(/\r\n?/g, '\n');
  return [v, end + 3 + close.length];
}

/**
 * The methodCall in `text` if it has the common shape, else undefined (then the full parser decides,
 * including every fault). Never throws.
 */
export function fastParseMethodCall(text: string): MethodCall | undefined {
  let i = 0;
  if (text.startsWith('<?xml')) {
    const m = DECL.exec(text);
    if (!m) return undefined;
    i = m[0].length;
  }
  i = skipWs(text, i);
  if (!text.startsWith('<methodCall>', i)) return undefined;
  i = skipWs(text, i + 12);
  if (!text.startsWith('<methodName>', i)) return undefined;
  i += 12;
  const nameEnd = text.indexOf('<', i);
  if (nameEnd < 0 || !text.startsWith('</methodName>', nameEnd)) return undefined;
  const rawName = text.slice(i, nameEnd);
  if (rawName.includes('&') || rawName.includes('\r')) return undefined;
  const methodName = rawName.trim();
  if (!METHOD_NAME.test(methodName)) return undefined;
  i = skipWs(text, nameEnd + 13);
  const params: XmlRpcValue[] = [];
  if (text.startsWith('<params>', i)) {
    i += 8;
    for (;;) {
      i = skipWs(text, i);
      if (text.startsWith('</params>', i)) {
        i += 9;
        break;
      }
      if (!text.startsWith('<param>', i) || params.length >= MAX_FAST_PARAMS) return undefined;
      i = skipWs(text, i + 7);
      const r = readValue(text, i);
      if (!r) return undefined;
      params.push(r[0]);
      i = skipWs(text, r[1]);
      if (!text.startsWith('</param>', i)) return undefined;
      i += 8;
    }
    i = skipWs(text, i);
  }
  if (!text.startsWith('</methodCall>', i)) return undefined;
  if (skipWs(text, i + 13) !== text.length) return undefined;
  return { methodName, params };
}
