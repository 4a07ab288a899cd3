// Owns libpq's multi-host connection strings on node-postgres: parsing `postgres://u:p@h1:5432,h2:5433/db?
// target_session_attrs=read-write&connect_timeout=5` into one pg config per host, and the pg.Client that
// tries those hosts in order, bounds each attempt by connect_timeout and checks target_session_attrs on every
// new connection (libpq-connect, "Specifying Multiple Hosts" and "target_session_attrs", PostgreSQL 15).
//
// Why here and not elsewhere (docs/design/decisions.md): pg cannot parse the URL (`new URL()` throws on
// `h1:5432,h2:5433`) and has no target_session_attrs (brianc/node-postgres#1470, open since 2017; PR #3643 is
// unmerged); postgres.js ignores read-write when the first host is a standby (porsager/postgres#815);
// moving every repository to another client for one feature costs more than this file. pg.Pool takes the
// class through its own `Client` option; a single host without target_session_attrs or connect_timeout never
// reaches it (database.ts hands pg the URL as before).
import pg from 'pg';
import { parse as parseConnectionString } from 'pg-connection-string';

/** libpq's values (PostgreSQL 14+). `read-write` is what a failover setup gives; `any` is libpq's default. */
export const TARGET_SESSION_ATTRS = ['any', 'read-write', 'read-only', 'primary', 'standby', 'prefer-standby'] as const;
export type TargetSessionAttrs = (typeof TARGET_SESSION_ATTRS)[number];

export interface HostPort {
  /** A name, an IPv4 or IPv6 address (without brackets), or a Unix socket directory (starts with `/`). */
  host: string;
  port: number;
}

export interface MultiHostUrl {
  hosts: HostPort[];
  /** The database name as the URL gives it ('' when it leaves it out: the server's default, the user's name). */
  database: string;
  targetSessionAttrs: TargetSessionAttrs;
  /** connect_timeout in ms, for each host in turn (libpq: per host, at least 2 s); undefined: no bound of its own. */
  connectTimeoutMs: number | undefined;
  /** What pg reads from the rest of the URL (user, password, database, ssl…, other query options), without host and port. */
  base: pg.ClientConfig;
  /** One host, no session check and no connect_timeout: pg reads the URL itself, as before this module existed. */
  simple: boolean;
}

export class MultiHostUrlError extends Error {}

const DEFAULT_PORT = 5432;
/** Query options this module handles itself; every other one goes to pg's own parser. */
const OWN_OPTIONS = ['host', 'port', 'hostaddr', 'target_session_attrs', 'connect_timeout'];

function port(raw: string, where: string): number {
  if (!/^\d{1,5}$/.test(raw) || Number(raw) < 1 || Number(raw) > 65535)
    throw new MultiHostUrlError(`invalid port ${JSON.stringify(raw)} in ${where}`);
  return Number(raw);
}

function decode(s: string, what: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new MultiHostUrlError(`invalid percent-encoding in the ${what}`);
  }
}

/** One entry of the URL's host list: `h`, `h:5433`, `[::1]`, `[::1]:5433`, `%2Fvar%2Frun%2Fpostgresql`. */
function hostEntry(entry: string): { host: string; port?: number } {
  if (entry.startsWith('[')) {
    const close = entry.indexOf(']');
    if (close < 0) throw new MultiHostUrlError(`unterminated [ in host ${JSON.stringify(entry)}`);
    const rest = entry.slice(close + 1);
    if (rest !== '' && !rest.startsWith(':'))
      throw new MultiHostUrlError(`unexpected ${JSON.stringify(rest)} after ${entry.slice(0, close + 1)}`);
    return { host: entry.slice(1, close), port: rest.length > 1 ? port(rest.slice(1), 'the host list') : undefined };
  }
  const colon = entry.lastIndexOf(':');
  if (colon < 0) return { host: decode(entry, 'host list') };
  return {
    host: decode(entry.slice(0, colon), 'host list'),
    port: colon < entry.length - 1 ? port(entry.slice(colon + 1), 'the host list') : undefined,
  };
}

/**
 * Reads a libpq connection URI (`postgres://` or `postgresql://`) with one host or several. Hosts are tried
 * in the order given; a host without a port takes `?port=` when that names one port, else 5432; `?host=`
 * and `?port=` lists (comma-separated, libpq's query form) replace the ones before the path. Throws
 * MultiHostUrlError saying what is wrong.
 */
export function parseMultiHostUrl(url: string): MultiHostUrl {
  const m = /^(postgres(?:ql)?):\/\/([^/?#]*)((?:\/[^?#]*)?)(\?[^#]*)?(#.*)?$/i.exec(url.trim());
  if (!m) throw new MultiHostUrlError('not a postgres:// or postgresql:// URL');
  const [, scheme, authority, path, search = ''] = m;
  const at = authority.lastIndexOf('@');
  const userinfo = at >= 0 ? authority.slice(0, at + 1) : '';
  const hostList = at >= 0 ? authority.slice(at + 1) : authority;
  const query = new URLSearchParams(search.slice(1));

  let entries = hostList === '' ? [] : hostList.split(',').map(hostEntry);
  const qHost = query.get('host');
  if (qHost !== null) entries = qHost.split(',').map((h) => ({ host: h }));
  const qPort = query.get('port');
  const qPorts = qPort === null ? [] : qPort.split(',').map((p) => (p === '' ? undefined : port(p, '?port=')));
  if (entries.length === 0) entries = [{ host: '' }];
  if (qPorts.length > 1 && qPorts.length !== entries.length)
    throw new MultiHostUrlError(`?port= names ${qPorts.length} ports for ${entries.length} hosts (one port for all, or one per host)`);
  const hosts = entries.map((e, i) => {
    if (e.host === '' && entries.length > 1) throw new MultiHostUrlError('an empty host in the host list');
    return { host: e.host || 'localhost', port: (qPorts.length > 1 ? qPorts[i] : qPorts[0]) ?? e.port ?? DEFAULT_PORT };
  });

  const tsa = query.get('target_session_attrs') ?? 'any';
  if (!(TARGET_SESSION_ATTRS as readonly string[]).includes(tsa))
    throw new MultiHostUrlError(`target_session_attrs must be one of ${TARGET_SESSION_ATTRS.join(', ')}, got ${JSON.stringify(tsa)}`);
  const ct = query.get('connect_timeout');
  let connectTimeoutMs: number | undefined;
  if (ct !== null) {
    if (!/^-?\d+$/.test(ct.trim())) throw new MultiHostUrlError(`connect_timeout must be whole seconds, got ${JSON.stringify(ct)}`);
    const s = Number(ct);
    // libpq: zero or negative waits forever; 1 s is read as 2 s ("values less than 2 are treated as 2").
    connectTimeoutMs = s <= 0 ? undefined : Math.max(2, s) * 1000;
  }

  // Everything else is pg's to read, through its own parser, on the URL with a stand-in host.
  const rest = new URLSearchParams(query);
  for (const k of OWN_OPTIONS) rest.delete(k);
  const restSearch = rest.toString();
  const base = parseConnectionString(`${scheme}://${userinfo}localhost${path}${restSearch ? `?${restSearch}` : ''}`) as pg.ClientConfig &
    Record<string, unknown>;
  delete base.host;
  delete base.port;
  if (base.user === '') delete base.user;
  if (base.password === '') delete base.password;

  return {
    hosts,
    database: decode(path.replace(/^\//, ''), 'database name'),
    targetSessionAttrs: tsa as TargetSessionAttrs,
    connectTimeoutMs,
    base,
    simple: hosts.length === 1 && tsa === 'any' && connectTimeoutMs === undefined && ct === null,
  };
}

/** `h1:5432,[::1]:5433` (no user, password or options). */
export function describeHosts(hosts: readonly HostPort[]): string {
  return hosts.map((h) => `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`).join(',');
}

/**
 * The pool's memory of where the database is: the host the next new connection tries first (the last one
 * that passed), wrapping round the list. libpq starts at the first host on every connection; a pool that
 * did so would pay a dead first host's connect_timeout on every new connection for as long as it is dead.
 */
export class HostRing {
  /** Index of the host tried first. */
  first = 0;
  constructor(
    readonly url: MultiHostUrl,
    /** Told when a connection passed on another host than the last one (a failover, seen from here). */
    private readonly onMove?: (from: HostPort, to: HostPort) => void,
  ) {}

  passed(i: number): void {
    if (i === this.first) return;
    const from = this.url.hosts[this.first];
    this.first = i;
    this.onMove?.(from, this.url.hosts[i]);
  }
}

type Want = Exclude<TargetSessionAttrs, 'prefer-standby'>;

/**
 * Whether a new session is what `want` asks for: undefined if so, else why not. Servers from 14 on report
 * in_hot_standby and default_transaction_read_only at start-up (ParameterStatus): no round trip then; older
 * ones are asked, as libpq does (`SHOW transaction_read_only`, `SELECT pg_is_in_recovery()`).
 */
export async function sessionMismatch(client: pg.Client, reported: ReadonlyMap<string, string>, want: Want): Promise<string | undefined> {
  if (want === 'any') return undefined;
  if (want === 'read-write' || want === 'read-only') {
    let readOnly: boolean;
    const dtro = reported.get('default_transaction_read_only');
    const hot = reported.get('in_hot_standby');
    if (dtro !== undefined && hot !== undefined) readOnly = dtro === 'on' || hot === 'on';
    else
      readOnly =
        (await client.query<{ transaction_read_only: string }>('SHOW transaction_read_only')).rows[0].transaction_read_only === 'on';
    if (want === 'read-write') return readOnly ? 'the session is read-only (a standby, or default_transaction_read_only)' : undefined;
    return readOnly ? undefined : 'the session is read-write';
  }
  const hot = reported.get('in_hot_standby');
  const standby =
    hot !== undefined ? hot === 'on' : (await client.query<{ r: boolean }>('SELECT pg_catalog.pg_is_in_recovery() AS r')).rows[0].r;
  if (want === 'primary') return standby ? 'the server is a standby (in recovery)' : undefined;
  return standby ? undefined : 'the server is not a standby';
}

/** pg.Client's fields that are EventEmitter's: kept when a client is reset for the next host. */
const EMITTER_FIELDS = new Set(['_events', '_eventsCount', '_maxListeners']);

/**
 * A pg.Client class for pg.Pool's `Client` option (and for a LISTEN connection) that connects to the first
 * host of `ring` that accepts a connection within connect_timeout and passes target_session_attrs, closing
 * each connection that does not.
 *
 * pg.Client is single-use (a second connect() throws), so a failed attempt resets this client to the state
 * of a new one for the next host: it detaches and ends the attempt's connection, then copies the own fields
 * of a fresh pg.Client built for that host (listeners added to this client stay). Pinned by
 * test/platform/db/multi-host.test.ts against the pg version in package-lock.json.
 */
export function multiHostClient(ring: HostRing): typeof pg.Client {
  const { url } = ring;
  const configFor = (config: pg.ClientConfig | undefined, i: number): pg.ClientConfig => {
    // The URL's options win over the caller's, as they do when pg reads a connectionString itself.
    const { connectionString: _ignored, ...rest } = { ...(config ?? {}), ...url.base };
    return {
      ...rest,
      host: url.hosts[i].host,
      port: url.hosts[i].port,
      ...(url.connectTimeoutMs !== undefined ? { connectionTimeoutMillis: url.connectTimeoutMs } : {}),
    };
  };

  return class MultiHostClient extends pg.Client {
    readonly #config: pg.ClientConfig | undefined;
    /** The ParameterStatus values the server reported on the current attempt's connection. */
    #reported = new Map<string, string>();

    constructor(config?: pg.ClientConfig) {
      super(configFor(config, ring.first));
      this.#config = config;
    }

    override connect(): Promise<pg.Client>;
    override connect(callback: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): void;
    override connect(callback?: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): Promise<pg.Client> | void {
      const p = this.#connectAny().then(() => this);
      if (!callback) return p;
      p.then(
        (c) => (callback as (err: Error | null, c?: pg.Client) => void)(null, c),
        (err: Error) => (callback as (err: Error) => void)(err),
      );
    }

    async #connectAny(): Promise<void> {
      const n = url.hosts.length;
      const passes: Want[] = url.targetSessionAttrs === 'prefer-standby' ? ['standby', 'any'] : [url.targetSessionAttrs];
      const why: string[] = [];
      let attempt = 0;
      for (const want of passes) {
        const start = ring.first;
        for (let k = 0; k < n; k++) {
          const i = (start + k) % n;
          if (attempt++ > 0) this.#resetFor(i);
          const where = describeHosts([url.hosts[i]]);
          try {
            await this.#connectOnce();
            const mismatch = await sessionMismatch(this, this.#reported, want);
            if (mismatch === undefined) {
              ring.passed(i);
              return;
            }
            why.push(`${where}: ${mismatch}`);
          } catch (err) {
            why.push(`${where}: ${(err as Error).message}`);
          }
        }
      }
      this.#detach();
      const kind = url.targetSessionAttrs === 'any' ? '' : `${url.targetSessionAttrs} `;
      throw new Error(`no host of ${describeHosts(url.hosts)} gave a ${kind}session: ${why.join('; ')}`);
    }

    #connectOnce(): Promise<void> {
      this.#reported = new Map();
      const reported = this.#reported;
      this.connection.on('parameterStatus', (m: { parameterName: string; parameterValue: string }) => {
        reported.set(m.parameterName, m.parameterValue);
      });
      return new Promise((resolve, reject) => super.connect((err: Error | null) => (err ? reject(err) : resolve())));
    }

    /** Ends the current attempt's connection without letting its events reach this client. */
    #detach(): void {
      type Internals = { connection: pg.Connection & { stream?: { destroy(): void } }; connectionTimeoutHandle?: NodeJS.Timeout };
      const self = this as unknown as Internals;
      clearTimeout(self.connectionTimeoutHandle);
      const con = self.connection;
      con.removeAllListeners();
      con.on('error', () => {});
      try {
        con.end();
      } catch {
        con.stream?.destroy();
      }
    }

    #resetFor(i: number): void {
      this.#detach();
      const fresh = new pg.Client(configFor(this.#config, i)) as unknown as Record<string, unknown>;
      const self = this as unknown as Record<string, unknown>;
      for (const key of Object.keys(fresh)) if (!EMITTER_FIELDS.has(key)) self[key] = fresh[key];
      self.password = fresh.password; // not enumerable in pg (kept out of logs)
    }
  };
}
