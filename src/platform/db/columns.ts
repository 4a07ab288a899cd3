// Owns turning a batch of rows into the parallel arrays a statement unnests (`unnest($1::bigint[], …)`):
// one statement writes the whole batch, one array per column, in the order the keys are given.
export function columns<T, K extends keyof T>(rows: readonly T[], keys: readonly K[]): T[K][][] {
  return keys.map((k) => rows.map((r) => r[k]));
}
