// Owns the check every reader of untrusted XML runs on the decoded text before any parser sees it: no DTD
// and no markup declaration (a DTD can declare entities: billion laughs, external entities; a declaration
// outside one is not well-formed, and fast-xml-parser read `<!ATTLIST …>` as a start tag that swallowed
// what followed), and no element named after an Object.prototype key (it would poison plain objects).
// `<(?:\s*\/)?\s*`, not `<\s*\/?\s*`: the same strings, but the latter splits a run of whitespace after a
// `<` between its two \s* in quadratically many ways (64 kB of newlines after one `<` took 5 s).
const FORBIDDEN = /<!(DOCTYPE|ENTITY|ELEMENT|ATTLIST|NOTATION)|<(?:\s*\/)?\s*(__proto__|constructor|prototype)\b/i;

/** What makes the text unreadable, as the start of a sentence ("… not allowed in X."); null when nothing does. */
export function forbiddenMarkup(text: string): string | null {
  const bad = FORBIDDEN.exec(text);
  if (!bad) return null;
  if (bad[2] !== undefined) return `The element name ${bad[2]} is`;
  const kind = bad[1].toUpperCase();
  return kind === 'DOCTYPE' || kind === 'ENTITY' ? 'DOCTYPE and entity declarations are' : `Markup declarations (<!${kind}) are`;
}
