// Owns the weblog hosts the benchmark's pings name when verification is on: HTTP servers on several
// loopback addresses (127.0.0.20, .21, …), each answering any `/<blog>/` with a homepage that links its
// feed and any `/<blog>/feed.xml` with a small RSS 2.0 feed, counting what they served. Loopback only.
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

export async function startFeedHosts(count: number, first = 20): Promise<FeedHosts> {
  const served = { pages: 0, feeds: 0 };
  const servers: http.Server[] = [];
  const origins: string[] = [];
  for (let i = 0; i < count; i++) {
    const server = http.createServer((req, res) => {
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
    });
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
