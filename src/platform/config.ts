// Owns the process configuration: one table of environment variables, read once, validated, frozen.
// A bad value fails fast with the variable's name so an operator sees exactly what to fix.

import { parseCidrList, type CidrRange } from './net/ip.js';
import cron from 'node-cron';
import { PingdError } from './errors.js';
import { redactUrl } from './redact.js';
import { MultiHostUrlError, parseMultiHostUrl } from './db/multi-host.js';
import { trimEndChar } from './text/trim.js';

export class ConfigError extends PingdError<'CONFIG_INVALID'> {
  constructor(message: string) {
    super('CONFIG_INVALID', message);
  }
}

type Parser<T> = (raw: string, name: string) => T;

const int =
  (min: number, max: number): Parser<number> =>
  (raw, name) => {
    if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be an integer, got ${JSON.stringify(raw)}`);
    const n = Number(raw.trim());
    if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
    return n;
  };

const bool: Parser<boolean> = (raw, name) => {
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
  throw new ConfigError(`${name} must be true or false, got ${JSON.stringify(raw)}`);
};

const str: Parser<string> = (raw) => raw;

const fraction: Parser<number> = (raw, name) => {
  const n = Number(raw.trim());
  if (raw.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1)
    throw new ConfigError(`${name} must be a number from 0 to 1, got ${JSON.stringify(raw)}`);
  return n;
};

const optionalStr: Parser<string | undefined> = (raw) => (raw.trim() === '' ? undefined : raw.trim());

const optionalInt =
  (min: number, max: number): Parser<number | undefined> =>
  (raw, name) =>
    raw.trim() === '' ? undefined : int(min, max)(raw, name);

const oneOf =
  <T extends string>(...values: T[]): Parser<T> =>
  (raw, name) => {
    const v = raw.trim().toLowerCase() as T;
    if (!values.includes(v)) throw new ConfigError(`${name} must be one of ${values.join(', ')}, got ${JSON.stringify(raw)}`);
    return v;
  };

const postgresUrl: Parser<string | undefined> = (raw, name) => {
  const v = raw.trim();
  if (v === '') return undefined;
  const scheme = /^([a-z][\w+.-]*):/i.exec(v)?.[1];
  if (scheme && !/^postgres(ql)?$/i.test(scheme))
    throw new ConfigError(`${name} must be a postgres:// URL, got scheme ${scheme.toLowerCase()}:`);
  // libpq's form, several hosts included (h1:5432,h2:5433, target_session_attrs, connect_timeout): new URL()
  // cannot read a host list.
  try {
    parseMultiHostUrl(v);
  } catch (err) {
    const why = err instanceof MultiHostUrlError && !/^not a postgres/.test(err.message) ? ` (${err.message})` : '';
    throw new ConfigError(`${name} must be a postgres:// URL${why}`);
  }
  return v;
};

const cronExpr: Parser<string> = (raw, name) => {
  const fields = raw.trim().split(/\s+/);
  if (fields.length < 5 || fields.length > 6)
    throw new ConfigError(`${name} must be a cron expression of 5 or 6 fields, got ${JSON.stringify(raw)}`);
  // Field values too (minute 61, day 0…): otherwise the first schedule() fails at start without the name.
  if (!cron.validate(raw.trim())) throw new ConfigError(`${name} is not a valid cron expression: ${JSON.stringify(raw)}`);
  return raw.trim();
};

// FETCH_ALLOW_ADDRESSES: addresses/CIDR ranges the outbound client may reach despite the private-range guard.
const cidrList: Parser<readonly CidrRange[]> = (raw, name) => {
  try {
    return Object.freeze(parseCidrList(raw));
  } catch (err) {
    throw new ConfigError(`${name}: ${(err as Error).message}`);
  }
};

/**
 * TRUST_PROXY: which hops of X-Forwarded-For to believe. Trusting every hop makes the client address the
 * leftmost entry, which the client writes itself even behind a proxy that appends (nginx
 * `$proxy_add_x_forwarded_for`, most load balancers). So: false; a number of proxy hops in front of pingd
 * (`true` is one: the nearest proxy, which appends the address it saw); or the proxies' addresses/CIDR
 * ranges (and proxy-addr's names loopback, linklocal, uniquelocal).
 */
export type TrustProxy = false | number | readonly string[];
const TRUST_NAMES = ['loopback', 'linklocal', 'uniquelocal'];
const trustProxy: Parser<TrustProxy> = (raw, name) => {
  const v = raw.trim().toLowerCase();
  if (['', '0', 'false', 'no', 'off'].includes(v)) return false;
  if (['1', 'true', 'yes', 'on'].includes(v)) return 1;
  if (/^\d+$/.test(v)) return int(1, 10)(v, name);
  const entries = v.split(/[\s,]+/).filter((x) => x !== '');
  for (const e of entries) {
    if (TRUST_NAMES.includes(e)) continue;
    try {
      parseCidrList(e);
    } catch {
      throw new ConfigError(
        `${name} must be false, a number of proxy hops (1-10), or proxy addresses/CIDR ranges; ${JSON.stringify(e)} is none of these`,
      );
    }
  }
  return Object.freeze(entries);
};

// RSSPING_SECRET (the key publisher passwords are encrypted with) and ADMIN_TOKEN (the operator API's
// bearer token): long enough to be a real key, not a word someone could guess.
const secret =
  (min: number): Parser<string | undefined> =>
  (raw, name) => {
    const v = raw.trim();
    if (v === '') return undefined;
    if (v.length < min)
      throw new ConfigError(`${name} must be at least ${min} characters (e.g. \`openssl rand -hex 32\`), got ${v.length}`);
    return v;
  };

const optionalHttpUrl: Parser<string | undefined> = (raw, name) => {
  const v = raw.trim();
  if (v === '') return undefined;
  if (!/^https?:\/\/[^\s]+$/.test(v) || !URL.canParse(v))
    throw new ConfigError(`${name} must be an http(s) URL, got ${JSON.stringify(raw)}`);
  return v;
};

// RELAY_TARGETS: http(s) URLs separated by commas or white space.
const urlList: Parser<readonly string[]> = (raw, name) => {
  const list = raw.split(/[\s,]+/).filter((x) => x !== '');
  for (const u of list) optionalHttpUrl(u, name);
  return Object.freeze(list);
};

// PUBLIC_URL: the origin (and optional path prefix) the service is reached at; kept without a trailing slash
// so `${PUBLIC_URL}/changes.xml` is the document's absolute URL.
const publicUrl: Parser<string | undefined> = (raw, name) => {
  const v = optionalHttpUrl(raw, name);
  if (v === undefined) return undefined;
  const u = new URL(v);
  if (u.search || u.hash || u.username || u.password)
    throw new ConfigError(
      `${name} must be a plain origin with an optional path (no query, fragment or credentials), got ${JSON.stringify(raw)}`,
    );
  return `${u.origin}${trimEndChar(u.pathname, '/')}`;
};

/**
 * The table: every variable the service reads, its default (as the raw string) and validator. `secret`
 * marks a value that must never be printed whole (logs, the operator API, metrics labels): tokens are
 * masked, URLs keep their scheme, host and path with user, password and secret-looking query parameters
 * masked (redactedConfig below).
 */
const SPEC = {
  PORT: { default: '8080', parse: int(0, 65535), doc: 'TCP port to listen on' },
  HOST: { default: '0.0.0.0', parse: str, doc: 'Address to bind' },
  DATABASE_URL: {
    default: '',
    parse: postgresUrl,
    doc: "PostgreSQL URL, libpq's form: several hosts (`postgres://u:p@h1:5432,h2:5432/db?target_session_attrs=read-write&connect_timeout=5`) are tried in order, see docs/guides/high-availability.md; unset = embedded PGlite under DATA_DIR",
    secret: true,
  },
  DATA_DIR: { default: './data', parse: str, doc: 'Embedded database directory (only without DATABASE_URL)' },
  EMBEDDED_CACHE_MB: {
    default: '16',
    parse: int(1, 4096),
    doc: 'MiB of pages the embedded database caches itself (its shared_buffers; PGlite zeroes all of it at start, so every MiB is resident); the OS page cache still holds its files',
  },
  DISK_MIN_FREE_MB: {
    default: '64',
    parse: int(0, 1_048_576),
    doc: "Free space (MiB) the embedded database keeps on DATA_DIR's filesystem, checked every second: below it pings are refused (503, XML-RPC fault: the server's disk is full), /readyz answers 503 \"disk full\", the database only reads, and all comes back by itself once space is freed. A write that fails for lack of space all the same stops the database's thread (every statement refused at once) until at least max(this, 16) MiB are free, then the database is opened again without a restart; 0 = only that",
  },
  HEAP_GROWTH_PERCENT: {
    default: '',
    parse: optionalInt(0, 1000),
    doc: "How far the server's JavaScript heap may grow past what was live at its last full collection before the next, in percent; unset = 20 with the embedded database, V8's own (a multiple) with DATABASE_URL; 0 = V8's own",
  },
  LOG_LEVEL: { default: 'info', parse: oneOf('fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'), doc: 'pino log level' },
  LOG_BUFFER_BYTES: {
    default: '4194304',
    parse: int(65536, 256 * 1024 * 1024),
    doc: "Log lines `pingd serve` holds while stdout's reader is behind; lines beyond are dropped and counted (pingd_log_lines_dropped_total)",
  },
  PING_MIN_INTERVAL: {
    default: '300',
    parse: int(0, 86400 * 7),
    doc: 'Seconds between accepted pings of one weblog; 0 disables the throttle',
  },
  TRUST_PROXY: {
    default: 'false',
    parse: trustProxy,
    doc: 'Proxies in front of pingd whose X-Forwarded-For is believed: false, a hop count (true = 1), or their addresses/CIDR ranges',
  },
  DB_POOL_MAX: { default: '8', parse: int(1, 100), doc: 'Connections in the PostgreSQL pool (the embedded database always has one)' },
  DB_TIMEOUT_MS: { default: '5000', parse: int(100, 600000), doc: 'Longest a ping waits for the database before it is refused' },
  BATCH_MAX: { default: '1000', parse: int(1, 10000), doc: 'Most pings committed in one group commit' },
  BODY_LIMIT: { default: '65536', parse: int(1024, 10 * 1024 * 1024), doc: 'Largest request body accepted, in bytes' },
  RENDER_CRON: {
    default: '*/10 * * * * *',
    parse: cronExpr,
    doc: 'When changes.xml, shortChanges.xml and the current hour are rendered (6 fields = with seconds)',
  },
  // About what a whole render of the 20,000 weblogs from which changes.xml is paced costs, so a tick's share
  // of it is no dearer in a big hour than in a small one. Measured (bench/render-tick.ts, PostgreSQL, 200
  // new weblogs/s, 2026-11-29): 20,000 kept weblogs took 204 ms; 100,000, 3-4 slices of 100 ms.
  RENDER_SLICE_MS: {
    default: '200',
    parse: int(0, 60000),
    doc: 'Longest changes.xml renders in one tick once its hour holds 20,000 weblogs or more; a bigger hour is spread over ticks and published when done (0: one page of 2,000 a tick)',
  },
  PUBLISH_DIR: { default: '', parse: optionalStr, doc: 'Also write rendered documents as files under this directory' },
  RENDER_SCHEDULER: {
    default: 'true',
    parse: bool,
    doc: 'Render on RENDER_CRON in this process; false = only serve what another instance or `pingd render` stored',
  },
  PUBLISH_DELTA_WINDOW: {
    default: '900',
    parse: int(10, 3600),
    doc: 'Seconds a rendering stays usable as an RFC 3229 / ?since= delta base; older validators get the full document',
  },
  PUBLISH_POINTER_TTL_MS: {
    default: '1000',
    parse: int(0, 60000),
    doc: 'How long an instance reuses its knowledge of the current rendering of a document before asking the database again',
  },
  BLOCKLIST_FILE: {
    default: '',
    parse: optionalStr,
    doc: 'File of blocked hosts/domains, URL and name patterns and client addresses; re-read when it changes (docs/guides/operations.md)',
  },
  PING_HOST_BUDGET: {
    default: '100',
    parse: int(0, 1_000_000),
    doc: 'Pings accepted for weblogs of one host per PING_MIN_INTERVAL (60 s when 0), counted per instance; 0 = no budget',
  },
  RATE_LIMIT_PER_IP: {
    default: '0',
    parse: int(0, 1_000_000),
    doc: 'Pings per minute accepted from one client address (IPv6: per /64), counted per instance; 0 = no limit',
  },
  REQUEST_TIMEOUT_MS: {
    default: '30000',
    parse: int(1000, 600000),
    doc: 'Longest a client may take to send a whole request (slow clients are cut off)',
  },
  METRICS_TOKEN: { default: '', parse: optionalStr, doc: 'When set, GET /metrics requires `Authorization: Bearer <token>`', secret: true },
  ADMIN_TOKEN: {
    default: '',
    parse: secret(16),
    doc: 'Bearer token (16+ characters) of the operator API over HTTP (/api/admin/*, GET /api/websub/subscriptions); unset = only through the socket pingd.sock in DATA_DIR',
    secret: true,
  },
  RETENTION_DAYS: { default: '30', parse: int(0, 36500), doc: 'Raw pings older than this many days are deleted; 0 keeps them forever' },
  ARCHIVE_RETENTION_DAYS: {
    default: '0',
    parse: int(0, 36500),
    doc: 'Rendered hourly archives older than this many days are deleted; 0 keeps them forever',
  },
  RETENTION_CRON: { default: '17 * * * *', parse: cronExpr, doc: 'When retention runs (UTC; one instance at a time)' },
  RETENTION_BATCH: {
    default: '5000',
    parse: int(10, 100000),
    doc: 'Most rows one retention statement deletes (each batch is its own short transaction)',
  },
  SHUTDOWN_TIMEOUT_MS: {
    default: '25000',
    parse: int(1000, 600000),
    doc: 'Longest a graceful shutdown may take before the process gives up and exits with 1',
  },
  RSSPING_REQUIRE_AUTH: {
    default: 'false',
    parse: bool,
    doc: 'Refuse rss_pings that are neither pingserver-side nor publisher-side authenticated (401)',
  },
  RSSPING_VERIFY_HASH_URI: {
    default: 'true',
    parse: bool,
    doc: 'Fetch payload_hash_uri to authenticate rss_pings (pingserver-side); false = no outbound request, such pings stay unauthenticated',
  },
  RSSPING_BODY_LIMIT: {
    default: '262144',
    parse: int(1024, 10 * 1024 * 1024),
    doc: 'Largest rss_ping request body (payload included), in bytes (larger: 413)',
  },
  RSSPING_SECRET: {
    default: '',
    parse: secret(32),
    doc: 'Key (32+ characters) publisher passwords are encrypted with; unset = publisher-side authentication is off',
    secret: true,
  },
  FETCH_ALLOW_PRIVATE: {
    default: 'false',
    parse: bool,
    doc: 'Let outbound requests reach loopback, private, link-local and metadata addresses (tests only!)',
  },
  FETCH_ALLOW_ADDRESSES: {
    default: '',
    parse: cidrList,
    doc: 'Addresses or CIDR ranges outbound requests may reach although they are private (comma-separated; default none)',
  },
  FETCH_TIMEOUT_MS: {
    default: '5000',
    parse: int(100, 60000),
    doc: 'Longest one outbound request may take: DNS, connect, redirects and body',
  },
  FETCH_MAX_BYTES: {
    default: '5242880',
    parse: int(1024, 256 * 1024 * 1024),
    doc: 'Largest feed or page verification reads, counted after decompression (larger: too_large)',
  },
  FETCH_HOST_INTERVAL_MS: {
    default: '1000',
    parse: int(0, 3_600_000),
    doc: 'Minimum gap between two requests to one host, across instances: fetches of feeds and pages, WebSub verifications of intent, rssCloud endpoint checks (pushes a subscriber asked for, WebSub deliveries and rssCloud notifications, are bounded in flight per host instead)',
  },
  VERIFY_PINGS: {
    default: 'mark',
    parse: oneOf('off', 'mark', 'require'),
    doc: 'off: never fetch; mark: fetch pinged feeds, publish new items, list every ping; require: list a ping only once its feed showed something new',
  },
  SPAM_FILTER: {
    // hold: the end-to-end replay of the labelled corpus (test/spam/replay.test.ts) listed every honest
    // weblog with a verified new item and ~88% fewer splogs (docs/design/spam.md).
    default: 'hold',
    parse: oneOf('off', 'mark', 'hold'),
    doc: 'off: score nothing; mark: score each new weblog and show it (/weblog, pingd spam), hide nothing; hold: also keep weblogs scored above SPAM_THRESHOLD (or pinned deny) out of the documents, the stream, WebSub, rssCloud and the relay',
  },
  SPAM_THRESHOLD: {
    // DEFAULT_SPAM_THRESHOLD of src/spam/score.ts (the platform imports no job; test/spam/hold.test.ts checks they agree).
    default: '0.5',
    parse: fraction,
    doc: 'Spam score (0 a blog, 1 a splog) above which SPAM_FILTER=hold holds a weblog',
  },
  SPAM_RESCORE_INTERVAL: {
    default: '60',
    parse: int(0, 86400),
    doc: 'Seconds between two runs of the job that rescores, from every family of signals, the weblogs pinged or verified since its last run (one instance at a time); 0 = this process never runs it',
  },
  SPAM_RESCORE_BATCH: {
    default: '500',
    parse: int(10, 10000),
    doc: 'Weblogs the rescoring job gathers evidence for at once; a run does at most 20 such batches, and the next run goes on',
  },
  VERIFY_CONCURRENCY: { default: '8', parse: int(1, 256), doc: 'Verifications running at once in this instance' },
  VERIFY_PARSE_THREADS: {
    default: '1',
    parse: int(1, 64),
    doc: 'Worker threads that read fetched feeds and pages, off the event loop (each may hold up to VERIFY_PARSE_MEMORY_MB)',
  },
  VERIFY_PARSE_BUDGET_MS: {
    default: '2000',
    parse: int(50, 60000),
    doc: 'CPU time one fetched document may take to read on its thread (wall time: ten times this); beyond it the thread is ended and the outcome is too_complex',
  },
  VERIFY_PARSE_MEMORY_MB: {
    default: '256',
    parse: int(32, 4096),
    doc: 'Heap one document-reading thread may use; a document that needs more is too_complex',
  },
  VERIFY_FEED_INTERVAL: {
    default: '60',
    parse: int(0, 86400),
    doc: 'Seconds between two fetches of one feed; pings arriving sooner are settled together by the next fetch',
  },
  FETCH_CONTACT_URL: {
    default: '',
    parse: optionalHttpUrl,
    doc: "Page about this server for the outbound User-Agent `pingd/<version> (+URL)`; default: PUBLIC_URL's home page; neither set: the product token alone, and a warning at start",
  },
  PUBLIC_URL: {
    default: '',
    parse: publicUrl,
    doc: "Where clients reach this service, e.g. https://ping.example.com: makes published links and WebSub hub/self links absolute, and is the WebSub hub (`PUBLIC_URL/websub`) and rssCloud address a feed names to lower its spam score (trust.names_pingd); unset = the request's Host (links inside documents: http://localhost:PORT), and no feed is taken to name this server",
  },
  STREAM_MAX_CLIENTS: {
    default: '1000',
    parse: int(0, 1_000_000),
    doc: 'Live stream (/stream) connections one instance serves at once; beyond it a refusal EventSource clients retry (200 text/event-stream with retry: 10000, Retry-After and X-Pingd-Refused: max_clients)',
  },
  STREAM_BUFFER_BYTES: {
    default: '1048576',
    parse: int(16384, 256 * 1024 * 1024),
    doc: 'Bytes a live stream connection may have waiting to be sent; a consumer that falls this far behind goes back to catching up from the database at its own pace (cut only by the slow-consumer rule)',
  },
  STREAM_SLOW_MIN_BYTES_PER_SECOND: {
    default: '1024',
    parse: int(1, 1_000_000_000),
    doc: 'Slow-consumer rule: a stream connection that is behind (catching up with bytes waiting for it) and reads less than this over a whole STREAM_SLOW_WINDOW_MS is disconnected; one that reads steadily, however far behind, never is',
  },
  STREAM_SLOW_WINDOW_MS: {
    default: '60000',
    parse: int(1000, 3_600_000),
    doc: 'Slow-consumer rule: how long a stream connection may stay behind while reading below STREAM_SLOW_MIN_BYTES_PER_SECOND before it is disconnected',
  },
  STREAM_CURSOR_MS: {
    default: '30000',
    parse: int(0, 3_600_000),
    doc: 'Least time between two cursor advances (a bare `id:` block) sent to a filtered stream that sees no event while the log moves on, so a reconnect resumes from near now; 0 = never',
  },
  STREAM_HEARTBEAT_MS: {
    default: '15000',
    parse: int(100, 300_000),
    doc: 'Interval of the comment line that keeps idle stream connections open through proxies',
  },
  STREAM_RETRY_MS: { default: '3000', parse: int(100, 600_000), doc: 'The reconnection delay (SSE `retry:`) streams tell their clients' },
  STREAM_REPLAY_CONCURRENCY: {
    default: '2',
    parse: int(1, 64),
    doc: 'Stream replay reads (a resuming client catching up from the database) running at once in one instance, each on a pooled connection on PostgreSQL (keep it well under DB_POOL_MAX: intake needs the rest); beyond it replays wait their turn, first come first served, one read per turn, with their connection open (no refusal)',
  },
  // 1,000: a lone replay of 1M pings on PostgreSQL read 146,000 events/s at 500, 156,000 at 1,000 and
  // 176,000-186,000 at 2,000 (this machine, frames joined by the database); each read's statement grows
  // with it, and on the embedded database intake waits behind it.
  STREAM_REPLAY_PAGE: {
    default: '1000',
    parse: int(10, 10_000),
    doc: "Positions (event ids) one stream replay read covers, the connection's filter in the query; a client at most this far behind reads at once, one further behind waits its turn for each read",
  },
  STREAM_REPLAY_ROWS_PER_SECOND: {
    default: '',
    parse: optionalInt(100, 10_000_000),
    doc: 'Rows all stream replays of one instance together read from the database per second (a position a filter passes over counts a sixth; a window another connection already read counts nothing); at the limit replays slow down, they are not refused. Unset: 300000 on PostgreSQL (its own server process does the reading and formats the events), 30000 on the embedded database (it reads in the one session intake uses)',
  },
  // 400 MB/s: 50 replays of 1M pings at once on PostgreSQL (frames ~220 bytes) were sent 46,000 events/s
  // each unpaced, their clients' one process took a core, and intake's p99 went from 14-27 to 64-176 ms;
  // at 400 MB/s, 35,000 each and a p99 of 36-41 ms in three runs (bench/lib/stream-replay-cases.ts, 2 ×
  // Intel Xeon, 2026-11-30). A lone replay (~50 MB/s) never waits: 216,000-222,000 events/s.
  STREAM_REPLAY_BYTES_PER_SECOND: {
    default: '400000000',
    parse: int(0, 100_000_000_000),
    doc: 'Bytes all stream replays of one instance together are sent per second, shared equally among the connections replaying at the time (0 = unpaced); a window read once for many connections is paced for each, so a crowd replaying one stretch leaves time to intake. At the limit replays slow down, they are not refused',
  },

  STREAM_REPLAY_CACHE_BYTES: {
    default: '33554432',
    parse: int(0, 4 * 1024 * 1024 * 1024),
    doc: 'Bytes of stream replay windows kept in memory so that connections replaying the same stretch with the same filter share one database read (and its encoding); 0 = share only reads in flight',
  },
  WEBSUB_LEASE_DEFAULT: {
    default: '864000',
    parse: int(60, 365 * 86400),
    doc: 'WebSub lease, in seconds, when the subscriber asks for none (10 days)',
  },
  WEBSUB_LEASE_MIN: {
    default: '3600',
    parse: int(1, 365 * 86400),
    doc: 'Shortest WebSub lease granted (shorter requests get this): renewals, each verified with a request to the callback, come no more often',
  },
  WEBSUB_LEASE_MAX: { default: '2592000', parse: int(60, 365 * 86400), doc: 'Longest WebSub lease granted (30 days)' },
  WEBSUB_MAX_SUBSCRIPTIONS: {
    default: '10000',
    parse: int(0, 10_000_000),
    doc: 'Subscriptions (active and pending) the hub keeps; beyond it new ones are refused with 503',
  },
  WEBSUB_CONCURRENCY: {
    default: '8',
    parse: int(1, 256),
    doc: 'WebSub requests (verifications of intent, denials, deliveries) running at once in this instance',
  },
  WEBSUB_MAX_PER_HOST: {
    default: '1000',
    parse: int(0, 10_000_000),
    doc: "Subscriptions (active and pending) whose callbacks are on one host (its name or address, any port); beyond it that host's new subscriptions are refused with 503 and Retry-After (renewals and unsubscribing still pass). 1000, not 100, since the hub takes any feed: a feed reader service subscribes one callback per feed it follows from one host, and each of its subscriptions costs one delivery per change, which WEBSUB_HOST_CONCURRENCY already paces",
  },
  WEBSUB_MAX_TOPICS: {
    default: '10000',
    parse: int(0, 10_000_000),
    doc: "Feed topics (any feed, not pingd's own documents) with subscriptions, active or pending; beyond it a subscription to a feed no one subscribes to yet is refused with 503 (the hub fetches each of them when it is pinged or polled)",
  },
  WEBSUB_MAX_TOPICS_PER_HOST: {
    default: '1000',
    parse: int(0, 10_000_000),
    doc: 'Distinct feed topics subscribed from callbacks on one host; beyond it that host cannot add another feed (503): a stranger cannot make the hub fetch and poll feeds without bound',
  },
  WEBSUB_MAX_PER_TOPIC_HOST: {
    default: '1000',
    parse: int(0, 10_000_000),
    doc: "Subscriptions whose feed topic is on one host; beyond it new ones are refused with 503: one feed host's change cannot fan out without bound",
  },
  WEBSUB_POLL_INTERVAL: {
    default: '0',
    parse: int(0, 30 * 86400),
    doc: "Seconds between polls of a subscribed feed topic that nobody pings (0: no polling, the default); never more often than the feed's own ttl or sy:updatePeriod allows, never after a 410",
  },
  WEBSUB_MAX_PENDING: {
    default: '20',
    parse: int(1, 1_000_000),
    doc: 'WebSub requests (subscribe, unsubscribe, denials) waiting for their request to the callback, per callback host and per client address (IPv6: per /64); beyond it new ones are refused with 429 and Retry-After',
  },
  WEBSUB_HOST_CONCURRENCY: {
    default: '1',
    parse: int(1, 256),
    doc: "WebSub requests to one callback host in flight at once in this instance; that host's other tasks wait in the queue while the rest of WEBSUB_CONCURRENCY serves other hosts",
  },
  WEBSUB_ANSWER_TIMEOUT_MS: {
    default: '3000',
    parse: int(100, 60000),
    doc: 'Longest a WebSub callback may take to answer a verification of intent, a denial or a delivery, in full; a later or unfinished answer is a failure (retried with backoff)',
  },
  WEBSUB_ANSWER_MAX_BYTES: {
    default: '65536',
    parse: int(256, 16 * 1024 * 1024),
    doc: 'Longest answer a WebSub callback may give, in bytes; the hub stops reading there and a longer answer is a failure (a delivery is retried with backoff, a verification is not confirmed)',
  },
  RSSCLOUD_MAX_SUBSCRIPTIONS: {
    default: '10000',
    parse: int(0, 10_000_000),
    doc: 'rssCloud subscriptions (one per feed and endpoint, 25 hours each unless renewed) pingd keeps; beyond it new ones are refused with 503 and Retry-After (renewals still pass)',
  },
  RSSCLOUD_MAX_PER_HOST: {
    default: '100',
    parse: int(0, 10_000_000),
    doc: "rssCloud subscriptions whose endpoints are on one host (the requester's address, or the domain it named; any port); beyond it that host's new subscriptions are refused with 503 and Retry-After (renewals still pass)",
  },
  RSSCLOUD_MAX_PER_REQUESTER: {
    default: '100',
    parse: int(0, 10_000_000),
    doc: 'rssCloud subscriptions one client address (IPv6: one /64) has asked for, whatever endpoints they name; beyond it its new subscriptions are refused with 503 and Retry-After (renewals still pass)',
  },
  RSSCLOUD_MAX_URLS: {
    default: '10',
    parse: int(1, 1000),
    doc: 'Feeds one pleaseNotify may name (url1…urlN); each is fetched once unless verification already knows it as a feed; more are refused with 400',
  },
  RSSCLOUD_CONCURRENCY: {
    default: '8',
    parse: int(1, 256),
    doc: 'rssCloud notifications being sent at once in this instance (one per endpoint host across instances), and pleaseNotify requests being checked at once (more are refused with 503)',
  },
  RELAY_TARGETS: {
    default: '',
    parse: urlList,
    doc: 'XML-RPC endpoints (weblogUpdates) every accepted ping is relayed to, comma-separated, e.g. http://rpc.pingomatic.com/; empty = relay nothing',
    secret: true,
  },
  RELAY_FILE: {
    default: '',
    parse: optionalStr,
    doc: 'YAML or JSON file of relay targets with per-target options (method, rate_per_min, concurrency, enabled); added to RELAY_TARGETS',
  },
  RELAY_RATE_PER_MIN: {
    default: '60',
    parse: int(1, 600_000),
    doc: 'Relays per minute sent to one target, across instances (a target may set its own in RELAY_FILE)',
  },
  RELAY_ONLY_VERIFIED: {
    default: 'false',
    parse: bool,
    doc: 'Relay a ping only once verification found something new in its feed (always so under VERIFY_PINGS=require)',
  },
  RELAY_MAX_ATTEMPTS: {
    default: '8',
    parse: int(1, 100),
    doc: 'Tries of one relay (network errors, timeouts, 5xx, faults) before it is a dead letter (`pingd relay retry`)',
  },
  RELAY_CONCURRENCY: {
    default: '8',
    parse: int(1, 256),
    doc: 'Relay requests running at once in this instance (each target also has its own limit, 2 by default)',
  },
  RELAY_QUEUE_MAX: {
    default: '1000',
    parse: int(1, 10_000_000),
    doc: "Weblogs one relay target may have waiting (a weblog pinged again while it waits stays one relay, of its newest ping); beyond it the stalest waiting weblog is dropped for that target and counted (`pingd relay status`, /status). At the default 60 relays a minute, 1000 is about 17 minutes of the target's turns",
  },
  RELAY_LOOP_WINDOW: {
    default: '3600',
    parse: int(60, 86400),
    doc: 'Seconds after a weblog was relayed to a target during which its pings are not relayed to that target again, whatever PING_MIN_INTERVAL is (counted as suppressed): ends loops through a forwarder that passes relays back without the pingd-relay marker; a weblog updated twice within it reaches each target once',
  },
} as const;

type Spec = typeof SPEC;
export type Config = { readonly [K in keyof Spec]: ReturnType<Spec[K]['parse']> };
export type ConfigKey = keyof Spec;

/** Reads the configuration from `env` (process.env by default); overrides win, for tests. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const out: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(SPEC) as [ConfigKey, Spec[ConfigKey]][]) {
    if (name in overrides) {
      out[name] = (overrides as Record<string, unknown>)[name];
      continue;
    }
    const raw = env[name] ?? spec.default;
    out[name] = (spec.parse as Parser<unknown>)(raw, name);
  }
  return Object.freeze(out) as Config;
}

/** For docs and `.env.example`: name, default, description and secrecy of every variable. */
export function describeConfig(): { name: string; default: string; doc: string; secret: boolean }[] {
  return Object.entries(SPEC).map(([name, s]) => ({ name, default: s.default, doc: s.doc, secret: 'secret' in s && s.secret === true }));
}

/** Whether the table marks `name` secret. */
export function isSecret(name: string): boolean {
  const row = (SPEC as Record<string, { secret?: boolean }>)[name];
  return row?.secret === true;
}

/** One setting's value as it may be printed: see `secret` above. Lists are redacted item by item. */
export function redactedValue(name: string, v: unknown): unknown {
  if (!isSecret(name) || v === undefined || v === '') return v;
  if (Array.isArray(v)) return Object.freeze(v.map((x) => redactedValue(name, x)));
  if (typeof v === 'string' && /^[a-z][\w+.-]*:\/\//i.test(v)) return redactUrl(v);
  return '[redacted]';
}

/** The whole configuration as it may be logged or shown. */
export function redactedConfig(config: Config): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(config)) out[k] = redactedValue(k, v);
  return out;
}
