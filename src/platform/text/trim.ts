// Owns cutting strings at a character in linear time: what `/\/+$/` or `/%.*$/` would do, without a pattern
// the regex engine retries from every position (quadratic over a long run; `regexp/no-super-linear-move`).
// Pure: text in, text out.

/** `s` without the run of `ch` (one character) at its end: `trimEndChar('a//', '/') === 'a'`. */
export function trimEndChar(s: string, ch: string): string {
  let end = s.length;
  while (end > 0 && s[end - 1] === ch) end--;
  return end === s.length ? s : s.slice(0, end);
}

/** `s` up to the first `ch` (all of it when there is none): `beforeChar('fe80::1%eth0', '%') === 'fe80::1'`. */
export function beforeChar(s: string, ch: string): string {
  const i = s.indexOf(ch);
  return i < 0 ? s : s.slice(0, i);
}
