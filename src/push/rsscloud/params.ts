// Owns reading a pleaseNotify request (RSS 2.0 <cloud>; rsscloud-server 4.0.0's subscribe-request.ts) into
// what pingd will do, as pure functions: the REST form (notifyProcedure, port, path, protocol, optional
// domain, url1…urlN) and the XML-RPC call (notifyProcedure, port, path, protocol, urlList[, domain]) give one
// NotifyRequest, or a refusal with rsscloud-server's wording. The endpoint is
// scheme://domain-or-requester-address:port/path, https for https-post or port 443, else http.
import { HAS_CONTROL } from '../../platform/xml/escape.js';
import { normalizeUrls } from '../../intake/ping/validate.js';
import { parseIp } from '../../platform/net/ip.js';
import { MSG } from './answers.js';
import type { XmlRpcValue } from '../../intake/xmlrpc/values.js';

/** The three rsscloud-server 4.0.0 takes: a form POST over http or https, or an XML-RPC call. */
export type Protocol = 'http-post' | 'https-post' | 'xml-rpc';
const PROTOCOLS: readonly string[] = ['http-post', 'https-post', 'xml-rpc'];

/** An XML-RPC methodName (XML-RPC spec: "identifier characters, upper and lower-case A-Z, the numeric characters, 0-9, underscore, dot, colon and slash"). */
const METHOD_NAME = /^[A-Za-z0-9_.:/]{1,128}$/;

export interface NotifyRequest {
  protocol: Protocol;
  /** The method an xml-rpc endpoint is called with; null for http-post and https-post (ignored there). */
  notifyProcedure: string | null;
  /** Where notifications go. */
  notifyUrl: string;
  /** Its host (name or address, lower case, no port): the bounds count under it. */
  endpointHost: string;
  /**
   * Whether `domain` was given: an http-post or https-post endpoint is then checked with a GET challenge,
   * else with a test POST; an xml-rpc endpoint always with a test call (rsscloud-server 4.0.0).
   */
  viaDomain: boolean;
  /** The resources (feeds), normalised, without repeats, in the order given. */
  urls: string[];
}

export type Parsed = { ok: true; request: NotifyRequest } | { ok: false; msg: string };

/** The longest path and domain taken (a URL of pingd's 2048 characters at most, with its scheme and port). */
const MAX_PATH = 1024;
const MAX_DOMAIN = 253;

export interface NotifyFields {
  notifyProcedure: string | undefined;
  port: string | undefined;
  path: string | undefined;
  protocol: string | undefined;
  domain: string | undefined;
  urls: string[];
}

/** The REST form's fields: every parameter whose name starts with "url" (any case) is a resource, in order. */
export function restFields(form: Record<string, unknown>): NotifyFields | { error: string } {
  const one = (k: string): string | undefined | { error: string } => {
    const v = form[k];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') return { error: `The parameter ${k} must be given once.` };
    return v;
  };
  const fields: Record<string, string | undefined> = {};
  for (const k of ['notifyProcedure', 'port', 'path', 'protocol', 'domain']) {
    const v = one(k);
    if (typeof v === 'object') return v;
    fields[k] = v;
  }
  const urls: string[] = [];
  for (const [k, v] of Object.entries(form)) {
    if (!k.toLowerCase().startsWith('url')) continue;
    for (const u of Array.isArray(v) ? v : [v]) if (typeof u === 'string') urls.push(u);
  }
  return {
    notifyProcedure: fields.notifyProcedure,
    port: fields.port,
    path: fields.path,
    protocol: fields.protocol,
    domain: fields.domain,
    urls,
  };
}

/**
 * The request, checked: missing parameters named together (as rsscloud-server does), the protocol one of
 * the three rsscloud-server speaks (xml-rpc with the method to call), the port a number, the path and
 * domain plain, and at most `maxUrls` resources, each an http(s) URL. `clientAddr` is the endpoint's host
 * when no domain is given.
 */
export function parseNotify(f: NotifyFields, clientAddr: string | null, maxUrls: number): Parsed {
  const missing = (['port', 'path', 'protocol'] as const).filter((k) => f[k] === undefined);
  if (missing.length > 0) return { ok: false, msg: MSG.missing(missing) };
  const protocol = (f.protocol as string).trim();
  if (!PROTOCOLS.includes(protocol)) return { ok: false, msg: MSG.badProtocol(protocol.slice(0, 64)) };
  let notifyProcedure: string | null = null;
  if (protocol === 'xml-rpc') {
    notifyProcedure = (f.notifyProcedure ?? '').trim();
    if (notifyProcedure === '') return { ok: false, msg: MSG.noProcedure };
    if (!METHOD_NAME.test(notifyProcedure)) return { ok: false, msg: MSG.badProcedure };
  }
  const portText = (f.port as string).trim();
  const port = /^\d{1,5}$/.test(portText) ? Number(portText) : NaN;
  if (!(port >= 1 && port <= 65535)) return { ok: false, msg: 'The port must be a number from 1 to 65535.' };
  let path = (f.path as string).trim();
  if (path.length > MAX_PATH) return { ok: false, msg: `The path is longer than ${MAX_PATH} characters.` };
  if (HAS_CONTROL.test(path) || /\s/.test(path)) return { ok: false, msg: 'The path contains whitespace or control characters.' };
  if (!path.startsWith('/')) path = `/${path}`;

  let host: string;
  const viaDomain = f.domain !== undefined && f.domain.trim() !== '';
  if (viaDomain) {
    const d = (f.domain as string).trim();
    if (d.length > MAX_DOMAIN || !/^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:.]+)$/.test(d))
      return { ok: false, msg: 'The domain must be a host name or an IP address, without a port or a path.' };
    host = d;
  } else {
    if (!clientAddr) return { ok: false, msg: 'The request has no client address to notify: give a domain.' };
    host = clientAddr;
  }
  // An IPv6 literal goes in brackets (rsscloud-server's glueUrlParts).
  if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`;
  // rsscloud-server 2.4.0 on: port 443 is https whatever the protocol says (a subscriber behind TLS that
  // registers http-post on 443 would otherwise be sent plain HTTP on the TLS port).
  const scheme = protocol === 'https-post' || port === 443 ? 'https' : 'http';
  let endpoint: URL;
  try {
    endpoint = new URL(`${scheme}://${host}:${port}${path}`);
  } catch {
    return { ok: false, msg: 'The domain, port and path do not make a URL.' };
  }
  const bare = endpoint.hostname.replace(/^\[|\]$/g, '');
  if (bare === '' || (!parseIp(bare) && bare.split('.').some((l) => l === '')))
    return { ok: false, msg: 'The domain must be a host name or an IP address, without a port or a path.' };
  endpoint.hash = '';

  if (f.urls.length === 0) return { ok: false, msg: MSG.noResources };
  if (f.urls.length > maxUrls) return { ok: false, msg: `At most ${maxUrls} resources may be named in one request.` };
  const n = normalizeUrls(f.urls, 'resource URL');
  if (!n.ok) return { ok: false, msg: n.reason };
  const urls = n.urls;
  return {
    ok: true,
    request: {
      protocol: protocol as Protocol,
      notifyProcedure,
      notifyUrl: endpoint.href,
      endpointHost: bare.toLowerCase(),
      viaDomain,
      urls,
    },
  };
}

/** A scalar XML-RPC parameter as text (a port may come as an int), or undefined. */
function scalar(v: XmlRpcValue | undefined): string | undefined {
  if (!v) return undefined;
  if (v.type === 'string') return v.value;
  if (v.type === 'int' || v.type === 'double') return String(v.value);
  if (v.type === 'base64') return new TextDecoder('utf-8').decode(v.value);
  return undefined;
}

/**
 * rssCloud.pleaseNotify(notifyProcedure, port, path, protocol, urlList[, domain]) as rsscloud-server reads it
 * (5 or 6 parameters; urlList an array of strings, or one string); a refusal message otherwise.
 */
export function rpcFields(params: readonly XmlRpcValue[]): NotifyFields | { error: string } {
  if (params.length < 5) return { error: MSG.notEnoughParams('pleaseNotify') };
  if (params.length > 6) return { error: MSG.tooManyParams('pleaseNotify') };
  const list = params[4];
  const urls: string[] = [];
  if (list.type === 'array') {
    for (const v of list.value) {
      const s = scalar(v);
      if (s === undefined) return { error: 'The urlList must be an array of strings.' };
      urls.push(s);
    }
  } else {
    const s = scalar(list);
    if (s === undefined) return { error: 'The urlList must be an array of strings.' };
    urls.push(s);
  }
  const domain = params.length === 6 ? scalar(params[5]) : undefined;
  return {
    notifyProcedure: scalar(params[0]),
    port: scalar(params[1]),
    path: scalar(params[2]),
    protocol: scalar(params[3]),
    domain,
    urls,
  };
}
