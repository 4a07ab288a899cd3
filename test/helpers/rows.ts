// Test-side lookups of what intake stored: the suite checks rows directly (every acknowledged ping has its
// row, every refusal none). The service itself never reads pings back one by one, so these live here.
import type { Queryable } from '../../src/platform/db/database.js';

export interface PingRow {
  id: number;
  weblog_id: number;
  received_at: Date;
  method: string;
  name: string;
  url: string;
  changes_url: string | null;
  rss_url: string | null;
  tags: string[] | null;
  client_addr: string | null;
  user_agent: string | null;
}

export async function findPingsByUrl(q: Queryable, url: string): Promise<PingRow[]> {
  return q.query<PingRow>('select * from pings where url = $1 order by id', [url]);
}

export async function countPings(q: Queryable): Promise<number> {
  const [r] = await q.query<{ n: number }>('select count(*)::bigint as n from pings');
  return Number(r.n);
}

export interface WeblogRow {
  id: number;
  url: string;
  name: string;
  changes_url: string | null;
  rss_url: string | null;
  first_ping_at: Date;
  last_ping_at: Date;
  ping_count: number;
}

export async function findWeblog(q: Queryable, url: string): Promise<WeblogRow | undefined> {
  const [r] = await q.query<WeblogRow>('select * from weblogs where url = $1', [url]);
  return r;
}

export interface PayloadRow {
  ping_id: number;
  received_at: Date;
  site_url: string;
  site_name: string;
  feeds: { uri: string; type: string | null }[];
  auth: string;
  auth_note: string | null;
  payload_type: string | null;
  payload_encoding: string | null;
  payload_attributes: Record<string, string>;
  payload_format: string;
  payload: string;
  payload_sha1: string;
  payload_hash: string | null;
  payload_hash_algorithm: string | null;
  payload_hash_uri: string | null;
  publisher_mbox_hash: string | null;
  publisher_mbox_hash_algorithm: string | null;
  headline: string;
  item_link: string | null;
  item_guid: string | null;
  item_uri: string;
  summary: string | null;
  tokenized: boolean;
}

export async function findPayloadsBySite(q: Queryable, siteUrl: string): Promise<PayloadRow[]> {
  const rows = await q.query<PayloadRow>('select * from rssping_payloads where site_url = $1 order by ping_id', [siteUrl]);
  return rows.map((r) => ({ ...r, ping_id: Number(r.ping_id) }));
}
