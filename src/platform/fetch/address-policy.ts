// Owns the decision "may pingd open a connection to this IP address?": the special-purpose IPv4 and IPv6
// ranges (loopback, private, link-local, CGNAT, multicast, unspecified, cloud metadata, reserved) that an
// outbound request must never reach, including IPv4 addresses embedded in IPv6 (mapped, NAT64, 6to4).
// Pure functions over address strings, so the guard can be tested without a network.
import { inRange, parseCidr, parseIp, type CidrRange, type IpAddress } from '../net/ip.js';

/** Which addresses outbound requests may reach. */
export interface AddressPolicy {
  /** Every address is allowed (FETCH_ALLOW_PRIVATE=true; tests only). */
  allowPrivate: boolean;
  /** Addresses allowed even though they fall in a blocked range (FETCH_ALLOW_ADDRESSES). */
  allow: readonly CidrRange[];
}

export const DEFAULT_POLICY: AddressPolicy = Object.freeze({ allowPrivate: false, allow: Object.freeze([]) as readonly CidrRange[] });

export type AddressDecision = { allowed: true } | { allowed: false; range: string };

interface SpecialRange extends CidrRange {
  label: string;
  /** Where an IPv4 address is embedded in this IPv6 range (byte offset); it is judged by its own ranges. */
  embedsV4At?: number;
}

function special(text: string, label: string, embedsV4At?: number): SpecialRange {
  return { ...parseCidr(text), label, embedsV4At };
}

// Order matters: the first match names the range (metadata addresses before the ranges holding them).
// Sources: RFC 6890 and the IANA special-purpose registries; cloud metadata endpoints of AWS, GCP, Azure,
// Alibaba, Oracle and OpenStack.
const V4_RANGES: SpecialRange[] = [
  special('169.254.169.254/32', 'cloud metadata'),
  special('169.254.170.2/32', 'cloud metadata'),
  special('100.100.100.200/32', 'cloud metadata'),
  special('168.63.129.16/32', 'cloud metadata'),
  special('0.0.0.0/8', 'unspecified'),
  special('10.0.0.0/8', 'private'),
  special('100.64.0.0/10', 'carrier-grade NAT'),
  special('127.0.0.0/8', 'loopback'),
  special('169.254.0.0/16', 'link-local'),
  special('172.16.0.0/12', 'private'),
  special('192.0.0.0/24', 'reserved'),
  special('192.0.2.0/24', 'documentation'),
  special('192.88.99.0/24', 'reserved'),
  special('192.168.0.0/16', 'private'),
  special('198.18.0.0/15', 'reserved'),
  special('198.51.100.0/24', 'documentation'),
  special('203.0.113.0/24', 'documentation'),
  special('224.0.0.0/4', 'multicast'),
  special('255.255.255.255/32', 'broadcast'),
  special('240.0.0.0/4', 'reserved'),
];

const V6_RANGES: SpecialRange[] = [
  special('::/128', 'unspecified'),
  special('::1/128', 'loopback'),
  special('::ffff:0:0/96', 'IPv4-mapped', 12),
  special('::ffff:0:0:0/96', 'IPv4-translated', 12),
  special('::/96', 'IPv4-compatible (deprecated)'),
  special('64:ff9b::/96', 'NAT64', 12),
  special('64:ff9b:1::/48', 'reserved'),
  special('100::/64', 'reserved'),
  special('2001::/23', 'reserved'),
  special('2001:db8::/32', 'documentation'),
  special('2002::/16', '6to4', 2),
  special('3fff::/20', 'documentation'),
  special('5f00::/16', 'reserved'),
  special('fd00:ec2::254/128', 'cloud metadata'),
  special('fc00::/7', 'unique local'),
  special('fe80::/10', 'link-local'),
  special('fec0::/10', 'site-local'),
  special('ff00::/8', 'multicast'),
];

/**
 * The special-purpose range an address belongs to, or null for an ordinary public address. An IPv4
 * address embedded in IPv6 (::ffff:127.0.0.1, 64:ff9b::10.0.0.1, 2002:0a00:0001::) is judged by its IPv4
 * ranges, since that is where a connection to it ends up.
 */
export function classifyAddress(input: string | IpAddress): string | null {
  const ip = typeof input === 'string' ? parseIp(input) : input;
  if (!ip) return 'not an IP address';
  if (ip.family === 4) return V4_RANGES.find((r) => inRange(ip, r))?.label ?? null;
  const r = V6_RANGES.find((x) => inRange(ip, x));
  if (!r) return null;
  if (r.embedsV4At === undefined) return r.label;
  const inner = classifyAddress({ family: 4, bytes: ip.bytes.slice(r.embedsV4At, r.embedsV4At + 4) });
  return inner === null ? null : `${r.label} ${inner}`;
}

/** The embedded IPv4 address of an IPv4-mapped/translated/NAT64/6to4 IPv6 address, if any. */
function embeddedV4(ip: IpAddress): IpAddress | null {
  if (ip.family !== 6) return null;
  const r = V6_RANGES.find((x) => x.embedsV4At !== undefined && inRange(ip, x));
  return r ? { family: 4, bytes: ip.bytes.slice(r.embedsV4At!, r.embedsV4At! + 4) } : null;
}

/** The guard's decision for one resolved address under a policy. */
export function checkAddress(address: string, policy: AddressPolicy = DEFAULT_POLICY): AddressDecision {
  const ip = parseIp(address);
  if (!ip) return { allowed: false, range: 'not an IP address' };
  if (policy.allowPrivate) return { allowed: true };
  const range = classifyAddress(ip);
  if (range === null) return { allowed: true };
  const v4 = embeddedV4(ip);
  if (policy.allow.some((a) => inRange(ip, a) || (v4 !== null && inRange(v4, a)))) return { allowed: true };
  return { allowed: false, range };
}

/**
 * Checks every address a host name resolved to: one forbidden address refuses the whole host, so that a
 * name with a public and a private record cannot be used to reach the private one.
 */
export function checkAddresses(
  addresses: readonly string[],
  policy: AddressPolicy = DEFAULT_POLICY,
): { allowed: true } | { allowed: false; address: string; range: string } {
  if (addresses.length === 0) return { allowed: false, address: '', range: 'no address' };
  for (const a of addresses) {
    const d = checkAddress(a, policy);
    if (!d.allowed) return { allowed: false, address: a, range: d.range };
  }
  return { allowed: true };
}
