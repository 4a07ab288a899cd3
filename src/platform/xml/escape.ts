// Owns the characters we never publish (what XML 1.0 cannot carry) and all escaping for what we write as
// XML: text, single- or double-quoted attribute values, and the fast double-quoted attribute escaper of the
// large weblogUpdates documents (the pages' HTML is escaped by their Eta templates). Everything written is
// well-formed and reads back as given, minus the removed characters. A utility: it imports nothing from the
// domain layers.

// The characters we remove before anything is stored or published. XML 1.0 §2.2 (Char) excludes the C0
// controls other than tab, LF and CR, U+FFFE/U+FFFF and unpaired surrogates; DEL and the C1 controls are
// allowed but discouraged there (and must be references in XML 1.1), so they go too. Tab, LF and CR are
// whitespace: kept here, folded to a space in names. One character class, used by every regex below.
const FORBIDDEN_CLASS = '\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F\\uFFFE\\uFFFF';
const CONTROL = new RegExp(`[${FORBIDDEN_CLASS}]|[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])|(?<![\\uD800-\\uDBFF])[\\uDC00-\\uDFFF]`, 'g');

/** Tests for any character stripControls would remove (not global: `test` keeps no state). */
export const HAS_CONTROL = new RegExp(CONTROL.source);

/** Removes characters that cannot appear in published XML (controls, lone surrogates, U+FFFE/F). */
export function stripControls(s: string): string {
  return s.replace(CONTROL, '');
}

const XML_ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

/**
 * Escapes text for element content or a quoted attribute value (both quote styles). Every `&` in the
 * result starts one of the five predefined entity references, so xmlbuilder2 (which leaves an `&` that
 * starts a reference alone) writes the result unchanged: the small documents built with it pass their
 * text through here first.
 */
export function escapeXml(s: string): string {
  const clean = stripControls(s);
  return /[&<>"']/.test(clean) ? clean.replace(/[&<>"']/g, (c) => XML_ESC[c]) : clean;
}

// Anything that needs escaping or removing; the fast path (most names and URLs) is one regex test. Any
// surrogate takes the slow path, where stripControls keeps the paired ones.
const NEEDS_WORK = new RegExp(`[&<>"\\t\\n\\r${FORBIDDEN_CLASS}\\uD800-\\uDFFF]`);
const SPECIAL = /[&<>"\t\n\r]/g;
// Tab, LF and CR are written as character references: a parser would otherwise normalise them to spaces
// in attribute values (XML 1.0 §3.3.3), and what we publish must read back exactly as stored.
const ENTITY: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  '\t': '&#9;',
  '\n': '&#10;',
  '\r': '&#13;',
};

/**
 * Escapes text for a double-quoted XML attribute value, removing characters XML 1.0 forbids. On the hot
 * path of rendering documents of a million entries: keep the fast path one regex test.
 */
export function escapeAttr(s: string): string {
  if (!NEEDS_WORK.test(s)) return s;
  return stripControls(s).replace(SPECIAL, (c) => ENTITY[c]);
}
