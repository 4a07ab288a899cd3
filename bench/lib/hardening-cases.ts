// Owns the hardening benchmark's cases, one per amplification class: how each sets pingd up, which hostile
// request it sends, and what it reports beyond the common figures (tokens a stranger gets, weblog URL
// variants accepted, rss_ping shapes). bench/hardening.ts runs them and prints the tables.
import {
  agent,
  answerKind,
  flood,
  sendOnce,
  healthzUnderAttack,
  idleHealthz,
  memoryMb,
  send,
  sequential,
  statusList,
  type Cost,
  type Flood,
  type HostileRequest,
  type Latency,
  type QueryCount,
} from './hostile-http.js';
import {
  endpointOf,
  formPing,
  inmFlood,
  rssPingRequest,
  rssPingShapes,
  rssPingXml,
  tokenRequest,
  VARIANT_KINDS,
  xffPing,
} from './hostile.js';

export interface Settings {
  /** Hostile requests in a memory flood (BENCH_HOSTILE_REQUESTS). */
  requests: number;
  /** The same for 256 KiB rss_pings, which cost far more to send and to parse. */
  rsspingRequests: number;
  /** Requests timed one at a time per case. */
  samples: number;
  /** Longest a flood may run; the number actually sent is reported. */
  floodSeconds: number;
  /** /healthz measured this long idle, and as long under attack. */
  attackSeconds: number;
  /** Weblog URL spellings sent per kind, and token requests by the stranger. */
  variants: number;
  tokenRequests: number;
  concurrency: number;
}

export interface Target {
  url: string;
  pid: number;
  queries: QueryCount;
}

export interface CaseResult {
  label: string;
  cost?: Cost;
  idle?: Latency;
  attack?: Latency;
  memory?: { before: number; after: number; peak: number; flood: Flood };
  outcome: string;
  /** Extra rows: rss_ping shapes, URL variant kinds. */
  details?: { what: string; cost?: Cost; accepted?: number; sent?: number; answers?: string }[];
}

export interface Case {
  id: string;
  title: string;
  /** pingd's configuration for this case (on top of LOG_LEVEL=warn, VERIFY_PINGS=off). */
  env: Record<string, string>;
  /** Publishers registered (site, password) through the CLI before pingd starts. */
  publishers?: { site: string; password: string }[];
  /** Fills the migrated database before pingd starts (pingd's environment: DATABASE_URL or DATA_DIR). */
  seed?(env: Record<string, string>): Promise<void>;
  run(t: Target, s: Settings, log: (s: string) => void): Promise<CaseResult>;
}

/** Resident memory now, or NaN when pingd is gone (killed by the kernel or out of heap). */
function memoryOf(pid: number): { rss: number; peak: number } {
  try {
    return memoryMb(pid);
  } catch {
    return { rss: NaN, peak: NaN };
  }
}

/** A flood of `make`, pingd's memory before and after. */
async function memoryFlood(
  t: Target,
  s: Settings,
  make: () => HostileRequest,
  total: number,
  log: (s: string) => void,
): Promise<NonNullable<CaseResult['memory']>> {
  const m0 = memoryOf(t.pid);
  const f = await flood(t.url, make, total, s.concurrency, s.floodSeconds, (n) =>
    log(`  flood: ${n} sent, RSS ${memoryOf(t.pid).rss.toFixed(0)} MB`),
  );
  const m1 = memoryOf(t.pid);
  log(
    `  flood: ${f.sent} in ${f.seconds.toFixed(1)} s (${statusList(f.statuses)}${f.failed ? `, ${f.failed} failed` : ''}), RSS ${m0.rss.toFixed(0)} → ${m1.rss.toFixed(0)} MB (peak ${m1.peak.toFixed(0)})`,
  );
  return { before: m0.rss, after: m1.rss, peak: m1.peak, flood: f };
}

/** The common figures: /healthz idle, the request alone, /healthz under attack, then (optionally) a flood. */
async function measure(
  t: Target,
  s: Settings,
  make: () => HostileRequest,
  opts: { samples?: number; maxSeconds?: number; flood?: { total: number; make?: () => HostileRequest }; log: (s: string) => void },
): Promise<Omit<CaseResult, 'label' | 'outcome'>> {
  const { log } = opts;
  const idle = await idleHealthz(t.url, s.attackSeconds, t.queries);
  const cost = await sequential(t.url, t.pid, make, opts.samples ?? s.samples, opts.maxSeconds ?? 30, t.queries, idle.idlePerSec);
  log(
    `  alone: ${cost.n} requests, p50 ${cost.p50.toFixed(1)} ms, max ${cost.max.toFixed(1)} ms, ${cost.queries?.toFixed(1)} statements/request (${statusList(cost.statuses)})`,
  );
  const attack = await healthzUnderAttack(t.url, make, s.attackSeconds);
  log(
    `  /healthz p50/p99 idle ${idle.latency.p50.toFixed(1)}/${idle.latency.p99.toFixed(1)} ms, under attack ${attack.latency.p50.toFixed(1)}/${attack.latency.p99.toFixed(1)} ms (${attack.latency.n} samples)`,
  );
  const result = { cost, idle: idle.latency, attack: attack.latency };
  if (!opts.flood) return result;
  return { ...result, memory: await memoryFlood(t, s, opts.flood.make ?? make, opts.flood.total, log) };
}

/** Waits until `path` is rendered with a validator other than `not`; returns its ETag (gzip). */
async function waitRendered(url: string, path: string, not: string | undefined): Promise<string> {
  const via = agent(1);
  try {
    const until = Date.now() + 60_000;
    for (;;) {
      const r = await send(url, { method: 'GET', path, headers: { 'accept-encoding': 'gzip' } }, via);
      const etag = r.headers.etag;
      if (r.status === 200 && typeof etag === 'string' && etag !== not) return etag;
      if (Date.now() > until) throw new Error(`${path} was not (re)rendered within 60 s (last status ${r.status})`);
      await new Promise((res) => setTimeout(res, 250));
    }
  } finally {
    via.destroy();
  }
}

/**
 * No render ticks where the class is not about documents (as the intake benchmark runs): a re-rendering
 * sends dozens of statements at once, noise on the statements counted per request.
 */
const QUIET = { RENDER_SCHEDULER: 'false' };

let hostSeq = 0;
async function pingDistinct(url: string, n: number): Promise<void> {
  const via = agent(8);
  const all = Array.from({ length: n }, () => formPing(`https://b${(++hostSeq).toString(36)}.seed.example/`));
  await Promise.all(
    Array.from({ length: 8 }, async (_, w) => {
      for (let i = w; i < all.length; i += 8) await send(url, all[i], via);
    }),
  );
  via.destroy();
}

const xff: Case = {
  id: 'xff',
  title: '1. X-Forwarded-For memory (TRUST_PROXY=true, RATE_LIMIT_PER_IP=5)',
  env: { TRUST_PROXY: 'true', RATE_LIMIT_PER_IP: '5', ...QUIET },
  async run(t, s, log) {
    const url = 'https://www.xff-victim.example/';
    const first = await sendOnce(t.url, formPing(url));
    const m = await measure(t, s, () => xffPing(url), { flood: { total: s.requests, make: () => xffPing(undefined) }, log });
    return {
      label:
        'GET /pingSiteForm of one weblog (throttled after the first), X-Forwarded-For: 15 KB of new text, then a new IPv6 /64; the flood: the same with a weblog URL that is no URL (refused after the rate limit counted the client, no database write)',
      ...m,
      outcome: `first ping ${first.status}; flood answers: ${statusList(m.memory!.flood.statuses)}`,
    };
  },
};

const inm: Case = {
  id: 'inm',
  title: '3. If-None-Match with A-IM: feed (RFC 3229) on /changes.xml',
  // Renders every 2 s (instead of 10) only so that the two renderings a delta needs come quickly.
  env: { RENDER_CRON: '*/2 * * * * *' },
  async run(t, s, log) {
    const path = '/changes.xml';
    await pingDistinct(t.url, 200);
    const base = await waitRendered(t.url, path, undefined);
    await pingDistinct(t.url, 20);
    const current = await waitRendered(t.url, path, base);
    // A real base still gets its delta: the document has delta cut points, as in production.
    const real = await sendOnce(t.url, {
      method: 'GET',
      path,
      headers: { 'accept-encoding': 'gzip', 'a-im': 'feed', 'if-none-match': base },
    });
    const token = /^(?:W\/)?"([0-9a-z]+)\.([0-9a-z]+)/.exec(current);
    if (!token) throw new Error(`unexpected ETag ${current}`);
    const { make, tags } = inmFlood(path, token[2], parseInt(token[1], 36));
    log(`  rendering ${current} (delta base ${base}: ${real.status}); ${tags} invented tags per request`);
    const m = await measure(t, s, make, { samples: Math.min(s.samples, 20), maxSeconds: 20, flood: { total: s.requests }, log });
    return {
      label: `GET ${path}, A-IM: feed, If-None-Match: ${tags} invented tags (15 KB)`,
      ...m,
      outcome: `a real delta base answers ${real.status}; hostile answers: ${statusList(m.cost!.statuses)}`,
    };
  },
};

const PUBLISHER = { site: 'https://www.token-victim.example/', password: 'bench-publisher-password' };

const tokens: Case = {
  id: 'tokens',
  title: '4. RSS Ping token flooding (GET /rssping/token)',
  env: { RSSPING_SECRET: 'bench-secret-'.padEnd(48, 'x'), ...QUIET },
  publishers: [PUBLISHER],
  async run(t, s, log) {
    // Three clients to pingd: the publisher, a stranger, and the attackers of the /healthz figure.
    const publisher = agent(1, '127.0.0.3');
    const first = await send(t.url, tokenRequest(PUBLISHER.site), publisher);
    if (first.status !== 200) throw new Error(`the publisher got no token: ${first.status} ${first.body.slice(0, 200)}`);
    const idle = await idleHealthz(t.url, s.attackSeconds, t.queries);
    const cost = await sequential(
      t.url,
      t.pid,
      () => tokenRequest(PUBLISHER.site),
      s.tokenRequests,
      60,
      t.queries,
      idle.idlePerSec,
      agent(1, '127.0.0.2'),
    );
    const firstRefusal = cost.answers.findIndex((a) => a.status !== 200);
    const granted = cost.answers.filter((a) => a.status === 200).length;
    const body = Buffer.from(rssPingXml(PUBLISHER.site));
    const use = await send(
      t.url,
      rssPingRequest(body, `/rssping/${endpointOf(PUBLISHER.site, PUBLISHER.password, first.body.trim())}`),
      publisher,
    );
    const works = use.status === 200 && use.body.includes('publisher_side');
    const next = await send(t.url, tokenRequest(PUBLISHER.site), publisher);
    publisher.destroy();
    log(
      `  stranger: ${firstRefusal < 0 ? cost.n : firstRefusal} granted before a refusal, ${granted}/${cost.n} in all; first token works: ${works} (${use.status}); next token ${next.status}`,
    );
    // The /healthz figure with the attackers on an address of their own (their own per-client allowance).
    const attack = await healthzUnderAttack(t.url, () => tokenRequest(PUBLISHER.site), s.attackSeconds);
    return {
      label: 'GET /rssping/token?site_uri=<a registered publisher>, from one stranger',
      cost,
      idle: idle.latency,
      attack: attack.latency,
      outcome:
        `stranger: ${firstRefusal < 0 ? `all ${cost.n}` : `${firstRefusal}`} token requests granted before the first refusal${firstRefusal < 0 ? '' : ` (${cost.answers[firstRefusal].status})`}, ${granted} of ${cost.n} in all; ` +
        `the publisher's first token still works afterwards: **${works ? 'yes' : 'no'}** (${use.status}); the publisher's next token request: ${next.status}`,
    };
  },
};

const RSS_SITE = 'https://www.rss-victim.example/';
/** A site spelled with a counter of fixed width, so that a body built once takes a new site by substitution. */
const NEW_SITE = 'https://www.rss-000000.example/';

/**
 * Each shape for a weblog that has just pinged (throttled, as the attacker's were: the earlier code parsed
 * the whole body before it knew), and for a new weblog each time (never throttled: parsed, then stored or
 * refused, the worst case once a throttled weblog is answered before the parse).
 */
const rssping: Case = {
  id: 'rssping',
  title: '5. Expensive rss_ping bodies (POST /rssping, ~256 KiB)',
  env: QUIET,
  async run(t, s, log) {
    const first = await sendOnce(t.url, rssPingRequest(Buffer.from(rssPingXml(RSS_SITE))));
    const limit = Number(process.env.BENCH_PINGD_RSSPING_BODY_LIMIT ?? 262_144);
    const throttled = rssPingShapes(RSS_SITE, limit);
    const fresh = rssPingShapes(NEW_SITE, limit);
    let n = 0;
    const renamed = (body: Buffer) => () =>
      rssPingRequest(Buffer.from(body.toString('latin1').replaceAll('rss-000000', `rss-${(++n).toString().padStart(6, '0')}`), 'latin1'));
    const idle = await idleHealthz(t.url, s.attackSeconds, t.queries);
    const details: NonNullable<CaseResult['details']> = [];
    let worst: { what: string; make: () => HostileRequest; cost: Cost } | undefined;
    for (const name of Object.keys(throttled)) {
      for (const [mode, make] of [
        ['throttled weblog', () => rssPingRequest(throttled[name])],
        ['a new weblog each', renamed(fresh[name])],
      ] as const) {
        const what = `${name} (${Math.round(throttled[name].length / 1024)} KiB), ${mode}`;
        const cost = await sequential(t.url, t.pid, make, Math.min(s.samples, 8), 15, t.queries, idle.idlePerSec);
        log(
          `  ${what}: p50 ${cost.p50.toFixed(0)} ms, max ${cost.max.toFixed(0)} ms, CPU ${cost.cpuMs.toFixed(0)} ms (${statusList(cost.statuses)})`,
        );
        details.push({ what, cost, answers: statusList(cost.statuses) });
        if (!worst || cost.cpuMs > worst.cost.cpuMs) worst = { what, make, cost };
      }
    }
    const w = worst!;
    const attack = await healthzUnderAttack(t.url, w.make, s.attackSeconds);
    const memory = await memoryFlood(t, s, w.make, s.rsspingRequests, log);
    return {
      label: `POST /rssping, the worst (pingd CPU) of ${details.length} bodies: ${w.what}`,
      cost: w.cost,
      idle: idle.latency,
      attack: attack.latency,
      memory,
      outcome: `the throttled site's own ping ${first.status}; hostile answers: ${statusList(w.cost.statuses)}`,
      details,
    };
  },
};

const variants: Case = {
  id: 'variants',
  title: '6. One site, many weblogs (URL spellings inside PING_MIN_INTERVAL)',
  env: QUIET,
  async run(t, s, log) {
    const kinds = Object.entries(VARIANT_KINDS);
    const via = agent(1);
    for (const [, k] of kinds) {
      const r = await send(t.url, formPing(`https://${k.host}/`), via);
      if (r.status !== 200) log(`  warning: the canonical ping of ${k.host} answered ${r.status}`);
    }
    via.destroy();
    const all = kinds.flatMap(([, k]) => Array.from({ length: s.variants }, (_, i) => formPing(k.spell(k.host, i + 1))));
    let i = 0;
    const idle = await idleHealthz(t.url, s.attackSeconds, t.queries);
    const cost = await sequential(t.url, t.pid, () => all[i++], all.length, 120, t.queries, idle.idlePerSec);
    const details = kinds.map(([what], k) => {
      const answers = cost.answers.slice(k * s.variants, (k + 1) * s.variants);
      const st: Record<string, number> = {};
      for (const a of answers) st[answerKind(a)] = (st[answerKind(a)] ?? 0) + 1;
      return { what, accepted: answers.filter((a) => a.status === 200).length, sent: answers.length, answers: statusList(st) };
    });
    for (const d of details) log(`  ${d.what}: ${d.accepted}/${d.sent} accepted (${d.answers})`);
    let n = 0;
    const attack = await healthzUnderAttack(t.url, () => formPing(`https://www.attack-victim.example/?a=${++n}`), s.attackSeconds);
    return {
      label: `GET /pingSiteForm, ${kinds.length} kinds × ${s.variants} spellings of one site (after its canonical URL)`,
      cost,
      idle: idle.latency,
      attack: attack.latency,
      outcome: details.map((d) => `${d.what.replace(/ \(.*$/, '')} ${d.accepted}/${d.sent}`).join('; '),
      details,
    };
  },
};

export const CASES: Case[] = [xff, inm, tokens, rssping, variants];
