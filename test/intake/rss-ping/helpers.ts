// Shared by the RSS Ping tests: building rss_ping documents and reading rss_ping_response replies.
import { readFileSync } from 'node:fs';
import { XMLValidator } from 'fast-xml-parser';
import { unescapeXml } from '../../helpers/app.js';

export const SEEDS = ['seed-1-rss2-feed', 'seed-2-atom10-entry', 'seed-3-rss10-item', 'seed-4-rss10-feed'] as const;

export function fixture(name: string): Buffer {
  return readFileSync(new URL(`../../fixtures/rss-ping/${name}`, import.meta.url));
}

export const seed = (name: (typeof SEEDS)[number]) => fixture(`${name}.xml`);

export const ITEM = `<item><title>Hello world</title><link>https://example.com/hello</link><description>First post.</description></item>`;

export interface PingDoc {
  siteName?: string;
  siteUri: string;
  feeds?: string[];
  payload?: string;
  payloadAttrs?: string;
  hashUri?: string;
  hashUriAttrs?: string;
  extra?: string;
}

/** An rss_ping written the way the seed's examples are (unquoted version, payload last). */
export function rssPing(d: PingDoc): string {
  const feeds = d.feeds ?? [`${d.siteUri.replace(/\/$/, '')}/feed.xml`];
  return [
    '<rss_ping version=2>',
    `<site_name>${d.siteName ?? 'Test Blog'}</site_name>`,
    `<site_uri>${d.siteUri}</site_uri>`,
    ...feeds.map((f) => `<feed_uri type="RSS 2.0">${f}</feed_uri>`),
    d.hashUri ? `<payload_hash_uri${d.hashUriAttrs ?? ''}>${d.hashUri}</payload_hash_uri>` : '',
    d.extra ?? '',
    `<payload type="RSS 2.0 fragment" encoding="utf-8"${d.payloadAttrs ?? ''}>${d.payload ?? ITEM}</payload>`,
    '</rss_ping>',
  ]
    .filter((l) => l !== '')
    .join('\n');
}

export interface RssPingReply {
  status: number;
  body: string;
  flerror: boolean;
  message: string;
  authentication: string | null;
}

/** Reads an rss_ping_response strictly: well-formed, and the exact shape we write. */
export function readRssPingReply(status: number, body: string): RssPingReply {
  if (XMLValidator.validate(body) !== true) throw new Error(`reply is not well-formed XML: ${body}`);
  const m =
    /^<\?xml version="1\.0" encoding="utf-8"\?>\n<rss_ping_response><flerror>([01])<\/flerror><message>([^<]*)<\/message>(?:<authentication>([a-z_]+)<\/authentication>)?<\/rss_ping_response>\n$/.exec(
      body,
    );
  if (!m) throw new Error(`not an rss_ping_response: ${body}`);
  return { status, body, flerror: m[1] === '1', message: unescapeXml(m[2]), authentication: m[3] ?? null };
}
