// Test harness for the relay: Python's SimpleXMLRPCServer as the target (test/fixtures/relay/xmlrpc_target.py,
// steered over its stdin, its calls read from its stdout), an HTTP server that answers 503/429 with
// Retry-After, and pinging an app over HTTP. Loopback 127.0.0.40–49 only.
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { createInterface } from 'node:readline';
import type { AddressInfo } from 'node:net';

const SCRIPT = new URL('../../fixtures/relay/xmlrpc_target.py', import.meta.url).pathname;

export interface Call {
  method: string;
  params: string[];
  ua: string | null;
  /** Seconds since the epoch, when the call arrived. */
  t: number;
}

export interface Target {
  url: string;
  port: number;
  calls: Call[];
  /** Applies a command (flerror, fault_extended, fault_all, delay, listen) and waits until it took effect. */
  set(cmd: Record<string, unknown>): Promise<void>;
  /** Resolves once `pred` holds over the calls (checked as they arrive), or rejects after `ms`. */
  until(pred: (calls: Call[]) => boolean, ms?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startTarget(host = '127.0.0.40', port = 0): Promise<Target> {
  const child: ChildProcess = spawn('python3', ['-u', SCRIPT, host, String(port)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const calls: Call[] = [];
  const waiters: (() => void)[] = [];
  const acks: (() => void)[] = [];
  let resolvePort!: (p: number) => void;
  const gotPort = new Promise<number>((r) => (resolvePort = r));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const m = JSON.parse(line) as Record<string, unknown>;
    if ('port' in m) resolvePort(Number(m.port));
    else if ('ok' in m) acks.shift()?.();
    else {
      calls.push(m as unknown as Call);
      for (const w of waiters.splice(0)) w();
    }
  });
  const p = await Promise.race([
    gotPort,
    new Promise<never>((_, rej) => setTimeout(() => rej(new Error('the Python target did not start')), 10_000)),
  ]);
  return {
    url: `http://${host}:${p}/RPC2`,
    port: p,
    calls,
    set(cmd) {
      return new Promise<void>((resolve) => {
        acks.push(resolve);
        child.stdin!.write(`${JSON.stringify(cmd)}\n`);
      });
    },
    until(pred, ms = 15_000) {
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`timed out; the target saw ${calls.length} calls: ${JSON.stringify(calls.slice(-5))}`)),
          ms,
        );
        const check = () => {
          if (pred(calls)) {
            clearTimeout(timer);
            resolve();
          } else waiters.push(check);
        };
        check();
      });
    },
    async close() {
      child.stdin!.end();
      child.kill();
      await new Promise((r) => child.once('exit', r));
    },
  };
}

/** An HTTP server that answers every POST with `status` and `Retry-After: retryAfter`, recording when. */
export async function startBusyTarget(
  host: string,
  status: number,
  retryAfter: string,
): Promise<{ url: string; hits: number[]; close(): Promise<void> }> {
  const hits: number[] = [];
  const server = http.createServer((req, res) => {
    hits.push(Date.now());
    req.resume();
    res.writeHead(status, { 'retry-after': retryAfter, 'content-type': 'text/plain' });
    res.end('busy');
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${port}/RPC2`,
    hits,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** Pings `base` (an app's URL) over HTTP GET /ping; resolves with the status. */
export async function httpPing(base: string, name: string, url: string, headers: Record<string, string> = {}): Promise<number> {
  const r = await fetch(`${base}/ping?name=${encodeURIComponent(name)}&url=${encodeURIComponent(url)}`, { headers });
  await r.arrayBuffer();
  return r.status;
}

/** An XML-RPC extendedPing to `base`/RPC2. */
export async function extendedPing(base: string, params: string[], headers: Record<string, string> = {}): Promise<string> {
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const body = `<?xml version="1.0"?><methodCall><methodName>weblogUpdates.extendedPing</methodName><params>${params.map((p) => `<param><value><string>${esc(p)}</string></value></param>`).join('')}</params></methodCall>`;
  const r = await fetch(`${base}/RPC2`, { method: 'POST', headers: { 'content-type': 'text/xml', ...headers }, body });
  return r.text();
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` until it returns true, or throws after `ms`. */
export async function eventually(fn: () => Promise<boolean> | boolean, ms = 15_000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}
