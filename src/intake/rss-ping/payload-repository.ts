// Owns the SQL of rss_ping payloads: the row stored beside an accepted ping (written in the ping's own
// transaction through intake's extra write, so an acknowledged rss_ping always has both and a refused one
// has neither), and the reads /updates.xml is rendered from. Plain values in, plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import { newestFirstPages, type After } from '../../platform/db/keyset.js';
import { tsParam as TS, usOf as US } from '../../platform/db/sql-time.js';
import { withContext } from '../../platform/errors.js';
import { listedUrl } from '../abuse/removal-repository.js';

export type AuthLevel = 'none' | 'pingserver_side' | 'publisher_side';

/** What is stored beside the ping. */
export interface PayloadRecord {
  siteName: string;
  feeds: { uri: string; type: string | null }[];
  auth: AuthLevel;
  authNote: string | null;
  payloadType: string | null;
  payloadEncoding: string | null;
  payloadAttributes: Record<string, string>;
  payloadFormat: string;
  payload: string;
  payloadSha1: string;
  payloadHash: string | null;
  payloadHashAlgorithm: string | null;
  payloadHashUri: string | null;
  publisherMboxHash: string | null;
  publisherMboxHashAlgorithm: string | null;
  headline: string;
  itemLink: string | null;
  itemGuid: string | null;
  itemUri: string;
  summary: string | null;
  tokenized: boolean;
}

const INSERT_PAYLOAD = `
insert into rssping_payloads (ping_id, received_at, site_url, site_name, feeds, auth, auth_note, payload_type,
  payload_encoding, payload_attributes, payload_format, payload, payload_sha1, payload_hash, payload_hash_algorithm,
  payload_hash_uri, publisher_mbox_hash, publisher_mbox_hash_algorithm, headline, item_link, item_guid, item_uri,
  summary, tokenized)
values ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, $10::jsonb, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)`;

export async function insertPayload(q: Queryable, pingId: number, receivedAt: Date, siteUrl: string, p: PayloadRecord): Promise<void> {
  await withContext(`storing the rss_ping payload of ${siteUrl}`, () =>
    q.query(INSERT_PAYLOAD, [
      pingId,
      receivedAt,
      siteUrl,
      p.siteName,
      JSON.stringify(p.feeds),
      p.auth,
      p.authNote,
      p.payloadType,
      p.payloadEncoding,
      JSON.stringify(p.payloadAttributes),
      p.payloadFormat,
      p.payload,
      p.payloadSha1,
      p.payloadHash,
      p.payloadHashAlgorithm,
      p.payloadHashUri,
      p.publisherMboxHash,
      p.publisherMboxHashAlgorithm,
      p.headline,
      p.itemLink,
      p.itemGuid,
      p.itemUri,
      p.summary,
      p.tokenized,
    ]),
  );
}

// updates.xml reads the payloads of a window (fromUs, toUs] in microseconds since the epoch, as the
// publishing layer hands it over, newest first with a keyset on (received_at, ping_id). A weblog the
// operator removed is left out; a payload carries its weblog's URL (site_url), not its id.
const listed = listedUrl('rssping_payloads.site_url');

export async function payloadWindowStats(q: Queryable, fromUs: number, toUs: number): Promise<{ n: number; maxUs: number; maxId: number }> {
  return withContext('reading the rss_ping payload window', async () => {
    const [r] = await q.query<{ n: number; max_us: number | null; max_id: number | null }>(
      `select count(*)::bigint as n, ${US('max(received_at)')} as max_us, max(ping_id) as max_id
         from rssping_payloads where received_at > ${TS(1)} and received_at <= ${TS(2)} and ${listed}`,
      [fromUs, toUs],
    );
    return { n: Number(r.n), maxUs: Number(r.max_us ?? 0), maxId: Number(r.max_id ?? 0) };
  });
}

export interface PayloadWindowRow {
  ping_id: number;
  at_us: number;
  site_url: string;
  site_name: string;
  feeds: { uri: string; type: string | null }[];
  auth: AuthLevel;
  headline: string;
  item_link: string | null;
  item_guid: string | null;
  item_uri: string;
  summary: string | null;
}

const payloadPage = newestFirstPages<PayloadWindowRow>(
  'ping_id, site_url, site_name, feeds, auth, headline, item_link, item_guid, item_uri, summary',
  'rssping_payloads',
  'received_at',
  'ping_id',
  listed,
);

/** One page of the payloads received in (fromUs, toUs], newest first, after the keyset `after`. */
export async function payloadWindowPage(
  q: Queryable,
  fromUs: number,
  toUs: number,
  after: After | null,
  limit: number,
): Promise<PayloadWindowRow[]> {
  return withContext('reading a page of rss_ping payloads', () => payloadPage(q, fromUs, toUs, after, limit));
}
