// Owns reading HTML written by strangers as a stream of tokens: parse5's tokenizer (the WHATWG tokenizer,
// character references decoded, comments and CDATA as a browser reads them), with the one piece of tree
// construction that changes tokens: after <script>, <style>, <title> and the like, their content is text
// until their end tag. No tree and no stack of open elements are kept, so the cost is linear in the text
// whatever its shape. Measured on 5 MB of one token repeated: htmlparser2's Parser took 376 s on
// `<skipHours>` (it unshifts every open element onto an array), parse5's SAX parser is quadratic the same
// way on `<svg>` (its namespace stack); this tokenizer takes 0.3–0.5 s on every shape tried.
import { Tokenizer, TokenizerMode, type TokenHandler } from 'parse5';

export interface HtmlVisitor {
  /** A start tag (name lower-cased, attributes decoded, the first of a repeated name kept); true stops reading. */
  startTag?(name: string, attrs: ReadonlyMap<string, string>): boolean | void;
  endTag?(name: string): void;
  /** Text between tags (character references decoded); true stops reading. */
  text?(chars: string): boolean | void;
}

/** Text-only elements: the tokenizer state the tree builder would switch to after their start tag. */
const TEXT_STATE: Record<string, (typeof TokenizerMode)[keyof typeof TokenizerMode]> = {
  title: TokenizerMode.RCDATA,
  textarea: TokenizerMode.RCDATA,
  style: TokenizerMode.RAWTEXT,
  xmp: TokenizerMode.RAWTEXT,
  iframe: TokenizerMode.RAWTEXT,
  noembed: TokenizerMode.RAWTEXT,
  noframes: TokenizerMode.RAWTEXT,
  script: TokenizerMode.SCRIPT_DATA,
  plaintext: TokenizerMode.PLAINTEXT,
};

/** The text is handed to the tokenizer this much at a time, so that a stop takes effect soon. */
const CHUNK = 16 * 1024;

/** Reads `html` token by token until its end or until the visitor says stop. */
export function scanHtml(html: string, visitor: HtmlVisitor): void {
  let stopped = false;
  const text = (token: { chars: string }) => {
    if (!stopped && visitor.text?.(token.chars)) stopped = true;
  };
  const handler: TokenHandler = {
    onStartTag(token) {
      if (stopped) return;
      const attrs = new Map<string, string>();
      for (const a of token.attrs) if (!attrs.has(a.name)) attrs.set(a.name, a.value);
      if (visitor.startTag?.(token.tagName, attrs)) {
        stopped = true;
        return;
      }
      const state = TEXT_STATE[token.tagName];
      if (state !== undefined && !token.selfClosing) tokenizer.state = state;
    },
    onEndTag(token) {
      if (!stopped) visitor.endTag?.(token.tagName);
    },
    onCharacter: text,
    onWhitespaceCharacter: text,
    onNullCharacter() {},
    onComment() {},
    onDoctype() {},
    onEof() {},
  };
  const tokenizer = new Tokenizer({ sourceCodeLocationInfo: false }, handler);
  for (let i = 0; i < html.length && !stopped; i += CHUNK) tokenizer.write(html.slice(i, i + CHUNK), i + CHUNK >= html.length);
  if (html.length === 0) tokenizer.write('', true);
}
