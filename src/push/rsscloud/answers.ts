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
 * XML or JSON by the Accept header, as Express's req.accepts('xml', 'json'): no header (or any type) is
 * XML; otherwise the type with the higher quality, XML on a tie; null when neither is acceptable (406).
 */
export function negotiate(accept: string | undefined): 'xml' | 'json' | null {
  if (accept === undefined || accept.trim() === '') return 'xml';
  let xml = 0;
  let json = 0;
  // Specificity decides which range applies to a type (text/xml over text/* over */*), as RFC 9110 §12.5.1 says.
  let xmlSpec = -1;
  let jsonSpec = -1;
  for (const part of accept.split(',').slice(0, 64)) {
    const [range, ...params] = part.trim().toLowerCase().split(';');
    let q = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([0-9.]+)\s*$/.exec(p);
      if (m) q = Math.max(0, Math.min(1, Number(m[1]) || 0));
    }
    const [type, sub] = range.trim().split('/');
    if (sub === undefined) continue;
    const spec = type === '*' ? 0 : sub === '*' ? 1 : 2;
    const takesXml = type === '*' || ((type === 'text' || type === 'application') && (sub === '*' || sub === 'xml'));
    const takesJson = type === '*' || (type === 'application' && (sub === '*' || sub === 'json'));
    if (takesXml && spec > xmlSpec) [xml, xmlSpec] = [q, spec];
    if (takesJson && spec > jsonSpec) [json, jsonSpec] = [q, spec];
  }
  if (xml === 0 && json === 0) return null;
  return json > xml ? 'json' : 'xml';
}
