// Test harness: a real HTTP server on a loopback address playing a weblog host (feeds, homepages,
// redirects, failures), recording every request it receives: path, headers, arrival time, and how many
// were in flight at once. Bind several on 127.0.0.2, 127.0.0.3, … to play distinct hosts.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';

export type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void | Promise<void>;

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  at: number;
}

export interface FeedServer {
  /** `http://<host>:<port>` */
  origin: string;
  host: string;
  requests: Received[];
  /** Most requests in flight at once so far. */
  maxConcurrent: number;
  route(path: string, handler: Handler): void;
  /** Requests received for one path. */
  hits(path: string): Received[];
  close(): Promise<void>;
}

const FIXTURES = new URL('../fixtures/feeds/', import.meta.url);

export function feedFixture(name: string): Buffer {
  return readFileSync(new URL(name, FIXTURES));
}

export async function startFeedServer(host = '127.0.0.2'): Promise<FeedServer> {
  const routes = new Map<string, Handler>();
  const requests: Received[] = [];
  let inFlight = 0;
  const s: FeedServer = {
    origin: '',
    host,
    requests,
    maxConcurrent: 0,
    route: (path, h) => void routes.set(path, h),
    hits: (path) => requests.filter((r) => r.path === path),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  const server = http.createServer((req, res) => {
    const path = req.url ?? '/';
    requests.push({ path, headers: req.headers, at: Date.now() });
    inFlight++;
    s.maxConcurrent = Math.max(s.maxConcurrent, inFlight);
    res.on('close', () => inFlight--);
    const h = routes.get(path.split('?')[0]);
    if (!h) {
      res.statusCode = 404;
      res.end('not here\n');
      return;
    }
    Promise.resolve(h(req, res)).catch(() => res.destroy());
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  s.origin = `http://${host}:${(server.address() as AddressInfo).port}`;
  return s;
}

/** A handler answering with fixed bytes and headers. */
export const bytes =
  (body: Buffer | string, headers: Record<string, string> = {}, status = 200): Handler =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/rss+xml', ...headers });
    res.end(body);
  };

/** A handler that honours If-None-Match against a fixed ETag (304), else sends the body with it. */
export const withEtag =
  (etag: string, body: () => Buffer | string, headers: Record<string, string> = {}): Handler =>
  (req, res) => {
    if (req.headers['if-none-match'] === etag) {
      res.writeHead(304, { etag });
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/rss+xml', etag, ...headers });
    res.end(body());
  };
