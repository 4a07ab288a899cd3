// Test harness: every weblog of the synthetic spam corpus (bench/spam/corpus.ts) served as its own named
// host from one loopback HTTP server. Names resolve to that server's address through the resolver the app
// is built with (buildApp's `lookup`), and each weblog's URL carries the server's port, so pingd's verifier
// reaches `http://cheapcarinsurancequotes.info:PORT/` on loopback and only there. What a host answers
// follows the corpus at the moment asked (the replay's clock): its homepage names its feed (no-feed splogs
// name none), its feed carries the newest items published by then, and its outages answer as they were
// drawn (no feed, no answer, gone).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { escapeXml } from '../../src/platform/xml/escape.js';
import type { Corpus, CorpusWeblog } from '../../bench/spam/corpus.js';
import { FEED_ITEMS } from '../../bench/spam/evidence.js';
import type { LookupFn } from '../../src/platform/fetch/safe-fetch.js';

export interface CorpusHosts {
  /** The server's address: every corpus name resolves to it. */
  address: string;
  port: number;
  /** The weblog's URL as pingd should be pinged with it (the corpus URL with this server's port). */
  urlOf(w: CorpusWeblog): string;
  /** For buildApp: corpus names to the server's address; any other name fails as unknown. */
  lookup: LookupFn;
  /** Requests answered, by kind. */
  served: { home: number; feed: number; outage: number; unknown: number };
  close(): Promise<void>;
}

/** `clock` gives the corpus time (ms since the epoch) a request is answered at. */
export async function startCorpusHosts(corpus: Corpus, clock: () => number, address = '127.0.0.2'): Promise<CorpusHosts> {
  // Weblogs by host name, longest path first (a few corpus weblogs live under a path of a shared host).
  const byHost = new Map<string, { path: string; w: CorpusWeblog }[]>();
  for (const w of corpus.weblogs) {
    const u = new URL(w.url);
    const xs = byHost.get(u.hostname) ?? [];
    xs.push({ path: u.pathname, w });
    xs.sort((a, b) => b.path.length - a.path.length);
    byHost.set(u.hostname, xs);
  }
  const served = { home: 0, feed: 0, outage: 0, unknown: 0 };
  const server = http.createServer((req, res) => {
    const hostname = (req.headers.host ?? '').replace(/:\d+$/, '');
    const path = (req.url ?? '/').split('?')[0];
    const hit = byHost.get(hostname)?.find((x) => path.startsWith(x.path));
    if (!hit) {
      served.unknown++;
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not here\n');
      return;
    }
    const { w, path: base } = hit;
    const now = clock();
    if (path === base) {
      served.home++;
      const link = w.noFeed ? '' : `<link rel="alternate" type="application/rss+xml" href="${base}feed.xml">`;
      res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end(
          `<!doctype html><html><head><title>${escapeXml(w.name)}</title>${link}</head><body><h1>${escapeXml(w.name)}</h1></body></html>`,
        );
      return;
    }
    if (path !== `${base}feed.xml` || w.noFeed) {
      served.unknown++;
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not here\n');
      return;
    }
    const out = w.outages.find((o) => now >= o.fromMs && now < o.toMs);
    if (out) {
      served.outage++;
      if (out.outcome === 'unreachable') req.socket.destroy();
      else if (out.outcome === 'gone') res.writeHead(410, { 'content-type': 'text/plain' }).end('gone\n');
      else res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><html><body>Account suspended</body></html>');
      return;
    }
    served.feed++;
    const items: string[] = [];
    for (let i = w.items.length - 1; i >= 0 && items.length < FEED_ITEMS; i--) {
      const it = w.items[i];
      if (it.atMs > now) continue;
      items.push(
        `<item><title>${escapeXml(it.title)}</title><link>${escapeXml(it.link)}</link><guid>${escapeXml(it.link)}</guid>` +
          `<pubDate>${new Date(it.atMs).toUTCString()}</pubDate></item>`,
      );
    }
    res
      .writeHead(200, { 'content-type': 'application/rss+xml; charset=utf-8' })
      .end(
        `<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0"><channel><title>${escapeXml(w.name)}</title>` +
          `<link>${escapeXml(w.url)}</link><description>${escapeXml(w.name)}</description>${items.join('')}</channel></rss>\n`,
      );
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((r) => server.listen(0, address, r));
  const port = (server.address() as AddressInfo).port;
  return {
    address,
    port,
    urlOf: (w) => {
      const u = new URL(w.url);
      u.port = String(port);
      return u.href;
    },
    lookup: async (hostname) => {
      if (byHost.has(hostname)) return [address];
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    },
    served,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
