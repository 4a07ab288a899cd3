// Owns how times cross the SQL boundary: integer microseconds since the epoch, converted exactly on the
// database side (to_timestamp(double) can be 1 µs off; integer interval arithmetic is not).

/** SQL for "parameter $n (µs since the epoch, bigint) as a timestamptz". */
export const tsParam = (n: number): string => `(timestamptz 'epoch' + $${n}::bigint * interval '1 microsecond')`;

/** SQL for "timestamptz column or expression `col` as µs since the epoch (bigint)". */
export const usOf = (col: string): string => `(extract(epoch from ${col}) * 1000000)::bigint`;
