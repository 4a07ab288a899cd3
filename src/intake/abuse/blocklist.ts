// Owns the blocklist rules and matching them against a ping: blocked hosts and domains (a domain blocks
// its subdomains), URL and name patterns, and client addresses. Pure: text in, a matcher out; reading and
// re-reading the file is blocklist-file.ts's job.
import { BlockList, isIP } from 'node:net';
import { domainToASCII } from 'node:url';

export type RuleKind = 'host' | 'url' | 'name' | 'client';

export interface BlocklistProblem {
  line: number;
  message: string;
}

export interface BlockMatch {
  kind: RuleKind;
  /** The rule as written in the file (for logs; never shown to the client). */
  rule: string;
}

/** What a ping offers to be matched: URLs already normalised by the validation rules. */
export interface BlockSubject {
  clientAddr?: string | null;
  urls: string[];
  name?: string | null;
}

// Explicit limits: a blocklist is operator input, but a runaway file must not take the process down.
export const MAX_RULES = 200_000;
export const MAX_PATTERN_LENGTH = 2048;

interface Pattern {
  rule: string;
  /** Lower-cased pattern; `*` matches any run of characters, everything else itself. */
  glob: string;
}

export class Blocklist {
  readonly hosts = new Map<string, string>();
  readonly hostAddrs = new BlockList();
  readonly clients = new BlockList();
  readonly urlPatterns: Pattern[] = [];
  readonly namePatterns: Pattern[] = [];
  hostAddrRules = 0;
  clientRules = 0;

  get size(): number {
    return this.hosts.size + this.hostAddrRules + this.clientRules + this.urlPatterns.length + this.namePatterns.length;
  }

  counts(): Record<RuleKind, number> {
    return {
      host: this.hosts.size + this.hostAddrRules,
      url: this.urlPatterns.length,
      name: this.namePatterns.length,
      client: this.clientRules,
    };
  }

  /** The first rule the ping matches, cheapest checks first; undefined when nothing matches. */
  match(s: BlockSubject): BlockMatch | undefined {
    if (s.clientAddr && this.clientRules > 0) {
      const addr = plainAddress(s.clientAddr);
      const family = isIP(addr);
      if (family && this.clients.check(addr, family === 6 ? 'ipv6' : 'ipv4')) return { kind: 'client', rule: `client:${addr}` };
    }
    for (const url of s.urls) {
      const host = blocklistHost(url);
      if (host === undefined) continue;
      const m = this.matchHost(host);
      if (m) return m;
    }
    if (this.urlPatterns.length) {
      for (const url of s.urls) {
        const u = url.toLowerCase();
        for (const p of this.urlPatterns) if (globMatch(p.glob, u)) return { kind: 'url', rule: p.rule };
      }
    }
    if (s.name && this.namePatterns.length) {
      const n = s.name.toLowerCase();
      for (const p of this.namePatterns) if (globMatch(p.glob, n)) return { kind: 'name', rule: p.rule };
    }
    return undefined;
  }

  private matchHost(host: string): BlockMatch | undefined {
    const family = isIP(host);
    if (family) {
      if (this.hostAddrRules > 0 && this.hostAddrs.check(host, family === 6 ? 'ipv6' : 'ipv4'))
        return { kind: 'host', rule: `host:${host}` };
      return undefined;
    }
    if (this.hosts.size === 0) return undefined;
    // The host itself, then each parent domain: a.b.example.com, b.example.com, example.com, com.
    let h = host;
    for (;;) {
      const rule = this.hosts.get(h);
      if (rule !== undefined) return { kind: 'host', rule };
      const dot = h.indexOf('.');
      if (dot < 0) return undefined;
      h = h.slice(dot + 1);
    }
  }
}

/**
 * The host a blocklist rule is matched against: a normalised URL's host, lower-case, without a trailing dot
 * or IPv6 brackets, an IPv4-mapped IPv6 address as plain IPv4.
 */
export function blocklistHost(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  let h = u.hostname.toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) return plainAddress(h.slice(1, -1));
  // "example.com." is the same host as "example.com"; without this a trailing dot would slip past.
  while (h.endsWith('.')) h = h.slice(0, -1);
  return h;
}

/** An address as given by the socket or a URL, with IPv4-mapped IPv6 (::ffff:1.2.3.4) as plain IPv4. */
export function plainAddress(addr: string): string {
  const a = addr.trim().toLowerCase();
  const m = /^(?:0{0,4}:){0,4}:?(?:0{0,4}:)?ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(a);
  if (m && isIP(m[1]) === 4) return m[1];
  return a;
}

function addAddressRule(list: BlockList, spec: string): boolean {
  const [addrRaw, bitsRaw, extra] = spec.split('/');
  if (extra !== undefined) return false;
  const addr = plainAddress(addrRaw);
  const family = isIP(addr);
  if (!family) return false;
  const type = family === 6 ? 'ipv6' : 'ipv4';
  if (bitsRaw === undefined) {
    list.addAddress(addr, type);
    return true;
  }
  if (!/^\d{1,3}$/.test(bitsRaw)) return false;
  const bits = Number(bitsRaw);
  if (bits > (family === 6 ? 128 : 32)) return false;
  list.addSubnet(addr, bits, type);
  return true;
}

function normaliseHostRule(raw: string): string | undefined {
  let h = raw.trim().toLowerCase();
  // Operators paste URLs and wildcards; take what they mean.
  if (/^[a-z][a-z0-9+.-]*:\/\//.test(h)) {
    const host = blocklistHost(h);
    if (host === undefined) return undefined;
    h = host;
  }
  if (h.startsWith('*.')) h = h.slice(2);
  if (h.startsWith('.')) h = h.slice(1);
  while (h.endsWith('.')) h = h.slice(0, -1);
  if (h === '' || /[\s/?#@*]/.test(h)) return undefined;
  const ascii = domainToASCII(h);
  return ascii === '' ? undefined : ascii;
}

/**
 * Parses a blocklist file. One rule per line; `#` starts a comment; blank lines are ignored.
 *   example.com  or  host:example.com   the host and every subdomain (a URL is read as its host)
 *   host:203.0.113.7  host:2001:db8::/32 weblog URLs whose host is that address or in that range
 *   url:*casino*                         a pattern matched against every normalised URL of the ping
 *   name:*cheap pills*                   a pattern matched against the weblog name
 *   client:198.51.100.0/24               pings sent from these addresses
 * Patterns are case-insensitive; `*` matches any run of characters and must cover the whole value.
 * Bad lines are reported and skipped so that one typo does not disable the rest of the list.
 */
export function parseBlocklist(text: string): { list: Blocklist; problems: BlocklistProblem[] } {
  const list = new Blocklist();
  const problems: BlocklistProblem[] = [];
  const lines = text.replace(/^\uFEFF/, '').split(/\r\n|\n|\r/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].replace(/(^|\s)#.*$/, '').trim();
    if (line === '') continue;
    if (list.size >= MAX_RULES) {
      problems.push({ line: i + 1, message: `more than ${MAX_RULES} rules; the rest of the file is ignored` });
      break;
    }
    const m = /^(host|url|name|client):(.*)$/i.exec(line);
    const kind = (m ? m[1].toLowerCase() : 'host') as RuleKind;
    const value = m ? m[2].trim() : line;
    const bad = (message: string) => problems.push({ line: i + 1, message: `${message}: ${JSON.stringify(line.slice(0, 200))}` });
    if (value === '') {
      bad('empty rule');
      continue;
    }
    switch (kind) {
      case 'client':
        if (addAddressRule(list.clients, value)) list.clientRules++;
        else bad('not an IP address or CIDR range');
        break;
      case 'host': {
        const bare = value.replace(/^\[|\](?=\/|$)/g, '');
        if (isIP(plainAddress(bare.split('/')[0]))) {
          if (addAddressRule(list.hostAddrs, bare)) list.hostAddrRules++;
          else bad('not an IP address or CIDR range');
          break;
        }
        const h = normaliseHostRule(value);
        if (h === undefined) bad('not a host name');
        else list.hosts.set(h, line);
        break;
      }
      case 'url':
      case 'name': {
        if (value.length > MAX_PATTERN_LENGTH) {
          bad(`pattern longer than ${MAX_PATTERN_LENGTH} characters`);
          break;
        }
        // Runs of stars mean the same as one and only cost time.
        const glob = value.toLowerCase().replace(/\*+/g, '*');
        (kind === 'url' ? list.urlPatterns : list.namePatterns).push({ rule: line, glob });
        break;
      }
    }
  }
  return { list, problems };
}

/**
 * Whole-string wildcard match (`*` = any run, possibly empty), in O(pattern × text) worst case and
 * usually linear: the classic greedy algorithm that backtracks only to the last star. A regular
 * expression built from operator input could backtrack exponentially; this cannot.
 */
export function globMatch(pattern: string, text: string): boolean {
  let p = 0;
  let t = 0;
  let star = -1;
  let mark = 0;
  while (t < text.length) {
    if (p < pattern.length && pattern[p] !== '*' && pattern[p] === text[t]) {
      p++;
      t++;
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      mark = t;
    } else if (star >= 0) {
      p = star + 1;
      t = ++mark;
    } else return false;
  }
  while (p < pattern.length && pattern[p] === '*') p++;
  return p === pattern.length;
}
