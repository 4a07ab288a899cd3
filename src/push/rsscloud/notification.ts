// Owns what an rssCloud subscriber is sent, as pure functions, byte for byte as rsscloud-server 4.0.0 sends
// it: for http-post and https-post a form POST of url=<resource> (rest-plugin.ts notifyBody); for xml-rpc a
// POST of an XML-RPC call of the subscriber's notifyProcedure with one parameter, the resource's URL, as an
// untyped value (a string, XML-RPC spec "Scalar <value>s"; xml-rpc-plugin.ts buildNotifyCall: "the
// historical rssCloud notify shape"), written as xml2js 0.6 writes it (declaration, two-space indent).
import type { Protocol } from './params.js';
import { XML_DECLARATION } from './answers.js';

export interface NotifyTarget {
  protocol: Protocol;
  /** The method an xml-rpc endpoint is called with (null for http-post, https-post). */
  notifyProcedure: string | null;
}

export interface NotifyBody {
  contentType: string;
  body: Buffer;
}

/** Text content as xmlbuilder 11 escapes it: &, <, > and CR as references, quotes left as they are. */
function text(s: string): string {
  return s.replace(/[&<>\r]/g, (c) => TEXT_ESC[c]);
}
const TEXT_ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '\r': '&#xD;' };

/** The XML-RPC call that tells an xml-rpc endpoint `resourceUrl` changed. */
export function notifyCallXml(procedure: string, resourceUrl: string): string {
  return (
    `${XML_DECLARATION}\n<methodCall>\n  <methodName>${text(procedure)}</methodName>\n  <params>\n    <param>\n` +
    `      <value>${text(resourceUrl)}</value>\n    </param>\n  </params>\n</methodCall>`
  );
}

/** The request that tells `target` that `resourceUrl` changed (the endpoint check sends the same). */
export function notifyBody(target: NotifyTarget, resourceUrl: string): NotifyBody {
  if (target.protocol === 'xml-rpc')
    return { contentType: 'text/xml', body: Buffer.from(notifyCallXml(target.notifyProcedure ?? '', resourceUrl)) };
  return { contentType: 'application/x-www-form-urlencoded', body: Buffer.from(new URLSearchParams({ url: resourceUrl }).toString()) };
}
