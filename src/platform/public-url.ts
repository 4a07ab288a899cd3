// Owns where clients reach the service: PUBLIC_URL when the operator set it; otherwise the origin a request
// came to (for response headers) or http://localhost:PORT (for document bodies, rendered once for every
// reader, so they cannot follow each request's Host).

/** Host header values we repeat in a Link header: a name or address with an optional port, nothing else. */
const SAFE_HOST = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/** The base of links inside published documents. */
export function documentBase(publicUrl: string | undefined, port: number): string {
  return publicUrl ?? `http://localhost:${port}`;
}

/**
 * The base of links in a response's headers. An odd Host is not repeated (a shared cache could otherwise
 * keep a stranger's Host in a public response): the document base is used instead.
 */
export function requestBase(publicUrl: string | undefined, port: number, req: { protocol: string; host: string }): string {
  if (publicUrl) return publicUrl;
  return SAFE_HOST.test(req.host) ? `${req.protocol === 'https' ? 'https' : 'http'}://${req.host}` : documentBase(undefined, port);
}

/** Where the WebSub hub takes subscriptions (under the public base). */
export const HUB_PATH = '/websub';

/** Where XML-RPC is answered (weblogUpdates.*, rssCloud.*), under the public base. */
export const RPC_PATHS: readonly string[] = ['/RPC2', '/rpc2', '/'];

/** Where rssCloud takes subscriptions over REST (over XML-RPC: rssCloud.pleaseNotify on RPC_PATHS). */
export const RSSCLOUD_NOTIFY_PATH = '/rsscloud/pleaseNotify';

/** WebSub discovery (§4) and distribution (§7): the Link header naming the hub and the topic itself. */
export function websubLinks(base: string, topicUrl: string): string {
  return `<${base}${HUB_PATH}>; rel="hub", <${topicUrl}>; rel="self"`;
}
