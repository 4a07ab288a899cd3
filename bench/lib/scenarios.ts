// Owns what the benchmark sends: request generators with a distinct weblog URL per request (so that every
// ping is a real insert, never a throttle hit), shaped as WordPress sends them, and how an answer is
// recognised as an acknowledgement.
import { request } from 'node:http';
import type { LoadSpec } from './load.js';

const UA = 'The Incutio XML-RPC PHP Library -- WordPress/6.7.1';

let seq = 0;
/** A host name no other request of this process uses. */
function nextHost(kind: string): string {
  return `b${(++seq).toString(36)}-${kind}.bench.example.com`;
}

const ACK = '<boolean>0</boolean>';
/** An XML-RPC ping reply with flerror 0 (the reply's exact bytes are fixed by serialize.ts). */
export const isRpcAck = (status: number, body: string) => status === 200 && body.includes(ACK);

/** A refusal given when the database was too slow: the ping may still commit afterwards (not acknowledged). */
export const isUnsure = (_status: number, body: string) => body.includes('did not answer in time') || body.includes('database unavailable');

/** `weblogUpdates.ping(name, url)` as WordPress's IXR client writes it. */
export function pingSpec(): LoadSpec {
  const head = Buffer.from(
    '<?xml version="1.0"?>\n<methodCall>\n<methodName>weblogUpdates.ping</methodName>\n<params>\n<param><value><string>Bench Blog</string></value></param>\n<param><value><string>http://',
  );
  const tail = Buffer.from('/</string></value></param>\n</params></methodCall>\n');
  return {
    method: 'POST',
    path: '/RPC2',
    headers: { 'content-type': 'text/xml', 'user-agent': UA },
    makeBody: () => Buffer.concat([head, Buffer.from(nextHost('p')), tail]),
    isAck: isRpcAck,
    isUnsure,
  };
}

/**
 * `weblogUpdates.ping` of distinct weblogs on loopback weblog hosts (`origin(n)`, n = 0, 1, …; feed-hosts.ts
 * spreadWeblogHosts): with VERIFY_PINGS=mark, every ping is verified against a real server (homepage,
 * autodiscovery, feed).
 */
export function pingOnHostsSpec(origin: (n: number) => string): LoadSpec {
  const head = Buffer.from(
    '<?xml version="1.0"?>\n<methodCall>\n<methodName>weblogUpdates.ping</methodName>\n<params>\n<param><value><string>Bench Blog</string></value></param>\n<param><value><string>',
  );
  const tail = Buffer.from('/</string></value></param>\n</params></methodCall>\n');
  let n = 0;
  return {
    method: 'POST',
    path: '/RPC2',
    headers: { 'content-type': 'text/xml', 'user-agent': UA },
    makeBody: () => {
      const i = ++seq;
      return Buffer.concat([head, Buffer.from(`${origin(n++)}/b${i.toString(36)}`), tail]);
    },
    isAck: isRpcAck,
    isUnsure,
  };
}

/** `weblogUpdates.extendedPing(name, url, rssUrl)`: WordPress's exact bytes (HTML-escaped name, UTF-8). */
export function extendedPingSpec(): LoadSpec {
  const head = Buffer.from(
    '<?xml version="1.0"?>\n<methodCall>\n<methodName>weblogUpdates.extendedPing</methodName>\n<params>\n<param><value><string>Joe&amp;#039;s &amp;amp; Co \u2014 Caf\u00e9</string></value></param>\n<param><value><string>http://',
  );
  return {
    method: 'POST',
    path: '/RPC2',
    headers: { 'content-type': 'text/xml', 'user-agent': UA },
    makeBody: () => {
      const host = nextHost('x');
      return Buffer.concat([
        head,
        Buffer.from(
          `${host}/</string></value></param>\n<param><value><string>http://${host}/feed/</string></value></param>\n</params></methodCall>\n`,
        ),
      ]);
    },
    isAck: isRpcAck,
    isUnsure,
  };
}

/** `GET /pingSiteForm?name=&url=`: a person's (or a script's) HTTP ping; 200 = stored. */
export function pingSiteFormSpec(): LoadSpec {
  return {
    method: 'GET',
    path: '/pingSiteForm',
    headers: { 'user-agent': 'Mozilla/5.0 (bench)' },
    makePath: () => `/pingSiteForm?name=Bench+Blog&url=${encodeURIComponent(`http://${nextHost('f')}/`)}`,
    isAck: (status, body) => status === 200 && body.includes('<title>Ping received'),
    isUnsure,
  };
}

/** A GET of a published document with fixed headers (conditional or not); `expect` is the status that counts. */
export function documentSpec(path: string, headers: Record<string, string>, expect: number): LoadSpec {
  return { method: 'GET', path, headers, okStatus: [expect] };
}

/** One request of the spec, bytes as they came (gzip stays gzip): the answer the baseline will mimic. */
export function sample(baseUrl: string, spec: LoadSpec): Promise<{ status: number; headers: Record<string, string>; body: Buffer }> {
  const path = spec.makePath ? spec.makePath() : spec.path;
  const body = spec.makeBody ? spec.makeBody() : spec.body;
  const u = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, method: spec.method, path, headers: { ...(spec.headers ?? {}) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers[k] = v;
        resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(spec.method === 'POST' ? body : undefined);
  });
}
