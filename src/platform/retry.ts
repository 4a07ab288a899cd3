// Owns when a client of another server tries again, for every one pingd runs (verification, the WebSub hub,
// the relay) and for the embedded database reopening: a Retry-After value read as an absolute time, and the
// doubling backoff after failures in a row.

const DAY = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const MONTH = '(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)';
/** IMF-fixdate, the obsolete RFC 850 form, and asctime. */
const HTTP_DATE = new RegExp(
  `^(?:${DAY}, \\d{2} ${MONTH} \\d{4} \\d{2}:\\d{2}:\\d{2} GMT|${DAY}[a-z]*, \\d{2}-${MONTH}-\\d{2} \\d{2}:\\d{2}:\\d{2} GMT|${DAY} ${MONTH} [ \\d]\\d \\d{2}:\\d{2}:\\d{2} \\d{4})$`,
);

/**
 * A Retry-After value (delay-seconds or an HTTP-date) as an absolute time, or undefined when absent or
 * unreadable. Capped at a week: a header is a hint from a stranger, not a reason to forget a host.
 */
export function retryAfter(value: string | string[] | undefined, now: Date, capMs = 7 * 86400_000): Date | undefined {
  const v = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!v) return undefined;
  let at: number;
  if (/^\d+$/.test(v)) at = now.getTime() + Number(v) * 1000;
  else {
    // Only the three HTTP-date forms (RFC 9110 §5.6.7): Date.parse alone takes "+3600" for the year 3600.
    if (!HTTP_DATE.test(v)) return undefined;
    at = Date.parse(v);
    if (!Number.isFinite(at)) return undefined;
  }
  return new Date(Math.min(Math.max(at, now.getTime()), now.getTime() + capMs));
}

/**
 * The wait after `failures` failures in a row: `baseMs`, doubled with each further failure, up to `maxMs`
 * (no failure yet waits `baseMs`). The exponent stops at 30: 2^30 ms is 12 days, past every maximum pingd
 * sets, and a huge count never makes a base of 0 into 0 × Infinity (NaN).
 */
export function doublingBackoffMs(failures: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, Math.min(failures - 1, 30)));
}
