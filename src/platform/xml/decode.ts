// Owns turning request bytes into text: the charset comes from the byte-order mark, then the XML
// declaration, then the HTTP Content-Type, then UTF-8 (XML 1.0 §4.3.3, Appendix F). Fastify's string
// parsing would always assume UTF-8, which garbles Latin-1 clients.
import { PingdError } from '../errors.js';

export class CharsetError extends PingdError<'CHARSET_UNSUPPORTED'> {
  constructor(message: string) {
    super('CHARSET_UNSUPPORTED', message);
  }
}

// Labels real clients send that the WHATWG decoder would read differently from what they mean.
// us-ascii: Perl RPC::XML declares it and then sends UTF-8 bytes; UTF-8 is a superset, so read it as UTF-8.
const ALIASES: Record<string, string> = {
  'us-ascii': 'utf-8',
  ascii: 'utf-8',
  'ansi_x3.4-1968': 'utf-8',
  utf8: 'utf-8',
};

const decoders = new Map<string, TextDecoder>();

function decoderFor(label: string): TextDecoder {
  const key = ALIASES[label] ?? label;
  let d = decoders.get(key);
  if (!d) {
    try {
      // Not fatal: invalid sequences become U+FFFD, so stored text is always valid Unicode.
      // iso-8859-1 maps to windows-1252 here (WHATWG), which is what such clients actually send.
      d = new TextDecoder(key, { fatal: false, ignoreBOM: false });
    } catch {
      throw new CharsetError(`unsupported character encoding ${JSON.stringify(label)}`);
    }
    decoders.set(key, d);
  }
  return d;
}

const DECL = /^\s*<\?xml[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9._:-]{1,40})["']/;

/** The charset parameter of a Content-Type header, lower-cased, if any. */
export function contentTypeCharset(contentType: string | undefined): string | undefined {
  if (!contentType) return undefined;
  const m = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType);
  return m ? m[1].toLowerCase() : undefined;
}

/** Decodes an XML document's bytes to a string (without BOM), choosing the charset as XML says. */
export function decodeXml(buf: Buffer, contentType?: string): string {
  if (buf.length >= 2) {
    if (buf[0] === 0xfe && buf[1] === 0xff) return decoderFor('utf-16be').decode(buf);
    if (buf[0] === 0xff && buf[1] === 0xfe) return decoderFor('utf-16le').decode(buf);
  }
  if (buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) return decoderFor('utf-8').decode(buf);
  // The declaration is ASCII in every ASCII-compatible charset; look only at the start.
  const head = buf.subarray(0, 256).toString('latin1');
  const m = DECL.exec(head);
  const label = (m?.[1] ?? contentTypeCharset(contentType) ?? 'utf-8').toLowerCase();
  if (label === 'utf-8' || ALIASES[label] === 'utf-8') return buf.toString('utf8');
  // REGRESSION: Node 20's one-shot decode() reads windows-1252 (and the iso-8859-1/latin1 labels that
  // mean it) as Latin-1, so 0x80–0x9F became control characters instead of € ’ — (nodejs/node#56542);
  // the streaming form decodes them right.
  const d = decoderFor(label);
  return d.decode(buf, { stream: true }) + d.decode();
}
