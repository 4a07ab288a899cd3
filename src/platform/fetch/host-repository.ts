// Owns the SQL of the per-host request slots every instance shares (fetch_hosts): the next moment a host may
// be asked, taken one gap at a time whatever instance asks, and the Retry-After a host sent (no request to
// it before then). The database half of platform/fetch/polite.ts. Plain values in, plain rows out.
import type { Queryable } from '../db/database.js';
import { withContext } from '../errors.js';

export type HostSlot = { ok: true } | { ok: false; retryAt: Date; blocked: boolean };

/**
 * Takes the next request slot for `host` if it is free now: at most one request per `gapMs` to one host,
 * whatever instance asks, and none while a Retry-After holds. Otherwise says when to ask again.
 */
export async function takeHostSlot(q: Queryable, host: string, gapMs: number, known = false): Promise<HostSlot> {
  return withContext(`taking a request slot for ${host}`, async () => {
    // `known`: the caller saw this host's row before (rows are never deleted), so it need not be created.
    if (!known) await q.query('insert into fetch_hosts (host, next_slot_at) values ($1, now()) on conflict (host) do nothing', [host]);
    // The row lock serialises instances: a second taker re-reads the row after the first commits and finds
    // the slot gone (READ COMMITTED re-checks the WHERE on the new row version).
    const taken = await q.query(
      `update fetch_hosts set next_slot_at = now() + make_interval(secs => $2::float8 / 1000)
        where host = $1 and next_slot_at <= now() and (blocked_until is null or blocked_until <= now()) returning 1`,
      [host, gapMs],
    );
    if (taken.length > 0) return { ok: true };
    const [r] = await q.query<{ next_slot_at: Date; blocked_until: Date | null; now: Date }>(
      'select next_slot_at, blocked_until, now() as now from fetch_hosts where host = $1',
      [host],
    );
    const next = new Date(r.next_slot_at);
    const blocked = r.blocked_until ? new Date(r.blocked_until) : null;
    const isBlocked = blocked !== null && blocked > new Date(r.now);
    return { ok: false, retryAt: isBlocked && blocked > next ? blocked : next, blocked: isBlocked };
  });
}

/** Of `hosts`, those a Retry-After still blocks, with its end (a push's only check: it keeps no gap). */
export async function hostBlocks(q: Queryable, hosts: readonly string[]): Promise<Map<string, HostSlot>> {
  const out = new Map<string, HostSlot>();
  if (hosts.length === 0) return out;
  return withContext(`reading blocks of ${hosts.length} hosts`, async () => {
    const rows = await q.query<{ host: string; blocked_until: Date }>(
      'select host, blocked_until from fetch_hosts where host = any($1::text[]) and blocked_until > now()',
      [hosts],
      { name: 'pingd_host_blocks' },
    );
    for (const r of rows) out.set(r.host, { ok: false, retryAt: new Date(r.blocked_until), blocked: true });
    return out;
  });
}

/** No request to `host` before `until` (a 429 or 503 with Retry-After). */
export async function blockHost(q: Queryable, host: string, until: Date): Promise<void> {
  await withContext(`blocking requests to ${host}`, () =>
    q.query(
      `insert into fetch_hosts as h (host, next_slot_at, blocked_until) values ($1, now(), $2)
       on conflict (host) do update set blocked_until = greatest(coalesce(h.blocked_until, $2), $2)`,
      [host, until],
    ),
  );
}
