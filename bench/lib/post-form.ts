// Owns the benchmarks' form POST from a chosen loopback address: a subscriber registering from its own
// 127.0.2.x (rssCloud takes the callback's host from the request), a publisher pinging.
import http from 'node:http';

/** POSTs a form to `base` + `path` from `localAddress`; the status and body. */
export function postForm(
  base: string,
  path: string,
  form: Record<string, string>,
  localAddress?: string,
): Promise<{ status: number; body: string }> {
  const body = new URLSearchParams(form).toString();
  const u = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        localAddress,
        agent: false,
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let s = '';
        res.on('data', (c: Buffer) => (s += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: s }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
