// Owns every request pingd makes to other hosts: a polite HTTP client (the aggregator-behaviour guide, HTTP level: clear User-Agent,
// timeouts, gzip, bounded redirects) that cannot be turned against the server's own network. Each hop's
// host is resolved once, EVERY resolved address is checked against the address policy, and the connection
// goes to a checked address (the socket never does a second DNS lookup, so a rebinding answer cannot slip
// in between the check and the connect). Redirect targets go through the same checks.
import http from 'node:http';
import https from 'node:https';
import { promises as dns, type LookupAddress } from 'node:dns';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { checkAddresses, DEFAULT_POLICY, type AddressPolicy } from './address-policy.js';
import { parseIp } from '../net/ip.js';
import { hostToResolve } from '../net/url-host.js';
import { FetchError, type FetchErrorCode } from './fetch-error.js';
import { readBody, readSome } from './read-answer.js';

export { FetchError, type FetchErrorCode } from './fetch-error.js';

/** Resolves a host name to every address it has (both families). */
export type LookupFn = (hostname: string) => Promise<string[]>;

export const systemLookup: LookupFn = async (hostname) => {
  const r = await dns.lookup(hostname, { all: true, verbatim: true });
  return r.map((a) => a.address);
};

export interface SafeFetcherOptions {
  policy?: AddressPolicy;
  userAgent: string;
  /** Default deadline for a whole fetch: DNS, every hop, and the body. */
  timeoutMs: number;
  /** Injected resolver (tests); the system resolver by default. */
  lookup?: LookupFn;
  /** Told of every fetch's outcome ('ok' or an error code), for metrics. */
  onOutcome?: (outcome: 'ok' | FetchErrorCode) => void;
  /** Fetches in flight at once; more are refused at once with FETCH_BUSY (default 32). */
  maxConcurrent?: number;
}

export interface GetOptions {
  timeoutMs?: number;
  /** Largest body accepted, compressed and decompressed (default 1 MiB). */
  maxBytes?: number;
  /** Redirects followed before giving up (default 3). */
  maxRedirects?: number;
  accept?: string;
  headers?: Record<string, string>;
}

export interface PostOptions {
  body: Buffer;
  contentType: string;
  headers?: Record<string, string>;
  /** This request's User-Agent in place of the fetcher's (the relay's carries its loop marker). */
  userAgent?: string;
  timeoutMs?: number;
  /** Most bytes of the answer read (default 4 KiB); the rest is dropped. */
  maxBytes?: number;
  /**
   * What an answer longer than `maxBytes` is: 'truncate' (default) reads the first `maxBytes` and succeeds;
   * 'fail' drops the connection at the cap (or at once, for a longer Content-Length) and fails with
   * FETCH_TOO_LARGE, so a caller that counts only a complete answer as a success (WebSub deliveries) never
   * takes a flood of bytes for one.
   */
  oversize?: 'truncate' | 'fail';
}

export interface FetchResult {
  /** The URL that answered (after redirects). */
  url: string;
  status: number;
  headers: IncomingHttpHeaders;
  /** Decompressed body. */
  body: Buffer;
  /** Every Location followed, in order. */
  redirects: string[];
  /** The redirects followed, each with its status (a permanent move is 301 or 308 on every hop). */
  hops: { status: number; to: string }[];
  /** The address the final connection went to. */
  address: string;
}

export const DEFAULT_MAX_BYTES = 1024 * 1024;
export const DEFAULT_MAX_REDIRECTS = 3;
export const DEFAULT_MAX_CONCURRENT = 32;
export const DEFAULT_POST_ANSWER_BYTES = 4096;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/**
 * How long a pushed-to host's connection waits for the next push (a server's `Keep-Alive: timeout=N` hint,
 * less a second, shortens it, as Node's agent reads it). A callback host that takes many subscriptions (a
 * feed reader's) gets its deliveries one after another without a TCP (and TLS) handshake each: connecting
 * was ~10% of the main thread's profile in a push fan-out (bench/push.ts, N=100).
 */
export const PUSH_IDLE_MS = 4000;

/**
 * Kept-alive connections for POSTs (pushes), pooled by host name and port. Every socket in the pool was
 * opened through a request's pinned lookup, so it goes to an address the policy allowed; a later request
 * resolves and checks its host again before it may take one. One idle socket per host at most.
 */
function pushAgents() {
  const o = { keepAlive: true, maxFreeSockets: 1, timeout: PUSH_IDLE_MS, scheduling: 'lifo' as const };
  return { 'http:': new http.Agent(o), 'https:': new https.Agent(o) };
}

export class SafeFetcher {
  readonly policy: AddressPolicy;
  private readonly lookup: LookupFn;
  private inFlight = 0;
  private readonly agents = pushAgents();

  constructor(private readonly opts: SafeFetcherOptions) {
    this.policy = opts.policy ?? DEFAULT_POLICY;
    this.lookup = opts.lookup ?? systemLookup;
  }

  get userAgent(): string {
    return this.opts.userAgent;
  }

  /** Closes the kept-alive push connections (the app's close). */
  close(): void {
    for (const a of Object.values(this.agents)) a.destroy();
  }

  /** GETs a URL. Resolves with any HTTP status (the caller decides); rejects with a FetchError. */
  async get(url: string, o: GetOptions = {}): Promise<FetchResult> {
    const timeoutMs = o.timeoutMs ?? this.opts.timeoutMs;
    return this.bounded(url, timeoutMs, (signal) => this.follow(url, o, signal, timeoutMs));
  }

  /**
   * POSTs a body to a URL (WebSub content distribution, rssCloud notifications, relays). The same address
   * checks and pinned connection as get(); no redirect is followed (a 3xx comes back as it is: WebSub §7
   * counts only a 2xx as received, so a subscriber cannot move a delivery elsewhere), and at most
   * `maxBytes` of the answer are read (what a subscriber says back does not matter; the rest is dropped,
   * not an error, unless `oversize` is 'fail'). Either way an answer cut off by the deadline is a
   * FETCH_TIMEOUT, never a short success.
   */
  async post(url: string, o: PostOptions): Promise<FetchResult> {
    const timeoutMs = o.timeoutMs ?? this.opts.timeoutMs;
    return this.bounded(url, timeoutMs, async (signal) => {
      const target = parseTarget(url, url);
      const addresses = await this.resolve(target, signal, timeoutMs);
      const headers = {
        ...(o.headers ?? {}),
        'user-agent': o.userAgent ?? this.opts.userAgent,
        'content-type': o.contentType,
        'content-length': String(o.body.length),
      };
      const send = { method: 'POST' as const, body: o.body, agent: this.agents[target.protocol as 'http:' | 'https:'] };
      const res = await request(target, addresses, headers, signal, send).catch((err: unknown) => {
        // A kept-alive connection the host closed before answering (its idle timeout racing our request):
        // the push goes once more, on a new connection, as pooled clients do for a stale socket. Pushes
        // are delivered at least once (WebSub §7, rssCloud), so a second copy is no harm.
        if ((err as { reusedSocket?: boolean }).reusedSocket && !signal.aborted)
          return request(target, addresses, headers, signal, { ...send, fresh: true });
        throw err;
      });
      const body = await readSome(res, o.maxBytes ?? DEFAULT_POST_ANSWER_BYTES, signal, timeoutMs, target.href, o.oversize ?? 'truncate');
      return {
        url: target.href,
        status: res.statusCode ?? 0,
        headers: res.headers,
        body,
        redirects: [],
        hops: [],
        address: res.socket?.remoteAddress ?? addresses[0],
      };
    });
  }

  /**
   * The address of a URL's host that the policy refuses, with its range; null when every address is
   * allowed, undefined when it cannot tell within `timeoutMs` (not a URL, or the name does not resolve in
   * time). Through the same lookup and policy as every request; for warnings, since each request checks again.
   */
  async refusal(url: string, timeoutMs = 2000): Promise<{ address: string; range: string } | null | undefined> {
    let host: string;
    try {
      host = hostToResolve(new URL(url));
    } catch {
      return undefined;
    }
    let addresses: string[];
    try {
      addresses = parseIp(host)
        ? [host]
        : await Promise.race([
            this.lookup(host),
            new Promise<never>((_, reject) => setTimeout(() => reject(new Error('slow')), timeoutMs).unref()),
          ]);
    } catch {
      return undefined;
    }
    const v = checkAddresses(addresses, this.policy);
    return v.allowed ? null : { address: v.address, range: v.range };
  }

  /** One outbound request under the in-flight bound and a deadline, its failure as a FetchError. */
  private async bounded(url: string, timeoutMs: number, fn: (signal: AbortSignal) => Promise<FetchResult>): Promise<FetchResult> {
    // Requests from the outside make us fetch: a bound on sockets held open by slow servers.
    if (this.inFlight >= (this.opts.maxConcurrent ?? DEFAULT_MAX_CONCURRENT)) {
      this.opts.onOutcome?.('FETCH_BUSY');
      throw new FetchError('FETCH_BUSY', 'too many outbound requests in progress; not fetched', url);
    }
    this.inFlight++;
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), timeoutMs);
    try {
      const r = await fn(ac.signal);
      this.opts.onOutcome?.('ok');
      return r;
    } catch (err) {
      const fe =
        err instanceof FetchError
          ? err
          : ac.signal.aborted
            ? new FetchError('FETCH_TIMEOUT', `no complete answer within ${timeoutMs} ms`, url, { cause: err })
            : new FetchError('FETCH_NETWORK', (err as Error).message, url, { cause: err });
      this.opts.onOutcome?.(fe.code);
      throw fe;
    } finally {
      clearTimeout(timer);
      this.inFlight--;
    }
  }

  private async follow(start: string, o: GetOptions, signal: AbortSignal, timeoutMs: number): Promise<FetchResult> {
    const maxRedirects = o.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
    const maxBytes = o.maxBytes ?? DEFAULT_MAX_BYTES;
    const hops: { status: number; to: string }[] = [];
    let current = parseTarget(start, start);
    for (;;) {
      const addresses = await this.resolve(current, signal, timeoutMs);
      const res = await request(current, addresses, this.headers(o), signal);
      const location = res.headers.location;
      if (REDIRECTS.has(res.statusCode ?? 0) && location) {
        res.resume();
        if (hops.length >= maxRedirects) {
          throw new FetchError('FETCH_TOO_MANY_REDIRECTS', `more than ${maxRedirects} redirects`, current.href);
        }
        const next = parseTarget(location, current.href, current);
        hops.push({ status: res.statusCode ?? 0, to: next.href });
        current = next;
        continue;
      }
      const body = await readBody(res, maxBytes, current.href, signal, timeoutMs);
      return {
        url: current.href,
        status: res.statusCode ?? 0,
        headers: res.headers,
        body,
        redirects: hops.map((h) => h.to),
        hops,
        address: res.socket?.remoteAddress ?? addresses[0],
      };
    }
  }

  private headers(o: GetOptions): Record<string, string> {
    return {
      ...(o.headers ?? {}),
      'user-agent': this.opts.userAgent,
      accept: o.accept ?? '*/*',
      // The aggregator-behaviour guide: compressed transfer saves the publisher's bandwidth; all three are decoded below.
      'accept-encoding': 'gzip, deflate, br',
    };
  }

  /** The checked addresses for a URL's host: a literal as it is, a name through one DNS lookup. */
  private async resolve(url: URL, signal: AbortSignal, timeoutMs: number): Promise<string[]> {
    const host = url.hostname;
    let addresses: string[];
    if (parseIp(host)) {
      addresses = [host.replace(/^\[|\]$/g, '')];
    } else {
      // getaddrinfo cannot be cancelled; stop waiting for it at the deadline instead.
      const aborted = new Promise<never>((_, reject) => {
        const fail = () =>
          reject(new FetchError('FETCH_TIMEOUT', `no complete answer within ${timeoutMs} ms (DNS lookup of ${host})`, url.href));
        if (signal.aborted) fail();
        else signal.addEventListener('abort', fail, { once: true });
      });
      aborted.catch(() => undefined);
      try {
        addresses = await Promise.race([this.lookup(host), aborted]);
      } catch (err) {
        if (err instanceof FetchError) throw err;
        throw new FetchError(
          'FETCH_DNS_FAILED',
          `cannot resolve ${host} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
          url.href,
          { cause: err },
        );
      }
    }
    const verdict = checkAddresses(addresses, this.policy);
    if (!verdict.allowed) {
      const what = parseIp(host)
        ? `${host} is ${/^(IPv4|unspec)/.test(verdict.range) ? 'an' : 'a'} ${verdict.range} address`
        : `${host} resolves to ${verdict.address || 'no address'} (${verdict.range})`;
      throw new FetchError('FETCH_ADDRESS_BLOCKED', `${what}, which this server does not connect to`, url.href);
    }
    return addresses;
  }
}

/** Parses a URL (or a redirect's Location, relative to the current URL) and checks what we allow to GET. */
function parseTarget(raw: string, base: string, from?: URL): URL {
  let u: URL;
  try {
    u = new URL(raw, from ?? undefined);
  } catch {
    throw new FetchError(
      'FETCH_URL_INVALID',
      from ? `the redirect to ${JSON.stringify(raw.slice(0, 200))} is not a valid URL` : 'not an absolute URL',
      base,
    );
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new FetchError('FETCH_URL_INVALID', `only http and https URLs are fetched, not ${u.protocol.slice(0, -1)}`, u.href);
  if (u.username || u.password) throw new FetchError('FETCH_URL_INVALID', 'URLs with a user name or password are not fetched', u.href);
  if (!u.hostname) throw new FetchError('FETCH_URL_INVALID', 'the URL has no host', u.href);
  u.hash = '';
  return u;
}

function request(
  url: URL,
  addresses: string[],
  headers: Record<string, string>,
  signal: AbortSignal,
  send: { method: 'GET' | 'POST'; body?: Buffer; agent?: http.Agent; fresh?: boolean } = { method: 'GET' },
): Promise<IncomingMessage> {
  const hostname = hostToResolve(url);
  const family = (a: string) => (a.includes(':') ? 6 : 4);
  // The socket asks this instead of DNS: it only ever sees the addresses checked above.
  const pinned = (_host: string, options: { all?: boolean; family?: number }, cb: (...args: unknown[]) => void) => {
    const usable = addresses.filter((a) => !options.family || family(a) === options.family);
    const list = usable.length ? usable : addresses;
    if (options.all)
      cb(
        null,
        list.map((address): LookupAddress => ({ address, family: family(address) })),
      );
    else cb(null, list[0], family(list[0]));
  };
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(
      {
        protocol: url.protocol,
        hostname,
        port: url.port || undefined,
        path: `${url.pathname}${url.search}`,
        method: send.method,
        headers,
        lookup: pinned as never,
        // GETs take a fresh connection each; pushes a kept-alive one of their host's (pushAgents).
        agent: send.agent && !send.fresh ? send.agent : false,
        signal,
      },
      resolve,
    );
    req.on('error', (err) => {
      const fe = signal.aborted
        ? err
        : new FetchError('FETCH_NETWORK', `${hostname}: ${(err as NodeJS.ErrnoException).code ?? err.message}`, url.href, { cause: err });
      // Reset before any answer on a reused connection: the caller may send again (see post()).
      const stale = req.reusedSocket && ['ECONNRESET', 'EPIPE', 'ECONNABORTED'].includes((err as NodeJS.ErrnoException).code ?? '');
      reject(stale ? Object.assign(fe, { reusedSocket: true }) : fe);
    });
    req.end(send.body);
  });
}
