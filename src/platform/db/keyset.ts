// Owns reading a time window newest first in keyset pages: the SQL of "the rows whose time falls in
// (fromUs, toUs], newest first by (time, id), after the last row of the previous page", which every
// renderer of a live document reads its entries with (memory stays flat whatever the window holds).
import type { Queryable } from './database.js';
import { tsParam, usOf } from './sql-time.js';

/** A keyset position: the (time in µs, id) of the last row of the previous page. */
export interface After {
  atUs: number;
  id: number;
}

/**
 * A page reader over `from`: `select` names the columns, `timeCol`/`idCol` the keyset (an index on them
 * makes every page cheap), `filter` an SQL condition on `from`'s rows besides the window. Rows come back
 * with `at_us` (the time in µs) and the id column as numbers.
 */
export function newestFirstPages<Row extends { at_us: number }>(
  select: string,
  from: string,
  timeCol: string,
  idCol: keyof Row & string,
  filter = 'true',
) {
  // The first page starts at toUs; later ones strictly after the previous page's last (time, id).
  const sql = `select ${select}, ${usOf(timeCol)} as at_us from ${from}
    where ${timeCol} > ${tsParam(1)} and ${timeCol} <= ${tsParam(2)} and (${timeCol} < ${tsParam(2)} or ${idCol} < $3) and ${filter}
    order by ${timeCol} desc, ${idCol} desc limit $4`;
  return async (q: Queryable, fromUs: number, toUs: number, after: After | null, limit: number): Promise<Row[]> => {
    const rows = await q.query<Row>(sql, [fromUs, after ? after.atUs : toUs, after ? after.id : Number.MAX_SAFE_INTEGER, limit]);
    for (const r of rows) {
      (r as Record<string, unknown>)[idCol] = Number(r[idCol]);
      r.at_us = Number(r.at_us);
    }
    return rows;
  };
}
