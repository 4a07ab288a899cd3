// Owns what rssCloud's endpoints answer, as pure functions: the messages rsscloud-server (the protocol's
// reference implementation, Dave Winer's and Andrew Shell's) sends, byte for byte where a client could match
// on them, its REST answer (`<result success="true" msg="…"/>` or `<notifyResult …/>`, or the same as JSON
// when the client asks for it), and the choice between the two by the Accept header, as Express's
// req.accepts('xml', 'json') makes it there.
import { stripControls } from '../../platform/xml/escape.js';

/** rsscloud-server's messages (services/app-messages.js), without the HTML it puts around the protocol name. */
export const MSG = {
  pingThanks: 'Thanks for the ping.',
  subscribed:
    "Thanks for the registration. It worked. When the resource updates we'll notify you. Don't forget to re-register after 24 hours, your subscription will expire in 25. Keep on truckin!",
  missing: (names: readonly string[]) => `The following parameters were missing from the request body: ${names.join(', ')}.`,
  badProtocol: (p: string) => `Can't accept the subscription because the protocol, ${p}, is unsupported.`,
  noResources: 'No resources specified.',
  readResource: (url: string, why: string) =>
    `The subscription was cancelled because there was an error reading the resource at URL ${url}: ${why}.`,
  failedHandler: (why: string) => `The subscription was cancelled because the call failed when we tested the handler: ${why}.`,
  notEnoughParams: (m: string) => `Can't call "${m}" because there aren't enough parameters.`,
  tooManyParams: (m: string) => `Can't call "${m}" because there are too many parameters.`,
} as const;

/** The fault code rsscloud-server answers every failed XML-RPC call with. */
export const RSSCLOUD_FAULT = 4;

export type Element = 'result' | 'notifyResult';

/**
 * An attribute value as xmlbuilder escapes it (&, <, " and the whitespace controls as references; the
 * apostrophe of "Don't" left as it is), after removing what XML cannot carry.
 */
function attr(s: string): string {
  return stripControls(s).replace(/[&<"\t\n\r]/g, (c) => ATTR_ESC[c]);
}
const ATTR_ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '"': '&quot;', '\t': '&#x9;', '\n': '&#xA;', '\r': '&#xD;' };

/** The REST answer as rsscloud-server's xmlbuilder writes it: a declaration, a newline, one empty element. */
export function resultXml(element: Element, success: boolean, msg: string): string {
  return `<?xml version="1.0"?>\n<${element} success="${success ? 'true' : 'false'}" msg="${attr(msg)}"/>`;
}

export function resultJson(success: boolean, msg: string): string {
  return JSON.stringify({ success, msg });
}

/**
 * XML or JSON by the Accept header, as Express's req.accepts('xml', 'json') chooses there (the negotiator
 * package): no header is XML; otherwise the type with the higher quality, then the one the client listed
 * first, XML when a wildcard alone takes both; null when neither is acceptable (406). The range that applies
 * to a type is its most specific one (text/xml over text/* over *\/*, RFC 9110 §12.5.1).
 */
export function negotiate(accept: string | undefined): 'xml' | 'json' | null {
  if (accept === undefined || accept.trim() === '') return 'xml';
  const best = { xml: { q: 0, spec: -1, at: Infinity }, json: { q: 0, spec: -1, at: Infinity } };
  const ranges = accept.split(',').slice(0, 64);
  for (const [at, part] of ranges.entries()) {
    const [range, ...params] = part.trim().toLowerCase().split(';');
    let q = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([0-9.]+)\s*$/.exec(p);
      if (m) q = Math.max(0, Math.min(1, Number(m[1]) || 0));
    }
    const [type, sub] = range.trim().split('/');
    if (sub === undefined) continue;
    const spec = type === '*' ? 0 : sub === '*' ? 1 : 2;
    const takes = {
      xml: type === '*' || ((type === 'text' || type === 'application') && (sub === '*' || sub === 'xml')),
      json: type === '*' || (type === 'application' && (sub === '*' || sub === 'json')),
    };
    for (const k of ['xml', 'json'] as const) if (takes[k] && spec > best[k].spec) best[k] = { q, spec, at };
  }
  const { xml, json } = best;
  if (xml.q === 0 && json.q === 0) return null;
  if (json.q !== xml.q) return json.q > xml.q ? 'json' : 'xml';
  return json.at < xml.at ? 'json' : 'xml';
}
