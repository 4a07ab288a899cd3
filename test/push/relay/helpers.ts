// Test harness for the relay: Python's SimpleXMLRPCServer as the target (test/fixtures/relay/xmlrpc_target.py,
// steered over its stdin, its calls read from its stdout), an HTTP server that answers 503/429 with
// Retry-After, pinging an app over HTTP, and the relay's barriers: its cursor past every stored ping, and
// nothing pending or in hand. Loopback 127.0.0.40–49 only.
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { createInterface } from 'node:readline';
import type { AddressInfo } from 'node:net';
import type { TestApp } from '../../helpers/app.js';
import { waitFor } from '../../helpers/wait.js';
import { relayCommand } from '../../../src/push/relay/relay-command.js';
import { borrowed } from '../../../src/platform/db/borrow.js';

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

type Queries = { query<T>(sql: string, params?: unknown[]): Promise<T[]> };

/**
 * Resolves once the relay's cursor has passed every ping stored so far (under RELAY_ONLY_VERIFIED: every
 * ping released so far). A derivation commits the cursor with the jobs it made, folded or dropped, so a
 * ping that was to be relayed has its job by then.
 */
export async function derivedAll(db: Queries, ms = 15_000): Promise<void> {
  const [cursor] = await db.query<{ rule: string }>('select rule from relay_cursor where id = 1');
  const newest =
    cursor?.rule === 'require'
      ? 'select coalesce(max(release_id), 0)::bigint as last from ping_verifications'
      : 'select coalesce(max(id), 0)::bigint as last from pings';
  const [{ last }] = await db.query<{ last: number }>(newest);
  await waitFor(
    async () => {
      const [c] = await db.query<{ position: number }>('select position from relay_cursor where id = 1');
      return c !== undefined && Number(c.position) >= Number(last);
    },
    { timeoutMs: ms, what: `the relay cursor at ${last}` },
  );
}

/**
 * Resolves once the relay of `apps` (instances on one database) has nothing left to do: no job is pending
 * (a job stays pending until its outcome is written) and no instance holds one, so every request it was
 * going to make for what was derived has been made and answered. Call derivedAll first.
 */
export async function relayIdle(apps: TestApp | TestApp[], ms = 15_000): Promise<void> {
  const all = Array.isArray(apps) ? apps : [apps];
  let seen = { pending: 0, held: [] as number[] };
  await waitFor(
    async () => {
      const [{ n }] = await all[0].app.db.query<{ n: number }>(`select count(*)::int as n from relay_jobs where state = 'pending'`);
      seen = { pending: Number(n), held: all.map((a) => a.app.relay.worker?.active ?? 0) };
      return seen.pending === 0 && seen.held.every((h) => h === 0);
    },
    { timeoutMs: ms, what: () => `the relay to be idle (no job pending, none in hand): ${JSON.stringify(seen)}` },
  );
}

/** Runs `pingd relay …` on the app's database; returns the exit code and what it printed. */
export async function relayCli(t: TestApp, ...positionals: string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const code = await relayCommand({}, positionals, t.config, {
    openDb: async () => borrowed(t.app.db),
    EXIT: { OK: 0, FAILURE: 1, USAGE: 2 },
    out: (s) => void lines.push(s),
    err: (s) => void lines.push(s),
  });
  return { code, out: lines.join('\n') };
}
