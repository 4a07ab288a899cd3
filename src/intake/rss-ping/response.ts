// Owns the rss_ping reply document: `<rss_ping_response><flerror>0|1</flerror><message>…</message>
// </rss_ping_response>` (plus, on success, the authentication level the ping was stored with), built with
// xmlbuilder2. Its layout does not change: the XML declaration and a newline, the whole element on one
// line, a final newline.
import { create } from 'xmlbuilder2';
import { escapeXml } from '../../platform/xml/escape.js';
import type { AuthLevel } from './payload-repository.js';

const DECLARATION = '<?xml version="1.0" encoding="utf-8"?>\n';

export function rssPingResponseXml(flerror: boolean, message: string, auth?: AuthLevel): string {
  const root = create().ele('rss_ping_response');
  root.ele('flerror').txt(flerror ? '1' : '0');
  // xmlbuilder2 writes characters XML 1.0 forbids as they are, and leaves an `&` that starts a reference
  // (`&amp;`, `&bogus;`) unescaped: the text goes in escaped by escapeXml, which it then writes unchanged.
  root.ele('message').txt(escapeXml(message));
  if (auth) root.ele('authentication').txt(auth);
  return `${DECLARATION}${root.end({ headless: true })}\n`;
}
