// Test harness for relay loops and bounds: a Ping-o-Matic-like forwarder (an XML-RPC ping server that passes
// what it gets on to another ping server without pingd's marker, or only answers). Loopback 127.0.0.50–59 only.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Call } from './helpers.js';

export interface Forwarder {
  url: string;
  /** The weblogUpdates calls it received, in order. */
  calls: Call[];
  /** What it sent on: the weblog URL and the HTTP status of the answer. */
  forwarded: { url: string; status: number }[];
  /** Resolves once `pred` holds over the calls and what was forwarded (checked as they change), or rejects after `ms`. */
  until(pred: () => boolean, ms?: number, what?: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * An XML-RPC ping server on `host` that passes each call's weblog on to `next()` (a ping server's base URL)
 * as weblogUpdates.ping(name, url) with a User-Agent of its own (pingd's marker is not kept), as a
 * Ping-o-Matic-like forwarder does, and answers flerror 0. `order`: 'answer-first' answers, then forwards;
 * 'forward-first' forwards (waiting for the answer), then waits for `release()` of the weblog before it
 * answers. `forwards(url)` says which weblogs are passed on (default all).
 */
export async function startForwarder(
  host: string,
  next: () => string,
  o: { order?: 'answer-first' | 'forward-first'; forwards?: (url: string) => boolean; release?: (url: string) => Promise<void> } = {},
): Promise<Forwarder> {
  const calls: Call[] = [];
  const forwarded: { url: string; status: number }[] = [];
  const waiters = new Set<() => void>();
  const changed = () => {
    for (const w of [...waiters]) w();
  };
  const unescape = (v: string) =>
    v
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&quot;/g, '"')
      .replace(/&apos;/g, "'")
      .replace(/&amp;/g, '&');
  const forward = async (name: string, url: string) => {
    const r = await fetch(`${next()}/RPC2`, {
      method: 'POST',
      headers: { 'content-type': 'text/xml', 'user-agent': 'Forwarder/1.0 (+http://forwarder.example/)' },
      body: `<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName><params><param><value><string>${name.replace(/&/g, '&amp;').replace(/</g, '&lt;')}</string></value></param><param><value><string>${url.replace(/&/g, '&amp;').replace(/</g, '&lt;')}</string></value></param></params></methodCall>`,
    });
    await r.arrayBuffer();
    forwarded.push({ url, status: r.status });
    changed();
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const method = /<methodName>([^<]*)<\/methodName>/.exec(body)?.[1] ?? '';
      const params = [...body.matchAll(/<param>\s*<value>(?:\s*<string>)?([^<]*)(?:<\/string>\s*)?<\/value>\s*<\/param>/g)].map((m) =>
        unescape(m[1]),
      );
      calls.push({ method, params, ua: req.headers['user-agent'] ?? null, t: Date.now() / 1000 });
      changed();
      const [name, url] = params;
      const passOn = url !== undefined && (o.forwards?.(url) ?? true);
      const answer = () => {
        res.writeHead(200, { 'content-type': 'text/xml' });
        res.end(
          '<?xml version="1.0"?><methodResponse><params><param><value><struct><member><name>flerror</name><value><boolean>0</boolean></value></member><member><name>message</name><value><string>Thanks for the ping.</string></value></member></struct></value></param></params></methodResponse>',
        );
      };
      try {
        if (passOn && o.order === 'forward-first') {
          await forward(name, url);
          await o.release?.(url);
          answer();
        } else {
          answer();
          if (passOn) await forward(name, url);
        }
      } catch {
        if (!res.headersSent) res.writeHead(500).end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${port}/RPC2`,
    calls,
    forwarded,
    until(pred, ms = 15_000, what = 'the forwarder') {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!pred()) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(
              `timed out waiting for ${what}; calls: ${JSON.stringify(calls.map((c) => c.params[1]))}, forwarded: ${JSON.stringify(forwarded)}`,
            ),
          );
        }, ms);
        waiters.add(check);
        check();
      });
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
