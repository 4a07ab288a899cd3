// Owns a faster way through fast-xml-parser for long text: the parser copies character data one character
// at a time and decodes references one by one (a 256 KiB description cost ~13 ms, escaped HTML ~25 ms),
// but takes a CDATA section with one indexOf. A long run of text whose references are all of the plain
// kinds (the five XML entities, numeric references to ordinary characters) is therefore handed over as a
// CDATA section holding exactly the characters the parser would have made of it; anything else is left
// as it is. The validator is then run on the result: the references it would have checked one by one were
// checked while decoding them, and markup is left exactly as sent, so the verdict is the same.
import { XMLValidator } from 'fast-xml-parser';

/** Shorter runs are left alone: a CDATA section saves nothing on them. */
const MIN_RUN = 256;

const XML_NAMED: Readonly<Record<string, string>> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

/**
 * A code point the parser decodes to itself whatever the document says: not NUL, C0 controls or
 * surrogates (removed, or kept, depending on the XML version), not CR (the parser's line-end
 * normalisation would turn a literal one into LF, but not a decoded one).
 */
const plainCodePoint = (cp: number) => cp === 9 || cp === 10 || (cp >= 0x20 && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff));

/** Where the named reference at `at` (just after its `&`) ends, and what it stands for; null if not one of the five. */
function namedReference(s: string, at: number): [string, number] | null {
  for (const name in XML_NAMED)
    if (s.startsWith(name, at) && s.charCodeAt(at + name.length) === 59) return [XML_NAMED[name], at + name.length + 1];
  return null;
}

/**
 * The code point of the numeric reference at `at` (just after its `&#`), and where it ends; null unless
 * it is `&#` 1–7 decimal digits `;` or `&#x` 1–6 hex digits `;` naming a plain code point. No regular
 * expression: a request may hold 50,000 of them.
 */
function numericReference(s: string, at: number): [number, number] | null {
  const hex = s.charCodeAt(at) === 120; // x
  let k = hex ? at + 1 : at;
  const first = k;
  let cp = 0;
  for (; ; k++) {
    const d = s.charCodeAt(k);
    const v = d >= 48 && d <= 57 ? d - 48 : hex && d >= 97 && d <= 102 ? d - 87 : hex && d >= 65 && d <= 70 ? d - 55 : -1;
    if (v < 0) break;
    cp = cp * (hex ? 16 : 10) + v;
  }
  const digits = k - first;
  if (digits === 0 || digits > (hex ? 6 : 7) || s.charCodeAt(k) !== 59 || !plainCodePoint(cp)) return null;
  return [cp, k + 1];
}

/**
 * The run (its line ends normalised) as the parser would make it (trimmed, then decoded), as CDATA; null
 * when that cannot be done exactly.
 */
function asCdata(run: string): string | null {
  // The parser trims the raw text and only then decodes it (so `&#32;x` keeps its space): the same here.
  const text = run.trim();
  if (text === '') return null;
  let decoded = '';
  let from = 0;
  for (let amp = text.indexOf('&'); amp >= 0; amp = text.indexOf('&', from)) {
    let ref: [string, number] | null;
    if (text.charCodeAt(amp + 1) === 35) {
      const n = numericReference(text, amp + 2);
      ref = n && [String.fromCodePoint(n[0]), n[1]];
    } else ref = namedReference(text, amp + 1);
    // Another reference (an HTML name, an odd spelling): the parser's own decoding decides.
    if (ref === null) return null;
    decoded += text.slice(from, amp) + ref[0];
    from = ref[1];
  }
  decoded += text.slice(from);
  return `<![CDATA[${decoded.replaceAll(']]>', ']]]]><![CDATA[>')}]]>`;
}

/** The index just after the markup starting at `lt`, found the way fast-xml-parser finds it; -1 if none. */
function markupEnd(xml: string, lt: number): number {
  const c = xml.charCodeAt(lt + 1);
  const after = (close: string, from: number) => {
    const e = xml.indexOf(close, from);
    return e < 0 ? -1 : e + close.length;
  };
  if (c === 47) return after('>', lt); // </
  if (c === 33 && xml.startsWith('--', lt + 2)) return after('-->', lt + 4);
  if (c === 33 && xml.charCodeAt(lt + 2) === 91) return after(']]>', lt); // <![
  if (c === 33 && xml.charCodeAt(lt + 2) === 68) return -1; // <!D: a DOCTYPE is never let through
  const pi = c === 63;
  // A start tag or a processing instruction: quoted values may hold the closing characters.
  for (let k = lt + 1; k < xml.length; k++) {
    const d = xml.charCodeAt(k);
    if (d === 34 || d === 39) {
      k = xml.indexOf(d === 34 ? '"' : "'", k + 1);
      if (k < 0) return -1;
    } else if (pi ? d === 63 && xml.charCodeAt(k + 1) === 62 : d === 62) return pi ? k + 2 : k + 1;
  }
  return -1;
}

/**
 * `xml` with its long text runs as CDATA sections; the parser makes the same tree of both. Linear. A run
 * is what the parser collects as one text value: everything between two pieces of markup inside the root,
 * comments excepted (the parser reads through them and joins the text on either side).
 */
export function longTextAsCdata(xml: string): string {
  const parts: string[] = [];
  let copied = 0;
  let depth = 0;
  let runStart = 0;
  let runPieces: number[] = []; // start and end of each piece of text in the run
  let runLength = 0;
  for (let i = 0; ;) {
    const lt = xml.indexOf('<', i);
    if (lt < 0) break; // text after the root is no element's text
    if (lt > i) {
      runPieces.push(i, lt);
      runLength += lt - i;
    }
    const next = markupEnd(xml, lt);
    if (next < 0) return xml; // not what the validator accepts: leave it all to the parser
    i = next;
    if (xml.startsWith('<!--', lt)) continue;
    if (depth > 0 && runLength >= MIN_RUN) {
      // Line ends as the parser normalises the whole document first, piece by piece (a CR before a
      // comment and an LF after it are two line ends, not one).
      let text = '';
      for (let k = 0; k < runPieces.length; k += 2) text += xml.slice(runPieces[k], runPieces[k + 1]).replace(/\r\n?/g, '\n');
      const cdata = asCdata(text);
      if (cdata !== null) {
        parts.push(xml.slice(copied, runStart), cdata);
        copied = lt;
      }
    }
    if (runPieces.length > 0) runPieces = [];
    runLength = 0;
    runStart = next;
    const c = xml.charCodeAt(lt + 1);
    if (c === 47) depth--;
    else if (c !== 33 && c !== 63 && xml.charCodeAt(next - 2) !== 47) depth++;
  }
  if (copied === 0) return xml;
  parts.push(xml.slice(copied));
  return parts.join('');
}

/**
 * `xml` with its long text as CDATA (see longTextAsCdata) when it is well-formed, else the validator's
 * error for `xml` as sent (its line numbers are the sender's). Validating after the handover, not before,
 * saves the validator's reference-by-reference walk (measured on 256 KiB of `&#233;`: validate, then
 * hand over ~20 ms; hand over, then validate ~8 ms).
 */
export function validatedLongText(xml: string): string | { msg: string; line: number } {
  const fast = longTextAsCdata(xml);
  if (XMLValidator.validate(fast) === true) return fast;
  const v = XMLValidator.validate(xml);
  // Not well-formed after the handover but well-formed before would be a mistake here: read it as sent.
  return v === true ? xml : { msg: v.err.msg, line: v.err.line };
}
