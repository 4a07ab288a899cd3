// Owns reading IP addresses and CIDR ranges: address literals to bytes, range membership, IPv6 /64 keys.
// ipaddr.js does the parsing; it replaces the hand-written IPv6 expansion that used to live in
// fetch/address-policy.ts and intake/abuse/rate-limit.ts. node:net's isIP decides first what counts as an
// address, because ipaddr.js on its own also accepts IPv4 shorthand (1.2.3, 0x7f.1, octal 010.0.0.1).
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { beforeChar } from '../text/trim.js';

export interface IpAddress {
  family: 4 | 6;
  /** 4 or 16 bytes, network order. */
  bytes: Uint8Array;
}

export interface CidrRange {
  family: 4 | 6;
  bytes: Uint8Array;
  prefix: number;
  /** As written, for messages. */
  text: string;
}

/**
 * The eight 16-bit groups of an address that isIP() already accepted as IPv6 (no brackets, no zone).
 * ipaddr.js reads "::a.b.c.d" as the IPv4-mapped ::ffff:a.b.c.d; it is the IPv4-compatible ::a.b.c.d, so a
 * zero group is spelled out to keep it that.
 */
function v6Parts(s: string): number[] {
  return ipaddr.IPv6.parse(/^::[\d.]+$/.test(s) ? `::0:${s.slice(2)}` : s).parts;
}

/** Parses a literal IPv4 or IPv6 address (brackets and a zone id are tolerated); null if it is not one. */
export function parseIp(input: string): IpAddress | null {
  let s = input.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const family = isIP(s);
  if (family === 4) return { family: 4, bytes: Uint8Array.from(ipaddr.IPv4.parse(s).octets) };
  if (family !== 6) return null;
  const bytes = new Uint8Array(16);
  v6Parts(s).forEach((g, i) => {
    bytes[i * 2] = g >> 8;
    bytes[i * 2 + 1] = g & 0xff;
  });
  return { family: 6, bytes };
}

/** Parses "a.b.c.d", "a.b.c.d/n", "x::y" or "x::y/n"; throws on anything else. */
export function parseCidr(text: string): CidrRange {
  const t = text.trim();
  const slash = t.indexOf('/');
  const ip = parseIp(slash >= 0 ? t.slice(0, slash) : t);
  if (!ip) throw new Error(`${JSON.stringify(text)} is not an IP address or CIDR range`);
  const max = ip.family === 4 ? 32 : 128;
  let prefix = max;
  if (slash >= 0) {
    const p = t.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p) || Number(p) > max) throw new Error(`${JSON.stringify(text)} has an invalid prefix length`);
    prefix = Number(p);
  }
  return { family: ip.family, bytes: ip.bytes, prefix, text: t };
}

/** Parses a comma- or space-separated list of addresses and CIDR ranges (FETCH_ALLOW_ADDRESSES). */
export function parseCidrList(text: string): CidrRange[] {
  return text
    .split(/[\s,]+/)
    .filter((x) => x !== '')
    .map(parseCidr);
}

/**
 * Whether an address lies in a range (same family, first `prefix` bits equal). Compared on the bytes
 * rather than with ipaddr.js's match(), which would need an address object per call on the guard's path.
 */
export function inRange(ip: IpAddress, r: CidrRange): boolean {
  if (ip.family !== r.family) return false;
  const full = r.prefix >> 3;
  for (let i = 0; i < full; i++) if (ip.bytes[i] !== r.bytes[i]) return false;
  const bits = r.prefix & 7;
  if (bits === 0) return true;
  const mask = (0xff << (8 - bits)) & 0xff;
  return (ip.bytes[full] & mask) === (r.bytes[full] & mask);
}

/** The eight 16-bit groups of an IPv6 address (a zone id is dropped) as lower-case hex without leading zeros, or undefined if it is not one. */
export function expandIPv6(addr: string): string[] | undefined {
  const a = beforeChar(addr, '%');
  return isIP(a) === 6 ? v6Parts(a).map((g) => g.toString(16)) : undefined;
}

/**
 * The key a client address is counted under: IPv6 by its /64, written "2001:db8:0:2::/64" (the first four
 * groups, no leading zeros, never compressed); anything else (IPv4, not an address) as is.
 */
export function slash64Key(addr: string): string {
  const g = expandIPv6(addr);
  return g ? `${g.slice(0, 4).join(':')}::/64` : addr;
}

/** Longer text is never an address (the longest IPv6 text with an embedded IPv4 is 45 characters). */
const ADDRESS_TEXT_MAX = 64;

/**
 * A client address as it reached us (the socket's, or taken from X-Forwarded-For) in one canonical form:
 * IPv4 dotted, IPv6 compressed lower case, an IPv4-mapped IPv6 address as its IPv4 one; null when the text
 * is not an IP address. Whatever a client puts in a header, what is counted and stored is this or nothing.
 */
export function canonicalAddress(text: string | null | undefined): string | null {
  if (!text || text.length > ADDRESS_TEXT_MAX) return null;
  // Most clients arrive over IPv4, already canonical: answered without ipaddr.js (its parse, then
  // toString, ran twice per ping: 9 µs, bench/results/evidence/2026-11-23-wrk.md).
  if (isCanonicalIPv4(text)) return text;
  let s = text.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  s = beforeChar(s, '%');
  if (!isIP(s)) return null;
  return ipaddr.process(s).toString();
}

/**
 * Whether `s` is an IPv4 address in canonical dotted-decimal form: four decimal octets 0-255 without
 * leading zeros (what ipaddr.js's toString() writes, so canonicalAddress may return it as is).
 */
export function isCanonicalIPv4(s: string): boolean {
  const n = s.length;
  if (n < 7 || n > 15) return false;
  let octets = 0;
  let value = 0;
  let digits = 0;
  for (let i = 0; i <= n; i++) {
    const c = i < n ? s.charCodeAt(i) : 46; // a '.' after the end closes the last octet
    if (c === 46) {
      if (digits === 0 || value > 255) return false;
      octets++;
      value = 0;
      digits = 0;
    } else if (c >= 48 && c <= 57) {
      // A leading zero is octal or ambiguous spelling elsewhere: not canonical (only "0" itself is).
      if (digits === 1 && value === 0) return false;
      value = value * 10 + (c - 48);
      digits++;
      if (digits > 3) return false;
    } else {
      return false;
    }
  }
  return octets === 4;
}
