// Owns reading the benchmarks' numeric settings from the environment: a clear error for a bad value
// rather than a run measured with NaN.

/** The positive number in env var `name`, or `def` when it is unset or empty. */
export function envNumber(name: string, def: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${JSON.stringify(v)}`);
  return n;
}
