// Owns the bearer-token check of every token-guarded route (the operator API, GET /metrics): the token read
// out of an `Authorization: Bearer <token>` header (RFC 6750 section 2.1) in one linear pass, refused by
// length before any work, and compared in constant time.
import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * The longest Authorization header read at all (beyond a token this long plus its scheme and spaces):
 * anything longer is refused before it is scanned or hashed. Node lets a stranger send 16 KiB of headers.
 */
const HEADER_SLACK = 256;
const MIN_HEADER_CAP = 4096;

const sha256 = (s: string): Buffer => createHash('sha256').update(s).digest();

/** Whitespace as `\s` means it (the pattern this replaced trimmed with it). */
function isSpace(code: number): boolean {
  if (code === 0x20 || (code >= 0x09 && code <= 0x0d)) return true;
  if (code < 0xa0) return false;
  return (
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000 ||
    code === 0xfeff
  );
}

/**
 * The token of `Bearer <token>` (scheme case-insensitive, one or more spaces after it, trailing spaces
 * ignored), or undefined. A scan from each end, not a pattern: `/^Bearer\s+(.+?)\s*$/i` backtracked
 * quadratically over a run of spaces (313 ms of event loop for one 16 KB header, issue 43).
 */
export function bearerToken(header: string | undefined, maxLength = MIN_HEADER_CAP): string | undefined {
  if (header === undefined || header.length > maxLength || header.length < 8) return undefined;
  if (header.slice(0, 6).toLowerCase() !== 'bearer' || !isSpace(header.charCodeAt(6))) return undefined;
  let start = 7;
  let end = header.length;
  while (start < end && isSpace(header.charCodeAt(start))) start++;
  while (end > start && isSpace(header.charCodeAt(end - 1))) end--;
  return start < end ? header.slice(start, end) : undefined;
}

/**
 * A check of Authorization headers against `token`: true only for `Bearer <token>`. Both sides are hashed
 * before the comparison, so its time says nothing of the token's length or content; a header too long to
 * hold it is refused first, at the cost of one length comparison.
 */
export function bearerCheck(token: string): (header: string | undefined) => boolean {
  const expected = sha256(token);
  const cap = Math.max(MIN_HEADER_CAP, token.length + HEADER_SLACK);
  return (header) => {
    const given = bearerToken(header, cap);
    return given !== undefined && timingSafeEqual(sha256(given), expected);
  };
}
