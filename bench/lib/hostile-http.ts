// Owns sending hostile traffic to a pingd on loopback and measuring what it costs: one request at a time
// (wall ms, pingd CPU, statements), a keep-alive flood of many (pingd's memory before and after), and
// /healthz latency while a few connections attack (the effect on everyone else). Only 127.0.0.0/8 is ever
// addressed: the base URL and every local address are checked.
import { Agent, request } from 'node:http';
import { readFileSync } from 'node:fs';
import { cpuMicros } from './cpu.js';
import { median } from './load.js';

export interface HostileRequest {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: Buffer;
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  ms: number;
}

const LOOPBACK = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

function loopbackOnly(host: string): void {
  if (!LOOPBACK.test(host)) throw new Error(`hostile traffic goes to loopback only, not to ${host}`);
}

/** A keep-alive agent, optionally sending from another loopback address (a distinct client to pingd). */
export function agent(sockets: number, localAddress?: string): Agent {
  if (localAddress) loopbackOnly(localAddress);
  return new Agent({ keepAlive: true, maxSockets: sockets, ...(localAddress ? { localAddress } : {}) });
}

/** One request; the body is read whole (up to 64 KiB kept as text). */
export function send(base: string, r: HostileRequest, via: Agent, timeoutMs = 120_000): Promise<Answer> {
  const u = new URL(base);
  loopbackOnly(u.hostname);
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...(r.headers ?? {}) };
    if (r.body) headers['content-length'] = r.body.length;
    const req = request(
      { host: u.hostname, port: u.port, method: r.method, path: r.path, headers, agent: via, timeout: timeoutMs },
      (res) => {
        const chunks: Buffer[] = [];
        let kept = 0;
        res.on('data', (c: Buffer) => {
          if (kept < 65536) chunks.push(c);
          kept += c.length;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
            ms: performance.now() - t0,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(r.body);
  });
}

/** One request on a connection of its own. */
export async function sendOnce(base: string, r: HostileRequest): Promise<Answer> {
  const via = agent(1);
  try {
    return await send(base, r, via);
  } finally {
    via.destroy();
  }
}

/** An answer's status, with which limit a 429 comes from when its text says (the weblog's throttle, a host's, a client's). */
export function answerKind(a: Answer): string {
  if (a.status !== 429) return String(a.status);
  if (a.body.includes('pinged less than')) return '429 throttled';
  if (/weblogs on \S+ were pinged/i.test(a.body)) return '429 host budget';
  if (/unused tokens/i.test(a.body)) return '429 live-token cap';
  if (/from your address/i.test(a.body)) return '429 client limit';
  return '429';
}

/** Requests counted by the in-process counter (bench/lib/query-counter.ts) so far. */
export type QueryCount = () => Promise<number>;

export interface Cost {
  n: number;
  p50: number;
  max: number;
  /** pingd CPU (user+system) per request, ms. */
  cpuMs: number;
  /** Statements per request, less what pingd sends when idle over the same time; undefined if not counted. */
  queries?: number;
  statuses: Record<string, number>;
  answers: Answer[];
}

/**
 * `n` requests one after another (stopping early after `maxSeconds`): the cost of each alone. `idlePerSec`
 * is the rate of statements pingd sends with no requests (render ticks, queue polls), subtracted.
 */
export async function sequential(
  base: string,
  pid: number,
  make: () => HostileRequest,
  n: number,
  maxSeconds: number,
  queries: QueryCount,
  idlePerSec: number,
  via = agent(1),
): Promise<Cost> {
  const answers: Answer[] = [];
  await send(base, { method: 'GET', path: '/healthz' }, via); // the connection is open before timing
  const q0 = await queries();
  const c0 = cpuMicros(pid);
  const t0 = performance.now();
  while (answers.length < n && performance.now() - t0 < maxSeconds * 1000) answers.push(await send(base, make(), via));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuMicros(pid) - c0;
  const q = (await queries()) - q0;
  via.destroy();
  const statuses: Record<string, number> = {};
  for (const a of answers) statuses[answerKind(a)] = (statuses[answerKind(a)] ?? 0) + 1;
  const ms = answers.map((a) => a.ms);
  return {
    n: answers.length,
    p50: median(ms),
    max: Math.max(...ms),
    cpuMs: cpu / 1000 / answers.length,
    queries: Number.isFinite(q) ? Math.max(0, q - idlePerSec * seconds) / answers.length : undefined,
    statuses,
    answers,
  };
}

export interface Flood {
  sent: number;
  seconds: number;
  failed: number;
  statuses: Record<string, number>;
}

/** `total` requests, `concurrency` in flight on keep-alive connections, stopping after `maxSeconds`. */
export async function flood(
  base: string,
  make: () => HostileRequest,
  total: number,
  concurrency: number,
  maxSeconds: number,
  progress?: (sent: number) => void,
): Promise<Flood> {
  const via = agent(concurrency);
  const statuses: Record<string, number> = {};
  let sent = 0;
  let failed = 0;
  const t0 = performance.now();
  const until = t0 + maxSeconds * 1000;
  const worker = async () => {
    while (sent < total && performance.now() < until) {
      sent++;
      if (progress && sent % 10_000 === 0) progress(sent);
      try {
        const a = await send(base, make(), via);
        statuses[answerKind(a)] = (statuses[answerKind(a)] ?? 0) + 1;
      } catch {
        failed++;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  via.destroy();
  return { sent, seconds: (performance.now() - t0) / 1000, failed, statuses };
}

export interface Latency {
  p50: number;
  p99: number;
  n: number;
}

/** GET /healthz one at a time for `seconds` on its own connection. */
async function healthz(base: string, seconds: number): Promise<Latency> {
  const via = agent(1);
  const ms: number[] = [];
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until) ms.push((await send(base, { method: 'GET', path: '/healthz' }, via)).ms);
  via.destroy();
  ms.sort((a, b) => a - b);
  return { p50: median(ms), p99: ms[Math.min(ms.length - 1, Math.floor(ms.length * 0.99))], n: ms.length };
}

/** /healthz alone, with the statements pingd sends meanwhile (its idle rate, per second). */
export async function idleHealthz(base: string, seconds: number, queries: QueryCount): Promise<{ latency: Latency; idlePerSec: number }> {
  const q0 = await queries();
  const t0 = performance.now();
  const latency = await healthz(base, seconds);
  const q = (await queries()) - q0;
  return { latency, idlePerSec: Number.isFinite(q) ? q / ((performance.now() - t0) / 1000) : 0 };
}

/** /healthz while `connections` clients send the hostile request back to back. */
export async function healthzUnderAttack(
  base: string,
  make: () => HostileRequest,
  seconds: number,
  connections = 4,
): Promise<{ latency: Latency; attacks: number }> {
  const via = agent(connections);
  let stop = false;
  let attacks = 0;
  const attacker = async () => {
    while (!stop) {
      await send(base, make(), via).catch(() => undefined);
      attacks++;
    }
  };
  const running = Array.from({ length: connections }, attacker);
  // The attack first takes hold (connections open, pingd busy) before /healthz is timed.
  await new Promise((r) => setTimeout(r, 300));
  const latency = await healthz(base, seconds);
  stop = true;
  await Promise.all(running);
  via.destroy();
  return { latency, attacks };
}

/** Resident and peak resident memory of a process, MB (Linux /proc). */
export function memoryMb(pid: number): { rss: number; peak: number } {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(s)?.[1] ?? NaN);
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}

export const statusList = (s: Record<string, number>) =>
  Object.entries(s)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${v}× ${k}`)
    .join(', ');
