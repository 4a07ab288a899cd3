// Owns the JSON Schema pieces every route's schema is built from (TypeBox), for what HTTP itself allows:
// a query parameter given once is a string, given twice a list of strings (the handlers take the first).
import { Type, type TOptional, type TString, type TArray, type TUnion } from '@sinclair/typebox';

/** A client may repeat a parameter; more than this many times is refused with a 400. */
export const MAX_REPEATS = 20;

/**
 * An optional query parameter: a string, or a list when the client repeats it, each at most `maxLength`
 * characters (beyond it Fastify answers 400 before the handler runs).
 */
export const queryParam = (maxLength: number): TOptional<TUnion<[TString, TArray<TString>]>> =>
  Type.Optional(Type.Union([Type.String({ maxLength }), Type.Array(Type.String({ maxLength }), { maxItems: MAX_REPEATS })]));

/** The first value of a query parameter, whichever spelling of it was sent. */
export function firstParam(q: Record<string, string | string[] | undefined>, ...names: string[]): string | null {
  for (const n of names) {
    const v = q[n];
    if (typeof v === 'string') return v;
    if (Array.isArray(v) && v.length) return v[0];
  }
  return null;
}

/** The JSON body of an /api/* refusal: a stable UPPER_SNAKE code and a sentence for a person. */
export const ApiError = Type.Object({ error: Type.String(), message: Type.String() });
