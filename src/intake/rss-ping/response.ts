// Owns the rss_ping reply document: `<rss_ping_response><flerror>0|1</flerror><message>…</message>
// </rss_ping_response>` (plus, on success, the authentication level the ping was stored with).
import { escapeXml } from '../../platform/xml/escape.js';
import type { AuthLevel } from './payload-repository.js';

export function rssPingResponseXml(flerror: boolean, message: string, auth?: AuthLevel): string {
  return (
    `<?xml version="1.0" encoding="utf-8"?>\n<rss_ping_response><flerror>${flerror ? 1 : 0}</flerror><message>${escapeXml(message)}</message>` +
    (auth ? `<authentication>${auth}</authentication>` : '') +
    '</rss_ping_response>\n'
  );
}
