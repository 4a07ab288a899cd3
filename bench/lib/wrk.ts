// Owns driving load with wrk (C, epoll; Debian package `wrk`): installing it when missing, the Lua scripts
// a run needs (a fixed request, or an XML-RPC ping naming a new weblog each request), and reading a run's
// figures from the JSON line the script's done() prints. wrk costs the shared cores a fraction of what
// autocannon (Node) costs, so the ratios it gives are not compressed toward 1 (bench/../pitfalls.md).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { track } from './servers.js';
import { cpuMicros } from './cpu.js';
import { spreadOriginLua } from './feed-hosts.js';

export interface WrkRun {
  /** Completed requests per second (every answer read, whatever its status). */
  rps: number;
  requests: number;
  /** Response bytes read per request (head and body). */
  bytesPerReq: number;
  seconds: number;
  /** Latency percentiles, ms. */
  p50: number;
  p90: number;
  p99: number;
  max: number;
  /** Socket errors (connect, read, write), timeouts, and answers with status ≥ 400. */
  errors: number;
  timeouts: number;
  status4xx5xx: number;
  /** wrk's own CPU per request (µs), read from /proc shortly before the run ends; NaN when not read. */
  loadgenUs: number;
}

export interface WrkRequest {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

const WRK = 'wrk';

function have(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

/** Makes sure `wrk` is on PATH: `apt-get install -y wrk` (after `apt-get update` if the first try fails). */
export function ensureWrk(log: (s: string) => void): void {
  if (have(WRK)) return;
  log('wrk is not installed: apt-get install -y wrk');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () => spawnSync('apt-get', ['install', '-y', '-q', 'wrk'], { stdio: ['ignore', 'ignore', 'inherit'], env }).status === 0;
  if (!install()) {
    spawnSync('apt-get', ['update', '-q'], { stdio: ['ignore', 'ignore', 'inherit'], env });
    install();
  }
  if (!have(WRK))
    throw new Error('wrk is missing and `apt-get install -y wrk` did not install it (run it as root, or install wrk yourself)');
}

/** A Lua string literal of any bytes (Lua 5.1/LuaJIT: no \u escapes, so everything odd is \ddd). */
export function luaString(s: string | Buffer): string {
  const b = Buffer.isBuffer(s) ? s : Buffer.from(s, 'utf8');
  let out = '"';
  for (const c of b) {
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += '\\\\';
    else if (c >= 0x20 && c < 0x7f) out += String.fromCharCode(c);
    else out += `\\${c}`;
  }
  return `${out}"`;
}

function luaHeaders(h: Record<string, string>): string {
  return `{ ${Object.entries(h)
    .map(([k, v]) => `[${luaString(k)}] = ${luaString(v)}`)
    .join(', ')} }`;
}

// Printed once by wrk's main thread at the end: exact counts and latency percentiles (µs) to parse,
// instead of wrk's rounded human summary.
const DONE = `
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%.0f,"bytes":%.0f,"duration_us":%.0f,"connect":%.0f,"read":%.0f,"write":%.0f,"status":%.0f,"timeout":%.0f,"p50":%.0f,"p90":%.0f,"p99":%.0f,"max":%.0f}\\n',
    summary.requests, summary.bytes, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
`;

/** The same request every time: wrk builds it once (no Lua runs per request). */
export function fixedScript(r: WrkRequest): string {
  return [
    `wrk.method = ${luaString(r.method)}`,
    `wrk.path = ${luaString(r.path)}`,
    `wrk.headers = ${luaHeaders(r.headers)}`,
    r.body !== undefined ? `wrk.body = ${luaString(r.body)}` : '',
    DONE,
  ].join('\n');
}

/**
 * XML-RPC `weblogUpdates.ping` as WordPress sends it (bench/lib/scenarios.ts pingSpec's bytes), naming a
 * weblog no other request names: http://w<tag>-<n>.bench.example.com/ with a per-request counter and the
 * run's tag (wrk's script argument), so every ping is a durable insert on a host of its own. With `port`,
 * the weblogs are on spreadWeblogHosts' 64,000 loopback hosts instead (feed-hosts.ts), so that a verifying
 * pingd fetches only from this machine.
 */
export function pingScript(port?: number): string {
  const head =
    '<?xml version="1.0"?>\n<methodCall>\n<methodName>weblogUpdates.ping</methodName>\n<params>\n<param><value><string>Bench Blog</string></value></param>\n<param><value><string>' +
    (port ? '' : 'http://w');
  const tail = (port ? '/' : '.bench.example.com/') + '</string></value></param>\n</params></methodCall>\n';
  const url = port ? `${spreadOriginLua(port)} .. "/w" .. tag .. "-" .. counter` : 'tag .. "-" .. counter';
  return `
local counter = 0
local tag = "x"
local head = ${luaString(head)}
local tail = ${luaString(tail)}
local headers = ${luaHeaders({ 'Content-Type': 'text/xml', 'User-Agent': 'The Incutio XML-RPC PHP Library -- WordPress/6.7.1' })}
function init(args)
  if args[1] then tag = args[1] end
end
function request()
  counter = counter + 1
  return wrk.format("POST", "/RPC2", headers, head .. ${url} .. tail)
end
${DONE}`;
}

/** Writes a script to a temporary file; `dispose` removes it. */
export function scriptFile(lua: string): { path: string; dispose(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'pingd-wrk-'));
  const path = join(dir, 'script.lua');
  writeFileSync(path, lua);
  return { path, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface WrkOptions {
  script: string;
  connections: number;
  seconds: number;
  /** wrk threads (1: the second core stays with the server and PostgreSQL). */
  threads?: number;
  /** Seconds before wrk counts a request as timed out (its default is 2). */
  timeoutSec?: number;
  /** Script arguments (after `--`). */
  args?: string[];
  /** Told wrk's pid once it runs (to read its CPU). */
  onStart?(pid: number): void;
}

/** One wrk run against baseUrl; rejects when wrk fails or prints no figures. */
export function runWrk(baseUrl: string, o: WrkOptions): Promise<WrkRun> {
  const args = [
    '-t',
    String(o.threads ?? 1),
    '-c',
    String(o.connections),
    '-d',
    `${o.seconds}s`,
    '--timeout',
    `${o.timeoutSec ?? 10}s`,
    '-s',
    o.script,
    baseUrl,
    ...(o.args?.length ? ['--', ...o.args] : []),
  ];
  return new Promise((resolve, reject) => {
    const p = spawn(WRK, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    track(p);
    if (p.pid) o.onStart?.(p.pid);
    // wrk's CPU so far, read just before it ends (its figures are printed at exit, when /proc is gone).
    let cpu = NaN;
    const t0 = performance.now();
    const probe = setTimeout(
      () => {
        if (p.pid) cpu = cpuMicros(p.pid);
      },
      Math.max(0, o.seconds * 1000 - 150),
    );
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', reject);
    p.on('exit', (code) => {
      clearTimeout(probe);
      const m = /^WRKJSON (\{.*\})$/m.exec(out);
      if (code !== 0 || !m) return reject(new Error(`wrk ${args.join(' ')} exited with ${code}: ${(err || out).trim().slice(-500)}`));
      const run = parseWrkJson(m[1]);
      // Requests answered by the time of the probe, estimated at the run's average rate.
      const probedSec = Math.min(run.seconds, Math.max(0.001, o.seconds - 0.15, (performance.now() - t0) / 1000 - 0.15));
      run.loadgenUs = cpu > 0 ? cpu / (run.rps * probedSec) : NaN;
      resolve(run);
    });
  });
}

export function parseWrkJson(json: string): WrkRun {
  const j = JSON.parse(json) as Record<string, number>;
  const seconds = j.duration_us / 1e6;
  return {
    rps: j.requests / seconds,
    requests: j.requests,
    bytesPerReq: j.requests ? j.bytes / j.requests : 0,
    seconds,
    p50: j.p50 / 1000,
    p90: j.p90 / 1000,
    p99: j.p99 / 1000,
    max: j.max / 1000,
    errors: j.connect + j.read + j.write,
    timeouts: j.timeout,
    status4xx5xx: j.status,
    loadgenUs: NaN,
  };
}
