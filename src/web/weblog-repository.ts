// Owns the SQL behind "did my ping arrive?": a weblog's latest stored pings with each one's verification,
// read newest first through the (weblog_id, id) index, so the cost does not grow with the log.
import type { Queryable } from '../platform/db/database.js';
import { withContext } from '../platform/errors.js';

export interface WeblogPing {
  id: number;
  receivedAt: Date;
  method: string;
  name: string;
  /** null: not verified (VERIFY_PINGS=off, or pruned); 'pending' while queued; else the outcome. */
  verification: string | null;
  httpStatus: number | null;
}

export async function latestPings(q: Queryable, weblogId: number, limit: number): Promise<WeblogPing[]> {
  const rows = await withContext(`reading the pings of weblog ${weblogId} failed`, () =>
    q.query<{
      id: number;
      received_at: Date;
      method: string;
      name: string;
      has_job: boolean;
      outcome: string | null;
      http_status: number | null;
    }>(
      `select p.id, p.received_at, p.method, p.name, v.ping_id is not null as has_job, v.outcome, v.http_status
         from (select id, received_at, method, name from pings where weblog_id = $1 order by id desc limit $2) p
         left join ping_verifications v on v.ping_id = p.id
        order by p.id desc`,
      [weblogId, limit],
    ),
  );
  return rows.map((r) => ({
    id: Number(r.id),
    receivedAt: new Date(r.received_at),
    method: r.method,
    name: r.name,
    verification: r.has_job ? (r.outcome ?? 'pending') : null,
    httpStatus: r.http_status === null ? null : Number(r.http_status),
  }));
}
