// Owns reading an application/x-www-form-urlencoded body (WebSub §5.1, rssCloud's REST calls) strictly:
// percent-escapes must decode to UTF-8 (the WHATWG URL standard's form encoding) and the body's own bytes
// must be UTF-8. A lenient parser kept `%FF` as the three characters `%FF` (fast-querystring, when
// decoding fails) or turned bytes into U+FFFD, and the hub stored and answered 202 for a topic no client
// meant (issue 43): a client that means a URL with `%FF` in it sends `%25FF`. Refused with a 400 and the
// parameter's name instead, in the form each surface answers errors (its scope's error handler).

import formbody from '@fastify/formbody';
import type { FastifyInstance } from 'fastify';

/** The code of a FormEncodingError, for a scope that answers it in its own way. */
export const FORM_NOT_UTF8 = 'FORM_NOT_UTF8';

/** A refusal of the whole body: Fastify's error handlers read statusCode. */
export class FormEncodingError extends Error {
  readonly statusCode = 400;
  readonly code = FORM_NOT_UTF8;
}

function decode(part: string, what: () => string): string {
  const s = part.indexOf('+') < 0 ? part : part.replace(/\+/g, ' ');
  if (s.indexOf('%') < 0) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    throw new FormEncodingError(`${what()} is not UTF-8 once percent-decoded: a URL's own escapes are sent escaped again (%25FF for %FF)`);
  }
}

/**
 * The body's parameters, repeated names as arrays (as formbody's default parser gives them), on an object
 * without a prototype. For @fastify/formbody's `parser` option: it hands over the body decoded as UTF-8, so
 * a byte that was not UTF-8 arrives as U+FFFD, which a form body may not hold raw (it would be %EF%BF%BD).
 */
export function strictFormParse(body: string): Record<string, string | string[]> {
  if (body.includes('\uFFFD')) throw new FormEncodingError('the request body is not UTF-8: percent-encode what is not ASCII');
  const out: Record<string, string | string[]> = Object.create(null);
  if (body === '') return out;
  for (const pair of body.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decode(eq < 0 ? pair : pair.slice(0, eq), () => 'a parameter name');
    const value = eq < 0 ? '' : decode(pair.slice(eq + 1), () => `the parameter ${name}`);
    const had = out[name];
    if (had === undefined) out[name] = value;
    else if (Array.isArray(had)) had.push(value);
    else out[name] = [had, value];
  }
  return out;
}

/**
 * Makes an encapsulated scope read form bodies only, strictly, up to `bodyLimit` bytes: any other content
 * type is refused there (415) and no other route's parsers change.
 */
export async function formBodiesOnly(scope: FastifyInstance, bodyLimit: number): Promise<void> {
  scope.removeAllContentTypeParsers();
  await scope.register(formbody, { bodyLimit, parser: strictFormParse });
}
