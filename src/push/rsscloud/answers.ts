// Owns what rssCloud's endpoints answer, as pure functions: the messages rsscloud-server (the protocol's
// reference implementation, Dave Winer's and Andrew Shell's) sends, byte for byte where a client could match
// on them, its REST answer as 4.0.0 writes it (`<result success="true" msg="…"/>` or `<notifyResult …/>`
// after xml2js's declaration, or the same as JSON when the client asks for it), and the choice between the
// two by the Accept header, made by the negotiator package as Express's req.accepts('xml', 'json') makes it
// there.
import Negotiator from 'negotiator';
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
  // pingd's own: rsscloud-server 4.0.0 takes an xml-rpc subscription without a procedure and then calls
  // a method with an empty name, which no subscriber can answer.
  noProcedure: 'The notifyProcedure must be given for the xml-rpc protocol: the name of the method to call on the endpoint.',
  badProcedure: 'The notifyProcedure must be an XML-RPC method name (letters, digits, _ . : /), at most 128 characters.',
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

/**
 * The declaration rsscloud-server 4.0.0 writes (xml2js 0.6's Builder, over xmlbuilder 11). 2.x and 3.0.0
 * wrote `<?xml version="1.0"?>` (xmlbuilder 15's create()); an XML parser reads either, and FeedLand's
 * (xml2js.parseString) and the 4.0.0 suite's (chai-xml) compare what follows it.
 */
export const XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>';

/** The REST answer as rsscloud-server 4.0.0 writes it: the declaration, a newline, one empty element. */
export function resultXml(element: Element, success: boolean, msg: string): string {
  return `${XML_DECLARATION}\n<${element} success="${success ? 'true' : 'false'}" msg="${attr(msg)}"/>`;
}

export function resultJson(success: boolean, msg: string): string {
  return JSON.stringify({ success, msg });
}

/** What an answer can be sent as, in the order a tie goes: XML first, rsscloud-server's default. */
const ANSWER_TYPES = ['text/xml', 'application/xml', 'application/json'];
/** Ranges of an Accept header read: far above any client's, and a hostile 16 KiB header costs no more. */
const MAX_RANGES = 64;

/**
 * XML or JSON by the Accept header, chosen by the negotiator package as Express's req.accepts('xml', 'json')
 * chooses it in rsscloud-server (accepts → negotiator): no header, or an empty one, is XML without asking
 * it; otherwise the type with the higher quality, then the more specific range (RFC 9110 §12.5.1), then the
 * one the client listed first, XML on a tie; null when neither is acceptable (406). One difference, on
 * purpose: pingd offers text/xml (the type it answers with) beside application/xml, where Express maps
 * 'xml' to application/xml alone and answers `Accept: text/xml` with 406.
 */
export function negotiate(accept: string | undefined): 'xml' | 'json' | null {
  if (accept === undefined || accept.trim() === '') return 'xml';
  const type = new Negotiator({ headers: { accept: firstRanges(accept, MAX_RANGES) } }).mediaType(ANSWER_TYPES);
  if (type === undefined) return null;
  return type === 'application/json' ? 'json' : 'xml';
}

function firstRanges(accept: string, n: number): string {
  let at = -1;
  for (let i = 0; i < n; i++) {
    at = accept.indexOf(',', at + 1);
    if (at === -1) return accept;
  }
  return accept.slice(0, at);
}
