// Owns escaping for everything we write as XML or HTML: text and attribute values with characters XML
// 1.0 forbids removed first, so that published documents are always well-formed.
import { stripControls } from '../../intake/ping/validate.js';

const XML_ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };
const HTML_ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for element content or a quoted attribute value (both quote styles). */
export function escapeXml(s: string): string {
  const clean = stripControls(s);
  return /[&<>"']/.test(clean) ? clean.replace(/[&<>"']/g, (c) => XML_ESC[c]) : clean;
}

/** Escapes text for HTML element content or a quoted attribute. */
export function escapeHtml(s: string): string {
  const clean = stripControls(s);
  return /[&<>"']/.test(clean) ? clean.replace(/[&<>"']/g, (c) => HTML_ESC[c]) : clean;
}
