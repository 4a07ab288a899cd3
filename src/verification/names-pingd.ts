// Owns whether a fetched feed names this server as its WebSub hub or its rssCloud cloud (issue 39's last trust
// signal, trust.names_pingd: the site chose pingd). This server's own endpoints are PUBLIC_URL's: the hub
// `PUBLIC_URL/websub`, and rssCloud's registration at PUBLIC_URL's host and port, path `/rsscloud/pleaseNotify`
// (REST) or `/RPC2`, `/rpc2`, `/` (XML-RPC's rssCloud.pleaseNotify), under PUBLIC_URL's path. With PUBLIC_URL
// unset nothing names pingd: the verifier reads feeds with no request in hand, and `localhost:PORT` (what
// documents say then) is not a name a published feed gives. Pure: plain values in, a boolean out; it runs
// on the document threads beside the parser (document-task.ts).
import { HUB_PATH, RPC_PATHS, RSSCLOUD_NOTIFY_PATH } from '../platform/public-url.js';
import { trimEndChar } from '../platform/text/trim.js';
import type { FeedCloud } from './feed-parser.js';

/** This server's endpoints as a feed would name them, in the forms compared (plain data: sent to the threads). */
export interface OwnEndpoints {
  /** The hub, as comparableUrl() writes it. */
  hub: string;
  /** rssCloud: the host name in lower case, the port, the registration paths without a trailing slash. */
  cloud: { host: string; port: number; paths: string[] };
}

/** The endpoints under `publicUrl` (PUBLIC_URL, kept without a trailing slash); null when it is unset. */
export function ownEndpoints(publicUrl: string | undefined): OwnEndpoints | null {
  if (!publicUrl || !URL.canParse(publicUrl)) return null;
  const u = new URL(publicUrl);
  const prefix = trimEndChar(u.pathname, '/');
  return {
    hub: comparableUrl(`${u.origin}${prefix}${HUB_PATH}`)!,
    cloud: {
      host: u.hostname.toLowerCase(),
      port: u.port ? Number(u.port) : defaultPort(u.protocol),
      paths: [RSSCLOUD_NOTIFY_PATH, ...RPC_PATHS].map((p) => trimEndChar(`${prefix}${p}`, '/')),
    },
  };
}

/**
 * An absolute http(s) URL as compared: scheme and host in lower case and the scheme's default port dropped
 * (WHATWG URL does both), the path as written but for its trailing slashes, the query kept, the fragment
 * dropped. Null when it is not one.
 */
export function comparableUrl(raw: string): string | null {
  if (!URL.canParse(raw)) return null;
  const u = new URL(raw);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  return `${u.origin}${trimEndChar(u.pathname, '/')}${u.search}`;
}

function defaultPort(protocol: string): number {
  return protocol === 'https:' ? 443 : 80;
}

/** Whether a feed's hubs or cloud name this server (`own`; null: PUBLIC_URL unset, never). */
export function namesPingd(feed: { hubs: readonly string[]; cloud: FeedCloud | null }, own: OwnEndpoints | null): boolean {
  if (own === null) return false;
  if (feed.hubs.some((h) => comparableUrl(h) === own.hub)) return true;
  const c = feed.cloud;
  if (c === null) return false;
  // The RSS 2.0 element has no scheme: a port left out is the protocol's (443 for https-post, else 80).
  const port = c.port ?? (c.protocol?.toLowerCase() === 'https-post' ? 443 : 80);
  const host = trimEndChar(c.domain.toLowerCase(), '.');
  return host === own.cloud.host && port === own.cloud.port && own.cloud.paths.includes(trimEndChar(c.path, '/'));
}
