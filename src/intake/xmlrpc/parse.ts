// Owns reading an XML-RPC methodCall (https://xmlrpc.com/spec.md) into a method name and typed params,
// leniently as real clients write it (untyped <value>x</value>, empty values, base64 strings) and strictly
// about what could hurt us (DTDs, entity declarations, prototype names, nesting).
import { forbiddenMarkup } from '../../platform/xml/forbidden.js';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { decodeXml, CharsetError } from '../../platform/xml/decode.js';
import { fastParseMethodCall } from './fast-parse.js';
import type { MethodCall, XmlRpcValue } from './values.js';
import { PingdError } from '../../platform/errors.js';
import { UNTRUSTED_XML } from '../../platform/xml/parser-options.js';
import { trimEndChar } from '../../platform/text/trim.js';

export type { MethodCall, XmlRpcValue };

/** Interoperable fault codes (http://xmlrpc-epi.sourceforge.net/specs/rfc.fault_codes.php). */
export const FAULT = {
  PARSE_ERROR: -32700,
  UNSUPPORTED_ENCODING: -32701,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
} as const;

/** A call we refuse with an XML-RPC fault (answered with HTTP 200, the fault in the body). */
export class XmlRpcFault extends PingdError<'XMLRPC_FAULT'> {
  constructor(
    readonly faultCode: number,
    readonly faultString: string,
  ) {
    super('XMLRPC_FAULT', faultString);
  }
}

export const MAX_PARAMS = 32;
export const MAX_VALUE_DEPTH = 16;

/** Elements nested deeper than this are refused (MAX_VALUE_DEPTH value levels need about 3 × MAX_VALUE_DEPTH + 4). */
export const MAX_ELEMENT_DEPTH = 100;

const parser = new XMLParser({
  ...UNTRUSTED_XML,
  // fast-xml-parser refuses only when an element is opened beyond maxNestedTags + 1 levels (measured:
  // 100 let 101 levels through, while the docs promise 100).
  maxNestedTags: MAX_ELEMENT_DEPTH - 1,
  ignoreAttributes: true,
  trimValues: false,
  isArray: (_name, jpath) => {
    const p = String(jpath);
    return p.endsWith('.param') || p.endsWith('.member') || p.endsWith('data.value');
  },
});

export function parseMethodCall(body: Buffer | undefined, contentType?: string): MethodCall {
  if (!body || body.length === 0) throw new XmlRpcFault(FAULT.PARSE_ERROR, 'Empty request: POST an XML-RPC methodCall document.');
  let text: string;
  try {
    text = decodeXml(body, contentType);
  } catch (err) {
    if (err instanceof CharsetError) throw new XmlRpcFault(FAULT.UNSUPPORTED_ENCODING, `Unsupported encoding: ${err.message}.`);
    throw err;
  }
  if (text.trim() === '') throw new XmlRpcFault(FAULT.PARSE_ERROR, 'Empty request: POST an XML-RPC methodCall document.');
  const what = forbiddenMarkup(text);
  if (what) throw new XmlRpcFault(FAULT.PARSE_ERROR, `Parse error: ${what} not allowed in XML-RPC.`);
  // Nearly every ping has one shape, which a scanner reads ~20x faster than the XML parser (profiled);
  // anything else, and every fault, goes through the full parser below.
  return fastParseMethodCall(text) ?? parseMethodCallText(text);
}

/** The full path: any well-formed methodCall, every fault. Also the reference the fast path is tested against. */
export function parseMethodCallText(text: string): MethodCall {
  const valid = XMLValidator.validate(text);
  if (valid !== true) {
    // The validator's message can quote the whole open-tag stack (800 kB for 100k unclosed tags): bound it.
    const msg = valid.err.msg.length > 200 ? `${valid.err.msg.slice(0, 200)}…` : valid.err.msg;
    throw new XmlRpcFault(
      FAULT.PARSE_ERROR,
      `Parse error: not well-formed XML (${msg} at line ${valid.err.line}, column ${valid.err.col}).`,
    );
  }
  let doc: Record<string, unknown>;
  try {
    doc = parser.parse(text) as Record<string, unknown>;
  } catch (err) {
    // What the validator lets through but the parser refuses: nesting beyond MAX_ELEMENT_DEPTH, an
    // unclosed processing instruction after the root element. Without this they were internal errors.
    const m = String((err as Error).message);
    throw new XmlRpcFault(
      FAULT.PARSE_ERROR,
      /nested/i.test(m)
        ? `Parse error: elements nested deeper than ${MAX_ELEMENT_DEPTH} levels.`
        : `Parse error: ${trimEndChar(m.slice(0, 200), '.')}.`,
    );
  }
  const call = doc.methodCall as Record<string, unknown> | undefined;
  const rootNames = Object.keys(doc).filter((k) => k !== '#text');
  if (!call || typeof call !== 'object' || rootNames.length !== 1) {
    throw new XmlRpcFault(FAULT.INVALID_REQUEST, 'Invalid request: the document element must be <methodCall>.');
  }
  const rawName = call.methodName;
  if (typeof rawName !== 'string' || rawName.trim() === '') {
    throw new XmlRpcFault(FAULT.INVALID_REQUEST, 'Invalid request: <methodCall> needs a <methodName>.');
  }
  const methodName = rawName.trim();
  if (!/^[A-Za-z0-9_.:/]{1,128}$/.test(methodName))
    throw new XmlRpcFault(FAULT.METHOD_NOT_FOUND, 'Method not found: the method name has characters XML-RPC does not allow.');
  const params: XmlRpcValue[] = [];
  const ps = call.params;
  if (ps !== undefined && typeof ps === 'object' && ps !== null) {
    const list = (ps as Record<string, unknown>).param;
    if (Array.isArray(list)) {
      if (list.length > MAX_PARAMS) throw new XmlRpcFault(FAULT.INVALID_PARAMS, `Invalid params: more than ${MAX_PARAMS} parameters.`);
      for (const p of list) {
        if (p === null || typeof p !== 'object' || !('value' in p))
          throw new XmlRpcFault(FAULT.INVALID_REQUEST, 'Invalid request: every <param> needs a <value>.');
        params.push(toValue((p as Record<string, unknown>).value, 0));
      }
    }
  } else if (typeof ps === 'string' && ps.trim() !== '') {
    throw new XmlRpcFault(FAULT.INVALID_REQUEST, 'Invalid request: <params> holds text instead of <param> elements.');
  }
  return { methodName, params };
}

const TYPES = new Set(['string', 'base64', 'i4', 'int', 'i8', 'boolean', 'double', 'dateTime.iso8601', 'nil', 'array', 'struct']);

function toValue(v: unknown, depth: number): XmlRpcValue {
  if (depth > MAX_VALUE_DEPTH)
    throw new XmlRpcFault(FAULT.INVALID_PARAMS, `Invalid params: values nested deeper than ${MAX_VALUE_DEPTH} levels.`);
  // Untyped <value>x</value> is a string (spec); <value></value> or <value/> is the empty string.
  if (typeof v === 'string') return { type: 'string', value: v };
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new XmlRpcFault(FAULT.INVALID_REQUEST, 'Invalid request: malformed <value>.');
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  const typed = keys.filter((k) => k !== '#text');
  if (typed.length !== 1) {
    throw new XmlRpcFault(
      FAULT.INVALID_REQUEST,
      typed.length === 0 ? 'Invalid request: malformed <value>.' : 'Invalid request: a <value> holds more than one element.',
    );
  }
  if (typeof o['#text'] === 'string' && o['#text'].trim() !== '')
    throw new XmlRpcFault(FAULT.INVALID_REQUEST, 'Invalid request: a <value> mixes text and a typed element.');
  const t = typed[0];
  if (!TYPES.has(t)) throw new XmlRpcFault(FAULT.INVALID_REQUEST, `Invalid request: unknown value type <${t.slice(0, 40)}>.`);
  const inner = o[t];
  if (Array.isArray(inner)) throw new XmlRpcFault(FAULT.INVALID_REQUEST, 'Invalid request: a <value> holds more than one element.');
  const text = (): string => {
    if (typeof inner === 'string') return inner;
    if (inner === undefined || inner === null) return '';
    throw new XmlRpcFault(FAULT.INVALID_REQUEST, `Invalid request: <${t}> must hold text.`);
  };
  switch (t) {
    case 'string':
      return { type: 'string', value: text() };
    case 'base64': {
      const s = text().replace(/\s+/g, '');
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s)) throw new XmlRpcFault(FAULT.INVALID_PARAMS, 'Invalid params: <base64> is not valid base64.');
      return { type: 'base64', value: Buffer.from(s, 'base64') };
    }
    case 'i4':
    case 'int':
    case 'i8': {
      const s = text().trim();
      if (!/^[+-]?\d{1,19}$/.test(s)) throw new XmlRpcFault(FAULT.INVALID_PARAMS, `Invalid params: <${t}> is not an integer.`);
      return { type: 'int', value: Number(s) };
    }
    case 'boolean': {
      const s = text().trim();
      if (s !== '0' && s !== '1') throw new XmlRpcFault(FAULT.INVALID_PARAMS, 'Invalid params: <boolean> must be 0 or 1.');
      return { type: 'boolean', value: s === '1' };
    }
    case 'double': {
      const s = text().trim();
      const n = Number(s);
      if (s === '' || !Number.isFinite(n)) throw new XmlRpcFault(FAULT.INVALID_PARAMS, 'Invalid params: <double> is not a number.');
      return { type: 'double', value: n };
    }
    case 'dateTime.iso8601':
      return { type: 'dateTime', value: text().trim() };
    case 'nil':
      return { type: 'nil' };
    case 'array': {
      if (isBlank(inner)) return { type: 'array', value: [] };
      const data = (inner as Record<string, unknown>)?.data;
      if (isBlank(data)) return { type: 'array', value: [] };
      const values = (data as Record<string, unknown>)?.value;
      if (!Array.isArray(values)) throw new XmlRpcFault(FAULT.INVALID_REQUEST, 'Invalid request: malformed <array>.');
      return { type: 'array', value: values.map((x) => toValue(x, depth + 1)) };
    }
    case 'struct': {
      const out = new Map<string, XmlRpcValue>();
      if (isBlank(inner)) return { type: 'struct', value: out };
      const members = (inner as Record<string, unknown>)?.member;
      if (!Array.isArray(members)) throw new XmlRpcFault(FAULT.INVALID_REQUEST, 'Invalid request: malformed <struct>.');
      for (const m of members) {
        const name = (m as Record<string, unknown>)?.name;
        if (typeof name !== 'string' || !('value' in (m as object)))
          throw new XmlRpcFault(FAULT.INVALID_REQUEST, 'Invalid request: a <member> needs a <name> and a <value>.');
        out.set(name, toValue((m as Record<string, unknown>).value, depth + 1));
      }
      return { type: 'struct', value: out };
    }
  }
  throw new XmlRpcFault(FAULT.INVALID_REQUEST, 'Invalid request: malformed <value>.');
}

function isBlank(v: unknown): boolean {
  return v === undefined || v === null || (typeof v === 'string' && v.trim() === '');
}

/** A string parameter as a ping needs it: strings and untyped values as they are, base64 decoded as UTF-8. */
export function asString(v: XmlRpcValue | undefined): string | null | undefined {
  if (v === undefined) return undefined;
  if (v.type === 'string') return v.value;
  if (v.type === 'base64') return new TextDecoder('utf-8').decode(v.value);
  if (v.type === 'nil') return null;
  return undefined;
}
