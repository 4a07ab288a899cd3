// Test harness for rssCloud: an app that verifies pings and notifies loopback endpoints (127.0.0.0/8 let
// through the address policy by FETCH_ALLOW_ADDRESSES, as an intranet operator would), a feed whose items a
// test adds to, an rssCloud endpoint of the subscriber's (node:http on one of 127.0.0.40–49) that records
// every request and answers the test POST and the GET challenge as rsscloud-server expects, and the form a
// subscriber sends the way FeedLand does.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';
import { startApp, type TestApp, type TestDatabase } from '../../helpers/app.js';
import { parseCidrList } from '../../../src/platform/net/ip.js';
import type { Config } from '../../../src/platform/config.js';
import { startFeedServer, type FeedServer } from '../../helpers/feed-server.js';
import { waitFor } from '../../helpers/wait.js';

export async function cloudApp(overrides: Partial<Config> = {}, db?: TestDatabase): Promise<TestApp> {
  const t = await startApp(
    {
      VERIFY_PINGS: 'mark',
      VERIFY_FEED_INTERVAL: 0,
      FETCH_ALLOW_ADDRESSES: parseCidrList('127.0.0.0/8'),
      FETCH_HOST_INTERVAL_MS: 0,
      RENDER_SCHEDULER: false,
      PING_MIN_INTERVAL: 0,
      // A loaded machine (the whole suite on 2 cores) must not turn a slow answer into a refusal: the
      // first document read starts a thread that compiles its modules under tsx, seconds on a busy core.
      VERIFY_PARSE_BUDGET_MS: 20_000,
      FETCH_TIMEOUT_MS: 15_000,
      WEBSUB_ANSWER_TIMEOUT_MS: 10_000,
      ...overrides,
    },
    db,
  );
  await t.app.ready();
  return t;
}

export interface Feed {
  server: FeedServer;
  url: string;
  /** Adds an item (the next fetch shows it first). */
  add(title: string): void;
}

let feeds = 0;
/** An RSS 2.0 feed on `server` at a fresh path, with one item to start with. */
export function serveFeed(server: FeedServer): Feed {
  const path = `/feed-${++feeds}.xml`;
  const items = ['First post'];
  server.route(path, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/rss+xml; charset=utf-8' });
    res.end(
      `<?xml version="1.0"?><rss version="2.0"><channel><title>Cloud feed ${feeds}</title><link>${server.origin}/</link><description>d</description>` +
        items
          .map((t, i) => `<item><title>${t}</title><guid isPermaLink="false">${path}-${i}</guid></item>`)
          .reverse()
          .join('') +
        '</channel></rss>',
    );
  });
  return { server, url: `${server.origin}${path}`, add: (t) => void items.push(t) };
}

export interface Hit {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Endpoint {
  host: string;
  port: number;
  hits: Hit[];
  /** Most POSTs (notifications, test POSTs) in flight at once so far. */
  maxConcurrent: number;
  posts(path: string): Hit[];
  /** How requests to a path are answered; default 200 "ok" to a POST, the challenge echoed to a GET. */
  answer(path: string, a: (h: Hit) => Answer): void;
  close(): Promise<void>;
}

export type Answer = { status: number; body?: string; headers?: Record<string, string>; delayMs?: number };

export async function startEndpoint(host: string): Promise<Endpoint> {
  const answers = new Map<string, (h: Hit) => Answer>();
  const hits: Hit[] = [];
  let inFlight = 0;
  const server = http.createServer((req, res) => {
    if (req.method === 'POST') {
      inFlight++;
      e.maxConcurrent = Math.max(e.maxConcurrent, inFlight);
      res.on('close', () => inFlight--);
    }
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const u = new URL(req.url ?? '/', 'http://x');
      const h: Hit = {
        method: req.method ?? '',
        path: u.pathname,
        query: u.searchParams,
        headers: req.headers,
        body: Buffer.concat(parts).toString(),
      };
      hits.push(h);
      const a =
        answers.get(u.pathname)?.(h) ??
        (h.method === 'GET' ? { status: 200, body: u.searchParams.get('challenge') ?? '' } : { status: 200, body: 'ok' });
      setTimeout(() => {
        res.writeHead(a.status, { 'content-type': 'text/plain', ...a.headers });
        res.end(a.body ?? '');
      }, a.delayMs ?? 0);
    });
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const e: Endpoint = {
    host,
    port: (server.address() as AddressInfo).port,
    hits,
    maxConcurrent: 0,
    posts: (p) => hits.filter((h) => h.method === 'POST' && h.path === p),
    answer: (p, a) => void answers.set(p, a),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  return e;
}

/** POSTs a form to a path through app.inject (the client address is app.inject's 127.0.0.1). */
export async function form(
  t: TestApp,
  path: string,
  fields: Record<string, string> | [string, string][],
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const r = await t.app.inject({
    method: 'POST',
    url: path,
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    payload: new URLSearchParams(fields).toString(),
  });
  return { status: r.statusCode, body: r.body, headers: r.headers };
}

export { startFeedServer };

/** Waits until `cond` holds, waking the notification and verification workers meanwhile. */
export async function waitForCloud(t: TestApp, cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  await waitFor(cond, {
    what,
    timeoutMs,
    between: () => {
      t.app.rsscloud.worker.wake();
      t.app.verification.worker?.wake();
    },
  });
}

/** rsscloud-server 4.0.0's REST answers, byte for byte (xml2js 0.6's Builder: its declaration, a newline, the element). */
export const xmlAnswer = (element: 'result' | 'notifyResult', success: boolean, msg: string) =>
  `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<${element} success="${success}" msg="${msg.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/"/g, '&quot;')}"/>`;

/** The XML-RPC call rsscloud-server 4.0.0 notifies an xml-rpc subscriber with, byte for byte (xml2js 0.6). */
export const notifyCall = (procedure: string, url: string) =>
  '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<methodCall>\n' +
  `  <methodName>${procedure}</methodName>\n  <params>\n    <param>\n      <value>${url.replace(/&/g, '&amp;')}</value>\n    </param>\n  </params>\n</methodCall>`;
