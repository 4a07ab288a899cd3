// Owns which targets the relay sends to and how: RELAY_TARGETS plus the per-target options of RELAY_FILE
// (YAML or JSON), each URL checked, duplicates merged, and pingd's own endpoints (PUBLIC_URL) left out so
// that it never relays to itself.
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from '../../platform/config.js';
import { trimEndChar } from '../../platform/text/trim.js';

export interface RelayTarget {
  url: string;
  /** extendedPing (when the ping had a feed; the default) or always ping. */
  method: 'extendedPing' | 'ping';
  ratePerMin: number;
  /** Requests to this target in flight at once in one instance. */
  concurrency: number;
}

export const DEFAULT_TARGET_CONCURRENCY = 2;

/** A URL as compared for sameness: lower-case origin, default port dropped, path without trailing slashes. */
export function normalTarget(raw: string): string {
  const u = new URL(raw);
  return `${u.origin}${trimEndChar(u.pathname, '/')}${u.search}`.toLowerCase();
}

/** Whether `target` is one of pingd's own XML-RPC endpoints under PUBLIC_URL (/, /RPC2, /rpc2). */
export function isSelf(target: string, publicUrl: string | undefined): boolean {
  if (!publicUrl) return false;
  const t = normalTarget(target);
  const base = normalTarget(publicUrl);
  return t === base || t === `${base}/rpc2`;
}

function httpUrl(v: unknown, where: string): string {
  if (typeof v !== 'string' || !/^https?:\/\/\S+$/.test(v.trim()) || !URL.canParse(v.trim()))
    throw new ConfigError(`${where} must be an http(s) URL, got ${JSON.stringify(v)}`);
  return v.trim();
}

function positive(v: unknown, where: string, max: number): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max)
    throw new ConfigError(`${where} must be a whole number between 1 and ${max}, got ${JSON.stringify(v)}`);
  return v;
}

/** The targets of a RELAY_FILE's text: `targets: [{url, method, rate_per_min, concurrency, enabled}]` (or the list alone). */
export function parseTargetFile(
  text: string,
  file: string,
  defaults: { ratePerMin: number },
): { targets: RelayTarget[]; disabled: string[] } {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ConfigError(`RELAY_FILE ${file}: ${(err as Error).message.split('\n')[0]}`);
  }
  const list = Array.isArray(doc)
    ? doc
    : doc && typeof doc === 'object' && Object.hasOwn(doc, 'targets')
      ? (doc as { targets: unknown }).targets
      : undefined;
  if (!Array.isArray(list)) throw new ConfigError(`RELAY_FILE ${file}: expected a list of targets (or \`targets:\` with one)`);
  const targets: RelayTarget[] = [];
  const disabled: string[] = [];
  list.forEach((item: unknown, i) => {
    const where = `RELAY_FILE ${file}, target ${i + 1}`;
    const e = (typeof item === 'string' ? { url: item } : item) as Record<string, unknown> | null;
    if (!e || typeof e !== 'object') throw new ConfigError(`${where}: expected a URL or a mapping with url`);
    const own = (k: string) => (Object.hasOwn(e, k) ? e[k] : undefined);
    const url = httpUrl(own('url'), `${where}: url`);
    const method = own('method') ?? 'extendedPing';
    if (method !== 'extendedPing' && method !== 'ping')
      throw new ConfigError(`${where}: method must be extendedPing or ping, got ${JSON.stringify(method)}`);
    const enabled = own('enabled') ?? true;
    if (typeof enabled !== 'boolean') throw new ConfigError(`${where}: enabled must be true or false`);
    if (!enabled) return void disabled.push(url);
    targets.push({
      url,
      method,
      ratePerMin: positive(own('rate_per_min'), `${where}: rate_per_min`, 600_000) ?? defaults.ratePerMin,
      concurrency: positive(own('concurrency'), `${where}: concurrency`, 64) ?? DEFAULT_TARGET_CONCURRENCY,
    });
  });
  return { targets, disabled };
}

export interface TargetConfig {
  RELAY_TARGETS: readonly string[];
  RELAY_FILE: string | undefined;
  RELAY_RATE_PER_MIN: number;
  PUBLIC_URL: string | undefined;
}

/**
 * The targets to relay to: RELAY_TARGETS with the default options, then RELAY_FILE's entries (which win
 * for a URL listed in both; `enabled: false` removes one). `self` lists those left out as pingd's own.
 */
export function loadTargets(
  c: TargetConfig,
  read: (file: string) => string = (f) => readFileSync(f, 'utf8'),
): { targets: RelayTarget[]; self: string[] } {
  const byKey = new Map<string, RelayTarget>();
  for (const url of c.RELAY_TARGETS)
    byKey.set(normalTarget(url), {
      url,
      method: 'extendedPing',
      ratePerMin: c.RELAY_RATE_PER_MIN,
      concurrency: DEFAULT_TARGET_CONCURRENCY,
    });
  if (c.RELAY_FILE) {
    let text: string;
    try {
      text = read(c.RELAY_FILE);
    } catch (err) {
      throw new ConfigError(`RELAY_FILE ${c.RELAY_FILE} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    const f = parseTargetFile(text, c.RELAY_FILE, { ratePerMin: c.RELAY_RATE_PER_MIN });
    for (const t of f.targets) byKey.set(normalTarget(t.url), t);
    for (const url of f.disabled) byKey.delete(normalTarget(url));
  }
  const targets: RelayTarget[] = [];
  const self: string[] = [];
  for (const t of byKey.values()) {
    if (isSelf(t.url, c.PUBLIC_URL)) self.push(t.url);
    else targets.push(t);
  }
  return { targets, self };
}
