// Owns the SQL of registered publishers (RSS Ping, "Publisher-side authentication"): one row per site URL
// (normalised) with its sealed password. Plain values in, plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';

export interface PublisherRow {
  id: number;
  site_url: string;
  password_sealed: Buffer;
  created_at: Date;
  updated_at: Date;
}

function row(r: PublisherRow): PublisherRow {
  // pg returns bytea as a Buffer, PGlite as a Uint8Array.
  return { ...r, id: Number(r.id), password_sealed: Buffer.from(r.password_sealed) };
}

/** Adds a publisher; with `replace`, an existing one gets the new password. Returns null when it exists and replace is false. */
export async function addPublisher(
  q: Queryable,
  siteUrl: string,
  sealed: Buffer,
  replace = false,
): Promise<{ id: number; replaced: boolean } | null> {
  return withContext(`adding the publisher ${siteUrl} failed`, async () => {
    const rows = await q.query<{ id: number; replaced: boolean }>(
      `insert into rssping_publishers as p (site_url, password_sealed) values ($1, $2)
       on conflict (site_url) do update set password_sealed = excluded.password_sealed, updated_at = now()
         where $3::boolean
       returning p.id, (p.created_at <> p.updated_at) as replaced`,
      [siteUrl, sealed, replace],
    );
    return rows[0] ? { id: Number(rows[0].id), replaced: Boolean(rows[0].replaced) } : null;
  });
}

export async function findPublisher(q: Queryable, siteUrl: string): Promise<PublisherRow | undefined> {
  return withContext(`looking up the publisher ${siteUrl} failed`, async () => {
    const [r] = await q.query<PublisherRow>(
      'select id, site_url, password_sealed, created_at, updated_at from rssping_publishers where site_url = $1',
      [siteUrl],
    );
    return r ? row(r) : undefined;
  });
}

export interface PublisherListRow {
  site_url: string;
  created_at: Date;
  updated_at: Date;
  live_tokens: number;
}

export async function listPublishers(q: Queryable): Promise<PublisherListRow[]> {
  return withContext('listing publishers failed', async () => {
    const rows = await q.query<PublisherListRow>(
      `select p.site_url, p.created_at, p.updated_at,
              (select count(*) from rssping_tokens t where t.publisher_id = p.id and t.expires_at > now()) as live_tokens
       from rssping_publishers p order by p.site_url`,
    );
    return rows.map((r) => ({ ...r, live_tokens: Number(r.live_tokens) }));
  });
}

/** Removes a publisher and its tokens; false when there was none. */
export async function removePublisher(q: Queryable, siteUrl: string): Promise<boolean> {
  return withContext(`removing the publisher ${siteUrl} failed`, async () => {
    const rows = await q.query('delete from rssping_publishers where site_url = $1 returning id', [siteUrl]);
    return rows.length > 0;
  });
}
