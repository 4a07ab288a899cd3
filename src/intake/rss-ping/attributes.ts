// Owns the lenient reader of start-tag attributes RSS Ping needs: its examples write unquoted values
// (`<rss_ping version=2>`), which no XML parser reads, so attributes are read here by hand, honouring
// quotes, and written back quoted and escaped; and decoding the references in a value read this way.

/** One attribute of a start tag, as the lenient attribute reader found it. */
export interface Attr {
  name: string;
  value: string;
}

/**
 * Reads the attributes of a start tag from `s` starting at `i` (just after the element name) up to the
 * closing `>`, honouring quotes. Unquoted values (`version=2`) and value-less names are accepted.
 * Returns the attributes, whether the tag is self-closing, and the index just after `>`; null when the
 * tag never closes.
 */
export function readStartTag(s: string, i: number): { attrs: Attr[]; selfClosing: boolean; end: number } | null {
  const attrs: Attr[] = [];
  const n = s.length;
  for (;;) {
    while (i < n && /\s/.test(s[i])) i++;
    if (i >= n) return null;
    if (s[i] === '>') return { attrs, selfClosing: false, end: i + 1 };
    if (s[i] === '/' && s[i + 1] === '>') return { attrs, selfClosing: true, end: i + 2 };
    const nameMatch = /^[^\s=/>"'<]+/.exec(s.slice(i, i + 256));
    if (!nameMatch) return null;
    const name = nameMatch[0];
    i += name.length;
    while (i < n && /\s/.test(s[i])) i++;
    if (s[i] !== '=') {
      attrs.push({ name, value: '' });
      continue;
    }
    i++;
    while (i < n && /\s/.test(s[i])) i++;
    if (s[i] === '"' || s[i] === "'") {
      const close = s.indexOf(s[i], i + 1);
      if (close < 0) return null;
      attrs.push({ name, value: s.slice(i + 1, close) });
      i = close + 1;
    } else {
      const m = /^[^\s>]+/.exec(s.slice(i, i + 2048));
      let v = m ? m[0] : '';
      // `version=2/>`: the slash closes the tag, it is not part of the value.
      if (v.endsWith('/') && s[i + v.length] === '>') v = v.slice(0, -1);
      attrs.push({ name, value: v });
      i += v.length;
    }
  }
}

/** Escapes a value for a double-quoted attribute, keeping the references already written. */
export const escAttr = (v: string) =>
  v
    .replace(/&(?![a-zA-Z]+;|#[0-9]+;|#x[0-9a-fA-F]+;)/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/"/g, '&quot;');

/** Decodes the five XML entities and character references in an attribute value we read ourselves. */
export function decodeAttrValue(v: string): string {
  return v.replace(/&(#[0-9]{1,7}|#x[0-9a-fA-F]{1,6}|lt|gt|amp|quot|apos);/g, (m, r: string) => {
    if (r[0] === '#') {
      const cp = r[1] === 'x' ? parseInt(r.slice(2), 16) : parseInt(r.slice(1), 10);
      return cp > 0 && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff) ? String.fromCodePoint(cp) : '';
    }
    return ({ lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" } as Record<string, string>)[r] ?? m;
  });
}
