// Owns the markdown pieces every generated page shares: a table, and a generated block between
// `<!-- generated:NAME -->` and `<!-- /generated -->` in a page whose other text is written by hand.

export function table(head: string[], rows: string[][]): string {
  return [`| ${head.join(' | ')} |`, `| ${head.map(() => '---').join(' | ')} |`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

/**
 * Puts `block` between `<!-- generated:name -->` and the next `<!-- /generated -->` of `page`. Throws when
 * the markers are missing: a page that lost them must be fixed by hand, not silently left stale.
 */
export function fillBlock(page: string, name: string, block: string, file = 'page'): string {
  const start = `<!-- generated:${name} -->`;
  const end = '<!-- /generated -->';
  const a = page.indexOf(start);
  const b = a < 0 ? -1 : page.indexOf(end, a);
  if (a < 0 || b < 0) throw new Error(`${file} has no ${start} … ${end} block`);
  return `${page.slice(0, a + start.length)}\n${block.trim()}\n${page.slice(b)}`;
}
