// Owns one relay request: a weblogUpdates call (the XML-RPC ping interface: extendedPing with the feed,
// else ping) to a target with the npm `xmlrpc` client, made safe for our use of it — text stripped of
// characters XML cannot carry (its serializer throws on them), its answer read only through own
// properties (its deserializer lets a `__proto__` member replace a struct's prototype), the connection
// routed through the outbound address policy (every resolved address checked, and IP-literal hosts
// checked explicitly since the lookup hook is skipped for them), a deadline, and a User-Agent that names
// pingd and carries the relay marker — and the answer sorted into delivered / refused / failed.
import { promises as dns, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import xmlrpc from 'xmlrpc';
import { checkAddresses, type AddressPolicy } from '../../platform/fetch/address-policy.js';
import { FetchError } from '../../platform/fetch/safe-fetch.js';
import { parseIp } from '../../platform/net/ip.js';
import { hostToResolve } from '../../platform/net/url-host.js';
import { retryAfter } from '../../platform/retry.js';

/** What pingd puts in the User-Agent of its relays, and looks for in the pings it receives. */
export const RELAY_MARKER = 'pingd-relay/';

export function relayUserAgent(version: string, contactUrl: string | undefined): string {
  return `${RELAY_MARKER}1 (pingd/${version}${contactUrl ? `; +${contactUrl}` : ''})`;
}

export interface RelayPing {
  name: string;
  url: string;
  changesUrl: string | null;
  rssUrl: string | null;
  tags: string[] | null;
}

export type SendResult =
  | { outcome: 'delivered'; method: string; fellBack: boolean; message: string }
  | { outcome: 'refused'; method: string; fellBack: boolean; message: string }
  | { outcome: 'failed'; method: string; fellBack: boolean; error: string; code: string; blockedUntil?: Date };

export interface SenderOptions {
  policy: AddressPolicy;
  userAgent: string;
  timeoutMs: number;
  /** Injected resolver (tests); the system resolver by default. */
  resolve?: (host: string) => Promise<string[]>;
}

/**
 * Most bytes read from a target for one call, headers included. A weblogUpdates answer is a struct of two
 * members; the npm xmlrpc client reads whatever comes until the deadline, which on a fast link is
 * gigabytes (every request pingd makes reads a bounded amount).
 */
export const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * An agent for one request whose sockets count what they read and call `tooLarge` past `maxBytes`. Not
 * kept alive: a pooled socket could have been opened to an address checked under another policy.
 */
function cappedAgent(secure: boolean, maxBytes: number, tooLarge: () => void): http.Agent {
  const agent = secure ? new https.Agent({ keepAlive: false }) : new http.Agent({ keepAlive: false });
  const create = agent.createConnection.bind(agent) as (...args: unknown[]) => Duplex;
  agent.createConnection = ((...args: unknown[]) => {
    const socket = create(...args);
    let read = 0;
    socket.on('data', (chunk: Buffer) => {
      read += chunk.length;
      if (read > maxBytes) tooLarge();
    });
    return socket;
  }) as typeof agent.createConnection;
  return agent;
}

// XML 1.0 Char: no C0 controls but tab, newline and carriage return; no lone surrogates, U+FFFE/U+FFFF.
const NOT_XML =
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

export function xmlText(s: string): string {
  return s.replace(NOT_XML, '');
}

/** The call for a ping: extendedPing(name, url, changesUrl, rssUrl[, tags]) when it had a feed, else ping(name, url). */
export function callFor(p: RelayPing, pingOnly: boolean): { method: string; params: string[] } {
  const name = xmlText(p.name || p.url);
  const url = xmlText(p.url);
  if (p.rssUrl && !pingOnly) {
    const params = [name, url, xmlText(p.changesUrl ?? p.url), xmlText(p.rssUrl)];
    // weblogUpdates: the optional fifth parameter is the tags, '|'-delimited.
    if (p.tags && p.tags.length > 0) params.push(xmlText(p.tags.join('|')));
    return { method: 'weblogUpdates.extendedPing', params };
  }
  return { method: 'weblogUpdates.ping', params: [name, url] };
}

type Answer =
  { kind: 'value'; value: unknown } | { kind: 'fault'; message: string } | { kind: 'error'; error: FetchError; blockedUntil?: Date };

export class RelaySender {
  private readonly resolve: (host: string) => Promise<string[]>;

  constructor(private readonly opts: SenderOptions) {
    this.resolve = opts.resolve ?? (async (host) => (await dns.lookup(host, { all: true, verbatim: true })).map((a) => a.address));
  }

  /**
   * Sends `p` to `target`. A fault to extendedPing is answered by sending ping at once (WordPress does the
   * same) and reported with `fellBack`, so the caller remembers to send that target ping from then on.
   */
  async send(target: string, p: RelayPing, pingOnly: boolean): Promise<SendResult> {
    const first = callFor(p, pingOnly);
    let a = await this.call(target, first.method, first.params);
    let method = first.method;
    let fellBack = false;
    if (a.kind === 'fault' && method === 'weblogUpdates.extendedPing') {
      const second = callFor(p, true);
      method = second.method;
      fellBack = true;
      a = await this.call(target, second.method, second.params);
    }
    if (a.kind === 'fault') return { outcome: 'failed', method, fellBack, error: `fault: ${a.message}`, code: 'XMLRPC_FAULT' };
    if (a.kind === 'error')
      return {
        outcome: 'failed',
        method,
        fellBack,
        error: a.error.message,
        code: a.error.code,
        ...(a.blockedUntil ? { blockedUntil: a.blockedUntil } : {}),
      };
    const { flerror, message } = readAnswer(a.value);
    return { outcome: flerror ? 'refused' : 'delivered', method, fellBack, message };
  }

  private async call(target: string, method: string, params: string[]): Promise<Answer> {
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      return { kind: 'error', error: new FetchError('FETCH_URL_INVALID', 'not an absolute URL', target) };
    }
    const host = hostToResolve(url);
    // The lookup hook is skipped for IP literals: check them here.
    if (parseIp(host)) {
      const v = checkAddresses([host], this.opts.policy);
      if (!v.allowed)
        return {
          kind: 'error',
          error: new FetchError('FETCH_ADDRESS_BLOCKED', `${host} is a ${v.range} address, which this server does not connect to`, target),
        };
    }
    const controller = new AbortController();
    const policy = this.opts.policy;
    const resolve = this.resolve;
    const family = (a: string) => (a.includes(':') ? 6 : 4);
    // The socket's DNS: every address the name has is checked, and only checked ones are connected to.
    const lookup = (hostname: string, options: { all?: boolean; family?: number }, cb: (...args: unknown[]) => void) => {
      resolve(hostname).then(
        (addresses) => {
          const v = checkAddresses(addresses, policy);
          if (!v.allowed)
            return cb(
              new FetchError(
                'FETCH_ADDRESS_BLOCKED',
                `${hostname} resolves to ${v.address || 'no address'} (${v.range}), which this server does not connect to`,
                target,
              ),
            );
          const usable = addresses.filter((a) => !options.family || family(a) === options.family);
          const list = usable.length ? usable : addresses;
          if (options.all)
            cb(
              null,
              list.map((address): LookupAddress => ({ address, family: family(address) })),
            );
          else cb(null, list[0], family(list[0]));
        },
        (err: NodeJS.ErrnoException) =>
          cb(new FetchError('FETCH_DNS_FAILED', `cannot resolve ${hostname} (${err.code ?? err.message})`, target)),
      );
    };
    const client = (url.protocol === 'https:' ? xmlrpc.createSecureClient : xmlrpc.createClient)({
      host,
      port: url.port ? Number(url.port) : undefined,
      path: `${url.pathname}${url.search}`,
      headers: { 'User-Agent': this.opts.userAgent, Connection: 'close' },
      // Passed through to http.request: the checked lookup, a fresh connection each time that reads at
      // most MAX_ANSWER_BYTES, and the deadline.
      ...({
        lookup,
        agent: cappedAgent(url.protocol === 'https:', MAX_ANSWER_BYTES, () => tooLarge()),
        signal: controller.signal,
      } as object),
    });
    let tooLarge = () => {};
    return new Promise<Answer>((done) => {
      let settled = false;
      const finish = (a: Answer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        // Given up on: drop the connection rather than wait for the rest. A complete answer needs nothing
        // (Connection: close; an abort there costs an AbortError with its stack per relay, measured).
        if (a.kind === 'error') controller.abort();
        done(a);
      };
      const timer = setTimeout(
        () =>
          finish({ kind: 'error', error: new FetchError('FETCH_TIMEOUT', `no complete answer within ${this.opts.timeoutMs} ms`, target) }),
        this.opts.timeoutMs,
      );
      tooLarge = () =>
        finish({ kind: 'error', error: new FetchError('FETCH_TOO_LARGE', `the answer is larger than ${MAX_ANSWER_BYTES} bytes`, target) });
      try {
        client.methodCall(method, params, (err: unknown, value: unknown) => {
          if (!err) return finish({ kind: 'value', value });
          const e = err as Error & {
            faultCode?: unknown;
            faultString?: unknown;
            res?: { statusCode?: number; headers?: Record<string, string | string[] | undefined> };
            code?: string;
          };
          if (e.faultCode !== undefined || e.faultString !== undefined)
            return finish({ kind: 'fault', message: String(e.faultString ?? e.message).slice(0, 200) });
          if (e instanceof FetchError) return finish({ kind: 'error', error: e });
          const status = e.res?.statusCode;
          if (status !== undefined && status !== 200) {
            const until = status === 429 || status === 503 ? retryAfter(e.res?.headers?.['retry-after'], new Date()) : undefined;
            return finish({
              kind: 'error',
              error: new FetchError('FETCH_BAD_RESPONSE', `HTTP ${status}`, target),
              ...(until ? { blockedUntil: until } : {}),
            });
          }
          if (status === 200)
            return finish({
              kind: 'error',
              error: new FetchError('FETCH_BAD_RESPONSE', `not an XML-RPC answer (${e.message.slice(0, 100)})`, target),
            });
          finish({ kind: 'error', error: new FetchError('FETCH_NETWORK', `${host}: ${e.code ?? e.message}`, target) });
        });
      } catch (err) {
        // The serializer throws on what it cannot write (xmlText should have removed it).
        finish({ kind: 'error', error: new FetchError('FETCH_URL_INVALID', `cannot write the call: ${(err as Error).message}`, target) });
      }
    });
  }
}

/** flerror and message of a weblogUpdates answer, read through own properties only. */
export function readAnswer(v: unknown): { flerror: boolean; message: string } {
  if (v === null || typeof v !== 'object') return { flerror: false, message: '' };
  const own = (k: string) => (Object.prototype.hasOwnProperty.call(v, k) ? (v as Record<string, unknown>)[k] : undefined);
  const f = own('flerror');
  const m = own('message');
  return { flerror: f === true || f === 1 || f === '1', message: typeof m === 'string' ? m.slice(0, 200) : '' };
}
