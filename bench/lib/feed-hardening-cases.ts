// Owns the hardening benchmark's cases about hostile *fetched feeds* (verification on): what a feed or a
// homepage served by a stranger's host costs pingd when a ping names it. Four classes, each against its own
// pingd (VERIFY_PINGS=mark, FETCH_ALLOW_ADDRESSES=127.0.0.0/8) with its feed hosts on loopback addresses
// (127.0.0.30–.71, 127.0.1.x, 127.0.2.x):
//   feed-redos     regular-expression backtracking on a feed or homepage: how long a canary ping waits;
//   feed-parse     a 4.8 MB feed of 20,000 new items verified every second: intake latency meanwhile;
//   feed-redirect  an RSS Feed State XML redirect to the same host: requests per ping, does it settle;
//   feed-drip      a feed sending 1 byte a second: the outcome, backoff, and 80 of them at once.
// bench/hardening.ts runs them (BENCH_HOSTILE_CASES=feed-redos,…) and prints feedTables() after its own.
import http from 'node:http';
import net from 'node:net';
import type { Agent } from 'node:http';
import type { AddressInfo } from 'node:net';
import { agent, send, type HostileRequest } from './hostile-http.js';
import type { Case, CaseResult, Target } from './hardening-cases.js';
import { startFeedHosts } from './feed-hosts.js';
import { isRpcAck } from './scenarios.js';
import { envNumber } from './env.js';

const LOOPBACK = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------------
// Results

export interface FeedDetail {
  what: string;
  figure: string;
  outcome: string;
}

export interface FeedCaseResult extends CaseResult {
  /** The one figure of the class row (markdown). */
  headline: string;
  details: FeedDetail[];
}

export interface FeedCase extends Case {
  /** What the headline figure is. */
  figure: string;
  /** How the case is run, for the method paragraph under the tables. */
  method?: string;
  run(t: Target, s: Parameters<Case['run']>[1], log: (s: string) => void): Promise<FeedCaseResult>;
}

const f1 = (n: number | undefined) =>
  n === undefined || !Number.isFinite(n) ? '–' : n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US');
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

// ---------------------------------------------------------------------------------------------------
// Loopback hosts

export interface Host {
  origin: string;
  /** Requests seen, by path. */
  hits: Map<string, number>;
  close(): Promise<void>;
}

export type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** An HTTP server on one loopback address (a distinct host to pingd), counting requests by path. */
export async function startHost(address: string, handler: Handler): Promise<Host> {
  if (!LOOPBACK.test(address)) throw new Error(`feed hosts listen on loopback only, not on ${address}`);
  const hits = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    hits.set(path, (hits.get(path) ?? 0) + 1);
    handler(req, res);
  });
  await new Promise<void>((r) => server.listen(0, address, r));
  return {
    origin: `http://${address}:${(server.address() as AddressInfo).port}`,
    hits,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

const fixed =
  (type: string, body: string | Buffer, status = 200): Handler =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': type });
    res.end(body);
  };

// ---------------------------------------------------------------------------------------------------
// Talking to pingd

const RPC_HEADERS = { 'content-type': 'text/xml' };
const param = (v: string) => `<param><value><string>${v}</string></value></param>`;

/** `weblogUpdates.ping(name, url)`: pingd finds the feed on the homepage. */
export function rpcPing(name: string, url: string): HostileRequest {
  return {
    method: 'POST',
    path: '/RPC2',
    headers: RPC_HEADERS,
    body: Buffer.from(
      `<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName><params>${param(name)}${param(url)}</params></methodCall>`,
    ),
  };
}

/** `weblogUpdates.extendedPing(name, url, changesUrl, rssUrl)`: pingd verifies rssUrl. */
export function rpcExtended(name: string, url: string, rss: string): HostileRequest {
  return {
    method: 'POST',
    path: '/RPC2',
    headers: RPC_HEADERS,
    body: Buffer.from(
      `<?xml version="1.0"?><methodCall><methodName>weblogUpdates.extendedPing</methodName><params>${param(name)}${param(url)}${param(url)}${param(rss)}</params></methodCall>`,
    ),
  };
}

export async function ping(t: Target, r: HostileRequest): Promise<void> {
  const via = agent(1);
  try {
    const a = await send(t.url, r, via, 120_000);
    if (!isRpcAck(a.status, a.body)) throw new Error(`pingd did not acknowledge the ping: ${a.status} ${a.body.slice(0, 300)}`);
  } finally {
    via.destroy();
  }
}

export interface WeblogJson {
  feed: {
    status: number | null;
    outcome: string | null;
    failures: number;
    nextFetchAfter: string | null;
    lastFetchAt: string | null;
  } | null;
  verification: { outcome: string; at: string; httpStatus: number | null; newItems: unknown[] } | null;
}

/** GET /api/weblogs?url=: what pingd knows of the weblog (undefined: not known, or no answer). */
export async function weblog(t: Target, url: string, via?: Agent): Promise<WeblogJson | undefined> {
  const own = via ?? agent(1);
  try {
    const a = await send(t.url, { method: 'GET', path: `/api/weblogs?url=${encodeURIComponent(url)}` }, own, 60_000);
    return a.status === 200 ? (JSON.parse(a.body) as WeblogJson) : undefined;
  } catch {
    return undefined;
  } finally {
    if (!via) own.destroy();
  }
}

/**
 * Polls the weblog until its verification has an outcome (or `withinMs` passes). `ms`: from `since`
 * (Date.now() when the ping was sent) to the outcome's own time stamp, so a late poll does not count.
 */
async function settled(t: Target, url: string, since: number, withinMs: number): Promise<{ w?: WeblogJson; ms?: number }> {
  const via = agent(1);
  try {
    let w: WeblogJson | undefined;
    while (Date.now() - since < withinMs) {
      w = await weblog(t, url, via);
      if (w?.verification) return { w, ms: Date.parse(w.verification.at) - since };
      await sleep(250);
    }
    return { w };
  } finally {
    via.destroy();
  }
}

/** pingd_verify_queue{measure="depth"|"oldest_age_seconds"} from /metrics. */
async function verifyQueue(t: Target): Promise<{ depth: number; oldest: number }> {
  const via = agent(1);
  try {
    const text = (await send(t.url, { method: 'GET', path: '/metrics' }, via, 60_000)).body;
    const m = (measure: string) => Number(new RegExp(`^pingd_verify_queue\\{measure="${measure}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    return { depth: m('depth'), oldest: m('oldest_age_seconds') };
  } catch {
    return { depth: NaN, oldest: NaN };
  } finally {
    via.destroy();
  }
}

export interface Sample {
  /** performance.now() when sent. */
  at: number;
  ms: number;
  ok: boolean;
  /** Why it was not acknowledged: the XML-RPC message or fault, the HTTP status, or the error. */
  why?: string;
}

/** An answer that is not an acknowledgement, in a few words: its message or faultString, else its status. */
export function refusal(status: number, body: string): string {
  const m = /<name>(?:message|faultString)<\/name><value>(?:<string>)?([^<]*)/.exec(body)?.[1];
  return m ? m.trim().slice(0, 120) : `HTTP ${status}`;
}

/**
 * Sends `make()` every `everyMs` without waiting for answers (an open loop: a frozen server makes the
 * requests wait, each timed from when it was due); stop() resolves once every answer has come.
 */
export function openLoop(base: string, make: () => HostileRequest, everyMs: number): { stop(): Promise<Sample[]> } {
  const via = agent(512);
  const samples: Sample[] = [];
  const pending = new Set<Promise<void>>();
  const t0 = performance.now();
  let n = 0;
  let stopped = false;
  let timer: NodeJS.Timeout;
  const tick = () => {
    if (stopped) return;
    const at = performance.now();
    const p: Promise<void> = send(base, make(), via, 120_000)
      .then(
        (a) => {
          const ok = isRpcAck(a.status, a.body);
          samples.push({ at, ms: a.ms, ok, ...(ok ? {} : { why: refusal(a.status, a.body) }) });
        },
        (err: Error) => void samples.push({ at, ms: performance.now() - at, ok: false, why: err.message.slice(0, 120) }),
      )
      .finally(() => pending.delete(p));
    pending.add(p);
    n++;
    timer = setTimeout(tick, Math.max(0, t0 + n * everyMs - performance.now()));
  };
  timer = setTimeout(tick, 0);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      while (pending.size) await Promise.all([...pending]);
      via.destroy();
      return samples.sort((a, b) => a.at - b.at);
    },
  };
}

export interface Stats {
  n: number;
  failed: number;
  p50: number;
  p99: number;
  max: number;
}

export function stats(xs: Sample[]): Stats {
  const ms = xs.map((x) => x.ms).sort((a, b) => a - b);
  const at = (q: number) => (ms.length ? ms[Math.min(ms.length - 1, Math.floor(ms.length * q))] : NaN);
  return { n: ms.length, failed: xs.filter((x) => !x.ok).length, p50: at(0.5), p99: at(0.99), max: ms.length ? ms[ms.length - 1] : NaN };
}

const between = (xs: Sample[], from: number, to: number) => xs.filter((x) => x.at >= from && x.at < to);
const unacked = (s: Stats) => (s.failed ? `, **${s.failed} not acknowledged**` : '');

/** What a weblog's verification and feed state say, in a few words. */
function verdict(w: WeblogJson | undefined): string {
  if (!w) return 'weblog unknown';
  if (!w.verification) return '**not settled**';
  const v = w.verification;
  return `**${v.outcome}**${v.httpStatus ? ` (HTTP ${v.httpStatus})` : ''}${v.newItems.length ? `, ${v.newItems.length} new items` : ''}`;
}

// ---------------------------------------------------------------------------------------------------
// The cases

/** Verification on, against loopback only; no render ticks; no per-host ping budget (the load's weblogs share hosts). */
const VERIFY = { VERIFY_PINGS: 'mark', FETCH_ALLOW_ADDRESSES: '127.0.0.0/8', RENDER_SCHEDULER: 'false', PING_HOST_BUDGET: '0' };

let canarySeq = 0;
/**
 * A fresh, cheap ping: a new weblog (no throttle, a real insert) on one of 200 hosts of 127.0.1.0/24 at a
 * port nothing listens on (its verification fails at once: connection refused).
 */
export const canaryPing = () => {
  const n = ++canarySeq;
  return rpcPing('Canary', `http://127.0.1.${1 + (n % 200)}:9/c${n.toString(36)}/`);
};

const REDOS_WINDOW_MS = 10_000;
/** The feed of the report: 28 empty comments, each followed by 4 spaces, then a minimal RSS 2.0 feed (368 bytes). */
const COMMENTED_FEED = `${'<!---->    '.repeat(28)}<rss version="2.0"><channel><title>t</title></channel></rss>`;
const K200 = 200 * 1024;
const fill = (unit: string) => unit.repeat(Math.ceil(K200 / unit.length)).slice(0, K200);

interface Shape {
  what: string;
  address: string;
  /** Served at /feed.xml (rss) or / (homepage). */
  kind: 'rss' | 'homepage';
  type: string;
  body: string;
}

const SHAPES: Shape[] = [
  {
    what: `(a) feed: 28 \`<!---->\` comments, then \`<rss>\` (${COMMENTED_FEED.length} bytes), extendedPing`,
    address: '127.0.0.31',
    kind: 'rss',
    type: 'application/rss+xml',
    body: COMMENTED_FEED,
  },
  {
    what: '(b) homepage: 200 KB of `<!--`, never closed; ping (autodiscovery)',
    address: '127.0.0.32',
    kind: 'homepage',
    type: 'text/html; charset=utf-8',
    body: fill('<!--'),
  },
  {
    what: '(c) homepage: 200 KB of `<link ` with no `>`; ping (autodiscovery)',
    address: '127.0.0.33',
    kind: 'homepage',
    type: 'text/html; charset=utf-8',
    body: fill('<link '),
  },
  {
    what: '(d) feed: `<rss version="2.0"><channel>` then 200 KB of `<skipHours`; extendedPing',
    address: '127.0.0.34',
    kind: 'rss',
    type: 'application/rss+xml',
    body: `<rss version="2.0"><channel>${fill('<skipHours')}`,
  },
  // (d) as a feed the parser accepts (it refuses (d) at once: no title, unclosed), so the hints are read from its text.
  {
    what: '(e) (d) closed as a feed: `<rss version="2.0"><channel><title>t</title>`, 200 KB of `<skipHours`, `</channel></rss>`; extendedPing',
    address: '127.0.0.35',
    kind: 'rss',
    type: 'application/rss+xml',
    body: `<rss version="2.0"><channel><title>t</title>${fill('<skipHours')}</channel></rss>`,
  },
];

const feedRedos: FeedCase = {
  id: 'feed-redos',
  title: 'F1. Backtracking on a fetched feed or homepage (a canary ping every 50 ms)',
  figure: 'longest canary ping (p99) in the 10 s after the hostile ping, worst shape',
  env: { ...VERIFY, VERIFY_FEED_INTERVAL: '0' },
  async run(t, _s, log) {
    // A running pingd has parsed feeds and homepages before: V8 interprets a regular expression the
    // first time and compiles it for the next, so one honest feed and one homepage go first.
    const warm = await startFeedHosts(1, 30);
    const details: FeedDetail[] = [];
    let worst: { shape: Shape; s: Stats } | undefined;
    const hosts: Host[] = [];
    try {
      const w0 = Date.now();
      await ping(t, rpcExtended('Warm feed', `${warm.origins[0]}/warm1/`, `${warm.origins[0]}/warm1/feed.xml`));
      await ping(t, rpcPing('Warm page', `${warm.origins[0]}/warm2/`));
      const a = await settled(t, `${warm.origins[0]}/warm1/`, w0, 30_000);
      const b = await settled(t, `${warm.origins[0]}/warm2/`, w0, 30_000);
      log(`  warm-up: feed ${a.w?.verification?.outcome ?? 'not settled'}, homepage ${b.w?.verification?.outcome ?? 'not settled'}`);
      for (const shape of SHAPES) {
        const host = await startHost(shape.address, fixed(shape.type, shape.body));
        hosts.push(host);
        const site = `${host.origin}/`;
        const loop = openLoop(t.url, canaryPing, 50);
        await sleep(2000);
        const t0 = performance.now();
        const wall0 = Date.now();
        await ping(t, shape.kind === 'rss' ? rpcExtended('Hostile', site, `${host.origin}/feed.xml`) : rpcPing('Hostile', site));
        await sleep(REDOS_WINDOW_MS - (performance.now() - t0));
        const samples = await loop.stop();
        const idle = stats(between(samples, 0, t0));
        const s = stats(between(samples, t0, t0 + REDOS_WINDOW_MS));
        const end = await settled(t, site, wall0, 45_000);
        const fetched = [...host.hits.values()].reduce((x, y) => x + y, 0);
        log(
          `  ${shape.what}: canary p50/p99/max ${s.p50.toFixed(0)}/${s.p99.toFixed(0)}/${s.max.toFixed(0)} ms (${s.n} pings; idle p99 ${idle.p99.toFixed(0)} ms); ${end.w?.verification?.outcome ?? 'not settled'} ${end.ms === undefined ? '' : secs(end.ms)}`,
        );
        details.push({
          what: shape.what,
          figure: `canary max **${f1(s.max)}** ms, p99 ${f1(s.p99)} ms, p50 ${f1(s.p50)} ms (${s.n} pings${unacked(s)}; before the hostile ping: p99 ${f1(idle.p99)} ms)`,
          outcome: `${verdict(end.w)}${end.ms === undefined ? ' within 45 s' : ` after ${secs(end.ms)}`}; ${fetched} request(s) to the host`,
        });
        if (!worst || s.max > worst.s.max) worst = { shape, s };
      }
    } finally {
      await warm.close();
      for (const h of hosts) await h.close();
    }
    const w = worst!;
    return {
      label: 'a feed or homepage whose text makes a regular expression backtrack',
      headline: `**${f1(w.s.max)}** ms (${f1(w.s.p99)}), ${w.shape.what.slice(0, 3)}`,
      outcome: details.map((d) => `${d.what.slice(0, 3)} ${d.outcome.split(';')[0]}`).join('; '),
      details,
    };
  },
};

const PARSE_ITEMS = 20_000;
const PARSE_BYTES = 4_800_000;
/** Six characters replaced by the request's number in every guid, link and title. */
const TAG = 'RRRRRR';

/** A ~4.8 MB RSS 2.0 feed of 20,000 items whose guids hold TAG. */
function bigFeedTemplate(origin: string): string {
  const date = new Date().toUTCString();
  const head = `<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel><title>Big</title><link>${origin}/</link><description>20,000 new items on every request</description>\n`;
  const tail = '</channel></rss>\n';
  const item = (i: number, pad: string) =>
    `<item><title>Item ${i} of ${TAG}</title><link>${origin}/p/${TAG}/${i}</link><guid isPermaLink="false">urn:bench:${TAG}:${i}</guid><pubDate>${date}</pubDate><description>${pad}</description></item>\n`;
  const per = Math.floor((PARSE_BYTES - head.length - tail.length) / PARSE_ITEMS);
  const items: string[] = [];
  for (let i = 0; i < PARSE_ITEMS; i++) {
    const bare = item(i, '');
    items.push(item(i, 'x'.repeat(Math.max(0, per - bare.length))));
  }
  return head + items.join('') + tail;
}

const feedParse: FeedCase = {
  id: 'feed-parse',
  title: 'F2. A 4.8 MB feed of 20,000 new items, verified every second',
  figure: 'intake p50 / p99 ms at 50 pings/s: baseline → with the big feed pinged every second',
  env: { ...VERIFY, VERIFY_FEED_INTERVAL: '0', FETCH_HOST_INTERVAL_MS: '0', PING_MIN_INTERVAL: '0' },
  async run(t, _s, log) {
    const rate = envNumber('BENCH_FEED_PARSE_RATE', 50);
    const seconds = envNumber('BENCH_FEED_PARSE_SECONDS', 30);
    const baseSeconds = 20;
    let requests = 0;
    let template = '';
    const big = await startHost('127.0.0.61', (_req, res) => {
      const body = Buffer.from(template.replaceAll(TAG, (++requests).toString(36).padStart(TAG.length, '0')));
      res.writeHead(200, { 'content-type': 'application/rss+xml; charset=utf-8', 'content-length': body.length });
      res.end(body);
    });
    template = bigFeedTemplate(big.origin);
    // The load's own feeds: 404 at once (not_a_feed), so their verification costs next to nothing.
    const small = await startHost('127.0.0.62', fixed('text/plain', 'not here', 404));
    let n = 0;
    const load = () => {
      const b = `${small.origin}/w${(++n).toString(36)}/`;
      return rpcExtended('Load', b, `${b}feed.xml`);
    };
    try {
      const loop = openLoop(t.url, load, 1000 / rate);
      await sleep(5000); // warm-up, not counted
      const b0 = performance.now();
      await sleep(baseSeconds * 1000);
      const h0 = performance.now();
      const q0 = await verifyQueue(t);
      const site = `${big.origin}/`;
      const hostile = openLoop(t.url, () => rpcExtended('Big', site, `${big.origin}/feed.xml`), 1000);
      await sleep(seconds * 1000);
      const h1 = performance.now();
      const [samples, hostilePings] = await Promise.all([loop.stop(), hostile.stop()]);
      const base = stats(between(samples, b0, h0));
      const during = stats(between(samples, h0, h1));
      const hp = stats(hostilePings);
      const w = await weblog(t, site);
      const q = await verifyQueue(t);
      log(
        `  intake p50/p99 baseline ${base.p50.toFixed(1)}/${base.p99.toFixed(1)} ms → with the big feed ${during.p50.toFixed(1)}/${during.p99.toFixed(1)} ms (max ${during.max.toFixed(0)}); big feed served ${requests}×; ${w?.verification?.outcome ?? 'no verification'}`,
      );
      return {
        label: `extendedPing of a ${(template.length / 1e6).toFixed(1)} MB feed (${PARSE_ITEMS.toLocaleString('en-US')} items, new guids on every request) every second for ${seconds} s`,
        headline: `${f1(base.p50)} / ${f1(base.p99)} → **${f1(during.p50)} / ${f1(during.p99)}**`,
        outcome: `big feed fetched ${requests}× in ${seconds} s; its last verification ${verdict(w)}; verification queue then ${f1(q.depth)} deep`,
        details: [
          {
            what: `intake, baseline: ${rate} pings/s of new weblogs (feeds answering 404), ${baseSeconds} s`,
            figure: `p50 ${f1(base.p50)} ms, p99 ${f1(base.p99)} ms, max ${f1(base.max)} ms (${base.n} pings${unacked(base)})`,
            outcome: `verification queue then ${f1(q0.depth)} deep, oldest ${f1(q0.oldest)} s`,
          },
          {
            what: `intake, the same load with the big feed pinged every second, ${seconds} s`,
            figure: `p50 **${f1(during.p50)}** ms, p99 **${f1(during.p99)}** ms, max ${f1(during.max)} ms (${during.n} pings${unacked(during)})`,
            outcome: '',
          },
          {
            what: 'the big feed',
            figure: `its own pings: p50 ${f1(hp.p50)} ms, max ${f1(hp.max)} ms (${hp.n}${unacked(hp)}); fetched ${requests}×`,
            outcome: `last verification ${verdict(w)}; queue ${f1(q.depth)} deep, oldest ${f1(q.oldest)} s`,
          },
        ],
      };
    } finally {
      await big.close();
      await small.close();
    }
  },
};

const feedRedirect: FeedCase = {
  id: 'feed-redirect',
  title: 'F3. XML redirect (RSS Feed State) to the same host, FETCH_HOST_INTERVAL_MS=1000',
  figure: 'requests to the host for one ping',
  env: VERIFY,
  async run(t, _s, log) {
    let origin = '';
    const host = await startHost('127.0.0.51', (req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (path === '/old')
        fixed('application/rss+xml', `<?xml version="1.0"?>\n<redirect><newLocation>${origin}/new</newLocation></redirect>\n`)(req, res);
      else if (path === '/new')
        fixed(
          'application/rss+xml',
          `<?xml version="1.0"?>\n<rss version="2.0"><channel><title>Moved</title><link>${origin}/</link><description>d</description><item><title>One</title><link>${origin}/1</link><guid>urn:bench:moved:1</guid></item></channel></rss>\n`,
        )(req, res);
      else fixed('text/plain', 'not here', 404)(req, res);
    });
    origin = host.origin;
    try {
      const site = `${origin}/`;
      const limit = 40_000;
      const t0 = Date.now();
      await ping(t, rpcExtended('Redirected', site, `${origin}/old`));
      const end = await settled(t, site, t0, limit);
      // Whatever is still on its way after the outcome (a job of the same ping) is counted too.
      if (end.ms !== undefined) await sleep(2000);
      const old = host.hits.get('/old') ?? 0;
      const moved = host.hits.get('/new') ?? 0;
      const total = [...host.hits.values()].reduce((x, y) => x + y, 0);
      const when = end.ms === undefined ? `never settled in ${limit / 1000} s` : `settled after ${secs(end.ms)}`;
      log(`  /old ${old}×, /new ${moved}×; ${end.w?.verification?.outcome ?? 'no outcome'}; ${when}`);
      return {
        label: 'extendedPing naming /old: `<redirect><newLocation>http://SAMEHOST/new</newLocation></redirect>`; /new a valid feed',
        headline: `**${total}** (/old ${old}, /new ${moved})`,
        outcome: `${verdict(end.w)}, ${when}`,
        details: [
          {
            what: 'one ping, /old → /new on the same host',
            figure: `/old ${old}×, /new ${moved}× (${end.ms === undefined ? `${limit / 1000} s` : 'until settled, +2 s'})`,
            outcome: `${verdict(end.w)}, ${when}; feed state: ${end.w?.feed ? `status ${end.w.feed.status ?? '–'}, failures ${end.w.feed.failures}` : 'none'}`,
          },
        ],
      };
    } finally {
      await host.close();
    }
  },
};

/** A valid-looking RSS start, sent one byte a second after the headers. */
const DRIP =
  '<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel><title>Drip</title><link>http://drip.invalid/</link><description>one byte a second</description>\n';

/**
 * A host whose every answer is `200`, its headers, then DRIP one byte a second, the body delimited by the
 * connection's end (no Content-Length, not chunked), as a plain socket server sends it. Counts requests by path.
 */
async function startDripHost(address: string): Promise<Host> {
  if (!LOOPBACK.test(address)) throw new Error(`feed hosts listen on loopback only, not on ${address}`);
  const hits = new Map<string, number>();
  const sockets = new Set<net.Socket>();
  const server = net.createServer((sock) => {
    sockets.add(sock);
    let head = '';
    let timer: NodeJS.Timeout | undefined;
    sock.on('error', () => undefined);
    sock.on('close', () => {
      clearInterval(timer);
      sockets.delete(sock);
    });
    sock.on('data', (d: Buffer) => {
      if (timer) return;
      head += d.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      const path = (/^[A-Z]+ (\S+)/.exec(head)?.[1] ?? '/').split('?')[0];
      hits.set(path, (hits.get(path) ?? 0) + 1);
      sock.write('HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml; charset=utf-8\r\nConnection: close\r\n\r\n');
      let i = 0;
      timer = setInterval(() => sock.write(DRIP[i++] ?? ' '), 1000);
    });
  });
  await new Promise<void>((r) => server.listen(0, address, r));
  return {
    origin: `http://${address}:${(server.address() as AddressInfo).port}`,
    hits,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

const feedDrip: FeedCase = {
  id: 'feed-drip',
  title: 'F4. A feed dripping 1 byte a second (FETCH_TIMEOUT_MS=5000)',
  figure: 'one dripping feed: outcome, failures, backoff; 80 at once: verification queue 60 s later',
  env: VERIFY,
  async run(t, _s, log) {
    const feeds = Math.round(envNumber('BENCH_FEED_DRIP_FEEDS', 80));
    if (feeds > 250) throw new Error('BENCH_FEED_DRIP_FEEDS: at most 250 (one loopback address each)');
    const hosts: Host[] = [];
    const honest = await startFeedHosts(1, 72);
    try {
      // One feed, one ping.
      const one = await startDripHost('127.0.0.71');
      hosts.push(one);
      const site = `${one.origin}/`;
      const t0 = Date.now();
      await ping(t, rpcExtended('Drip', site, `${one.origin}/feed.xml`));
      const end = await settled(t, site, t0, 45_000);
      const f = end.w?.feed;
      const next = f?.nextFetchAfter
        ? `${f.nextFetchAfter} (in ${Math.round((Date.parse(f.nextFetchAfter) - Date.now()) / 1000)} s)`
        : 'none';
      log(
        `  one: ${end.w?.verification?.outcome ?? 'not settled'} after ${end.ms === undefined ? '–' : secs(end.ms)}; failures ${f?.failures ?? '–'}, next fetch ${next}`,
      );

      // Many at once, each on a host of its own.
      const many: Host[] = [];
      for (let i = 1; i <= feeds; i++) many.push(await startDripHost(`127.0.2.${i}`));
      hosts.push(...many);
      const via = agent(feeds);
      const m0 = performance.now();
      const acks = await Promise.all(
        many.map((h) =>
          send(t.url, rpcExtended('Drip', `${h.origin}/`, `${h.origin}/feed.xml`), via, 120_000).then(
            (a) => isRpcAck(a.status, a.body),
            () => false,
          ),
        ),
      );
      via.destroy();
      // An honest weblog pinged just after: how long its verification waits behind them.
      await sleep(1000);
      const honestSite = `${honest.origins[0]}/honest/`;
      const hp = performance.now();
      await ping(t, rpcExtended('Honest', honestSite, `${honestSite}feed.xml`));
      let peak = { depth: 0, oldest: 0 };
      let honestMs: number | undefined;
      while (performance.now() - m0 < 60_000) {
        await sleep(Math.min(5000, 60_000 - (performance.now() - m0)));
        const q = await verifyQueue(t);
        if (q.oldest > peak.oldest) peak = q;
        if (honestMs === undefined && (await weblog(t, honestSite))?.verification) honestMs = performance.now() - hp;
      }
      const q60 = await verifyQueue(t);
      const fetched = many.filter((h) => (h.hits.get('/feed.xml') ?? 0) > 0).length;
      const outcomes: Record<string, number> = {};
      for (const h of many) {
        const o = (await weblog(t, `${h.origin}/`))?.verification?.outcome ?? 'not settled';
        outcomes[o] = (outcomes[o] ?? 0) + 1;
      }
      const tally = Object.entries(outcomes)
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${v}× ${k}`)
        .join(', ');
      log(
        `  ${feeds} at once: queue 60 s later ${q60.depth} deep, oldest ${q60.oldest.toFixed(1)} s (peak ${peak.oldest.toFixed(1)} s); fetched ${fetched}/${feeds}; ${tally}; honest feed ${honestMs === undefined ? 'not verified' : secs(honestMs)}`,
      );
      const oneVerdict = `${verdict(end.w)} after ${end.ms === undefined ? '(not settled in 45 s)' : secs(end.ms)}, failures **${f?.failures ?? '–'}**, next fetch after: ${next}`;
      return {
        label: `extendedPing of a feed answering 200 and headers, then 1 byte a second; then ${feeds} such feeds (one host each) at once`,
        headline: `one: ${verdict(end.w)}, failures ${f?.failures ?? '–'}; ${feeds}: oldest job **${f1(q60.oldest)} s** 60 s later (peak ${f1(peak.oldest)} s)`,
        outcome: oneVerdict,
        details: [
          {
            what: 'one dripping feed, one ping',
            figure: `settled after ${end.ms === undefined ? '–' : secs(end.ms)}`,
            outcome: oneVerdict,
          },
          {
            what: `${feeds} dripping feeds pinged at once (${acks.filter(Boolean).length} acknowledged)`,
            figure: `60 s later: queue **${f1(q60.depth)}** deep, oldest job **${f1(q60.oldest)} s** (sampled every 5 s: peak ${f1(peak.oldest)} s, ${f1(peak.depth)} deep)`,
            outcome: `fetched ${fetched} of ${feeds}; ${tally}`,
          },
          {
            what: 'an honest feed pinged 1 s after them',
            figure: honestMs === undefined ? '**not verified within 60 s**' : `verified after ${secs(honestMs)}`,
            outcome: '',
          },
        ],
      };
    } finally {
      await honest.close();
      for (const h of hosts) await h.close();
    }
  },
};

export const FEED_CASES: FeedCase[] = [feedRedos, feedParse, feedRedirect, feedDrip];

/** Cases with a headline figure (the fetched-feed and fan-out classes), tabled by feedTables(). */
export const isFeedCase = (c: Case): c is FeedCase => 'figure' in c;

/** The feed classes' table (one row per class and backend) and their details. */
export function feedTables(all: { c: Case; backend: string; r?: CaseResult; error?: string }[]): string {
  const out = ['| class | backend | attack | headline figure | value | outcome |', '| --- | --- | --- | --- | --- | --- |'];
  for (const { c, backend, r, error } of all) {
    const fc = c as FeedCase;
    if (!r) out.push(`| ${c.title} | ${backend} | failed: ${error} | ${fc.figure} | | |`);
    else out.push(`| ${c.title} | ${backend} | ${r.label} | ${fc.figure} | ${(r as FeedCaseResult).headline} | ${r.outcome} |`);
  }
  out.push('', '| class | backend | detail | figure | outcome |', '| --- | --- | --- | --- | --- |');
  for (const { c, backend, r } of all)
    for (const d of (r as FeedCaseResult | undefined)?.details ?? [])
      out.push(`| ${c.id} | ${backend} | ${d.what} | ${d.figure} | ${d.outcome} |`);
  return out.join('\n');
}

export function feedMethod(): string {
  return (
    'Fetched-feed classes (F1–F4): pingd with `VERIFY_PINGS=mark FETCH_ALLOW_ADDRESSES=127.0.0.0/8 RENDER_SCHEDULER=false PING_HOST_BUDGET=0`, the hostile hosts on loopback addresses of their own. ' +
    '**F1**: `VERIFY_FEED_INTERVAL=0`; an honest feed and homepage are verified first (V8 compiles a regular expression after its first, interpreted, run); then per shape, on its own host: ' +
    'a canary `weblogUpdates.ping` of a new weblog (on 127.0.1.x:9, nothing listening: its verification fails at once) every 50 ms in an open loop (each timed from when it was due), 2 s before the hostile ping and 10 s after it; ' +
    'the figures are the canary pings sent in those 10 s; the outcome from GET /api/weblogs, waited for up to 45 s. ' +
    '**F2**: `VERIFY_FEED_INTERVAL=0 FETCH_HOST_INTERVAL_MS=0 PING_MIN_INTERVAL=0`; 50 extendedPings/s of new weblogs whose feeds answer 404 (open loop), 5 s warm-up, 20 s baseline, then 30 s more with one extendedPing a second naming the big feed (new guids on every request). ' +
    '**F3**: default intervals; one extendedPing naming /old; requests counted by the host until /api/weblogs shows an outcome (+2 s) or for 40 s. ' +
    '**F4**: default FETCH_TIMEOUT_MS (5000) and VERIFY_CONCURRENCY (8); the feed (a plain socket server) sends `200` and its headers (no Content-Length, not chunked: the body ends with the connection), then one byte a second; the 80 feeds on 127.0.2.1–80, pinged at once; /metrics read every 5 s and 60 s after.'
  );
}
