// Owns the weblog hosts the benchmark's pings name when verification is on: HTTP servers on several
// loopback addresses (127.0.0.20, .21, …), or one server answering for 64,000 of them (spreadWeblogHosts),
// each answering any `/<blog>/` with a homepage that links its feed and any `/<blog>/feed.xml` with a small
// RSS 2.0 feed, counting what they served. Loopback only.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FeedHosts {
  origins: string[];
  served: { pages: number; feeds: number };
  close(): Promise<void>;
}

const page = (blog: string) =>
  `<!doctype html><html><head><title>${blog}</title><link rel="alternate" type="application/rss+xml" href="feed.xml"></head><body><p>${blog}</p></body></html>`;

const feed = (blog: string) => `<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>${blog}</title><link>http://example.invalid/${blog}/</link><description>bench</description>
<item><title>Post of ${blog}</title><link>http://example.invalid/${blog}/post</link><guid>urn:bench:${blog}:1</guid><pubDate>${new Date().toUTCString()}</pubDate></item>
</channel></rss>
`;

function answer(served: FeedHosts['served']): http.RequestListener {
  return (req, res) => {
    const path = req.url ?? '/';
    const blog = path.split('/')[1] || 'root';
    if (path.endsWith('/feed.xml')) {
      served.feeds++;
      res.writeHead(200, { 'content-type': 'application/rss+xml', etag: `"${blog}-1"` });
      res.end(feed(blog));
    } else {
      served.pages++;
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(page(blog));
    }
  };
}

export async function startFeedHosts(count: number, first = 20): Promise<FeedHosts> {
  const served = { pages: 0, feeds: 0 };
  const servers: http.Server[] = [];
  const origins: string[] = [];
  for (let i = 0; i < count; i++) {
    const server = http.createServer(answer(served));
    const host = `127.0.0.${first + i}`;
    await new Promise<void>((r) => server.listen(0, host, r));
    servers.push(server);
    origins.push(`http://${host}:${(server.address() as AddressInfo).port}`);
  }
  return {
    origins,
    served,
    close: async () => {
      for (const s of servers) {
        s.closeAllConnections();
        await new Promise((r) => s.close(r));
      }
    },
  };
}

/** How many hosts spreadWeblogHosts answers for: 127.1.0.1 … 127.1.255.250. */
export const SPREAD_HOSTS = 256 * 250;

export interface SpreadHosts {
  port: number;
  /** The i-th weblog host's origin (i taken modulo SPREAD_HOSTS). */
  origin(i: number): string;
  served: { pages: number; feeds: number };
  close(): Promise<void>;
}

/** The i-th host's address: the same rule as spreadOriginLua, which wrk's script runs. */
const spreadAddress = (i: number) => `127.1.${Math.floor(i / 250) % 256}.${(i % 250) + 1}`;

/** spreadWeblogHosts' origin of request `counter`, as a Lua expression (wrk's scripts). */
export const spreadOriginLua = (port: number) =>
  `"http://127.1." .. (math.floor(counter / 250) % 256) .. "." .. (counter % 250 + 1) .. ":${port}"`;

/**
 * Weblogs on 64,000 loopback hosts, one server answering for all: pingd refuses more than PING_HOST_BUDGET
 * (100) pings a minute for weblogs of one host, so an intake benchmark at 10,000-30,000 pings a second on 8
 * hosts measured refusals (184,285 of 185,125 answers in a wrk run): spread over 64,000, a host gets ~30 a
 * minute at 30,000/s. A socket can only listen on one loopback address or on all of them: it listens on
 * 0.0.0.0 and drops at once any connection that did not come to a 127.0.0.0/8 address (nothing is sent
 * anywhere else; pingd is the only client and fetches these URLs only).
 */
export async function spreadWeblogHosts(): Promise<SpreadHosts> {
  const served = { pages: 0, feeds: 0 };
  const server = http.createServer(answer(served));
  server.on('connection', (socket) => {
    if (!socket.localAddress?.replace(/^::ffff:/, '').startsWith('127.')) socket.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '0.0.0.0', r));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    origin: (i) => `http://${spreadAddress(i % SPREAD_HOSTS)}:${port}`,
    served,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
