// Owns what of a stranger's text pingd republishes: links only as absolute http(s) URLs, HTML only as its
// plain text, and lines (titles) without the invisible characters that make text read other than it is.
// Consumers render what a ping server publishes (feed readers, search pages, the stream's clients), so a
// `javascript:` link or a `<script>` in a summary we pass on is ours. Pure: text in, text out.
import { scanHtml } from './html-tokens.js';
import { stripControls } from '../xml/escape.js';

/**
 * Characters that change how text displays without being seen: bidirectional embeddings, overrides and
 * isolates (a title can read backwards: Trojan Source, CVE-2021-42574), zero-width spaces and joiners
 * that hide a word, the BOM, soft hyphens, the Mongolian vowel separator, interlinear annotations and
 * the language tag. Kept: ZWNJ and ZWJ (U+200C/D), which Persian, Indic scripts and emoji sequences need.
 */
const INVISIBLE = /[\u00AD\u061C\u180E\u200B\u200E\u200F\u202A-\u202E\u2060-\u2064\u2066-\u206F\uFEFF\uFFF9-\uFFFB]|\u{E0001}/gu;

/** Removes controls (stripControls) and the invisible characters above. */
export function stripInvisible(s: string): string {
  return stripControls(s).replace(INVISIBLE, '');
}

/** Whitespace folded to single spaces, trimmed, invisible characters removed, at most `max` code points (… marks a cut). */
export function cleanLine(s: string, max: number): string {
  // Only the first 2 × max + 2 UTF-16 units are spread into code points: a 5 MB title is not spread whole.
  const t = stripInvisible(s.length > 4 * max + 8 ? s.slice(0, 4 * max + 8) : s)
    .replace(/\s+/g, ' ')
    .trim();
  if (t.length <= max) return t;
  const cps = [...t.slice(0, 2 * max + 2)];
  return cps.length > max
    ? cps
        .slice(0, max - 1)
        .join('')
        .trimEnd() + '…'
    : t;
}

const MAX_LINK = 2048;

/**
 * A link as we publish it: absolute http(s) (a relative one resolved against `base`, the document it came
 * from), without credentials or controls, at most 2048 characters; anything else (javascript:, data:,
 * vbscript:, mailto:, a URL that does not parse) is null.
 */
export function publishableLink(raw: string | null | undefined, base?: string): string | null {
  if (!raw) return null;
  const t = raw.trim();
  if (!t || t.length > MAX_LINK) return null;
  let u: URL;
  try {
    u = base ? new URL(t, base) : new URL(t);
  } catch {
    return null;
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.username || u.password || !u.hostname) return null;
  const href = u.href;
  return href.length <= MAX_LINK ? href : null;
}

/** Elements whose content is not text a reader sees. */
const HIDDEN = new Set([
  'script',
  'style',
  'template',
  'noscript',
  'iframe',
  'noembed',
  'noframes',
  'object',
  'svg',
  'math',
  'head',
  'title',
  'textarea',
  'xmp',
]);
/** Elements that separate words (a line break between two paragraphs becomes a space). */
const BREAKS = new Set([
  'p',
  'br',
  'div',
  'li',
  'tr',
  'td',
  'th',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'blockquote',
  'pre',
  'hr',
  'img',
  'section',
  'article',
  'dd',
  'dt',
]);
/** Elements with no end tag: they never open a hidden region. */
const VOID = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'source', 'track', 'wbr']);

/**
 * The text a reader would see in an HTML fragment (an RSS description, Atom html content): tags removed,
 * scripts, styles and embedded frames dropped, character references decoded, then cleanLine. Read with an
 * HTML tokenizer (html-tokens.ts: linear; a regex over tags was quadratic in an earlier part of pingd) and
 * stopped once 2 × max characters of text are in hand. Null when no text is left.
 */
export function htmlToText(html: string, max: number): string | null {
  let out = '';
  let hidden = 0;
  const enough = 2 * max + 2;
  scanHtml(html, {
    startTag(name) {
      if (HIDDEN.has(name) && !VOID.has(name)) hidden++;
      else if (BREAKS.has(name)) out += ' ';
    },
    endTag(name) {
      if (HIDDEN.has(name)) hidden = Math.max(0, hidden - 1);
      else if (BREAKS.has(name)) out += ' ';
    },
    text(chars) {
      if (hidden === 0) out += chars;
      return out.length >= enough;
    },
  });
  const t = cleanLine(out, max);
  return t === '' ? null : t;
}
