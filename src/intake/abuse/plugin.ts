// Owns the abuse screen: the blocklist (BLOCKLIST_FILE, kept in step with the file), the per-client rate
// limit (RATE_LIMIT_PER_IP) and the per-host budget (PING_HOST_BUDGET), installed as a screen of the intake
// path (app.pings.addScreen), so every protocol runs it and every refusal is reported and rendered like any
// other (flerror 1; 403 / 429 with Retry-After).
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge } from 'prom-client';
import type { Config } from '../../platform/config.js';
import type { PingScreen } from '../ping/ping-service.js';
import type { Refused } from '../ping/refusals.js';
import { normalizeUrl, type RawPing, type ValidPing } from '../ping/validate.js';
import { Blocklist, type BlockMatch, type RuleKind } from './blocklist.js';
import { BlocklistFile } from './blocklist-file.js';
import { RateLimiter, clientKey, weblogHost } from './rate-limit.js';

export const BLOCKED_CLIENT = 'Pings from your address are not accepted by this server.';
export const BLOCKED_WEBLOG = 'Pings for this weblog are not accepted by this server.';

export interface AbuseScreen {
  /** The blocklist in force (empty without BLOCKLIST_FILE). */
  readonly blocklist: Blocklist;
  /** Re-reads BLOCKLIST_FILE now if it changed (the watcher does this by itself). */
  reloadBlocklist(): boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    abuse: AbuseScreen;
  }
}

async function abusePlugin(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;
  let blocklist = new Blocklist();

  new Gauge({
    name: 'pingd_blocklist_rules',
    help: 'Rules in the blocklist in force, by kind (host, url, name, client).',
    labelNames: ['kind'] as const,
    registers: [app.metrics],
    collect() {
      for (const [k, n] of Object.entries(blocklist.counts())) this.set({ kind: k }, n);
    },
  });
  const reloads = new Counter({
    name: 'pingd_blocklist_reloads_total',
    help: 'Times BLOCKLIST_FILE was (re)loaded, by result; a failed reload keeps the previous list.',
    labelNames: ['result'] as const,
    registers: [app.metrics],
  });
  const hits = new Counter({
    name: 'pingd_blocklist_hits_total',
    help: 'Pings refused by the blocklist, by the kind of rule that matched.',
    labelNames: ['kind'] as const,
    registers: [app.metrics],
  });

  let file: BlocklistFile | undefined;
  if (config.BLOCKLIST_FILE) {
    file = new BlocklistFile(config.BLOCKLIST_FILE, {
      loaded(list, { problems, initial }) {
        blocklist = list;
        reloads.inc({ result: 'ok' });
        for (const p of problems.slice(0, 20)) app.log.warn({ line: p.line }, `BLOCKLIST_FILE line ${p.line} skipped: ${p.message}`);
        app.log.info({ rules: list.counts(), skipped: problems.length, initial }, initial ? 'blocklist loaded' : 'blocklist reloaded');
      },
      failed(err) {
        reloads.inc({ result: 'failed' });
        app.log.error({ err: { message: err.message } }, 'blocklist not reloaded; the previous one stays in force');
      },
    });
    file.start(); // throws, and so stops the start, when the file cannot be read
  }

  const limiter = config.RATE_LIMIT_PER_IP > 0 ? new RateLimiter(config.RATE_LIMIT_PER_IP) : undefined;
  if (limiter) {
    new Gauge({
      name: 'pingd_rate_limit_tracked_addresses',
      help: 'Client addresses (IPv6: /64 prefixes) the per-address rate limit currently tracks in this instance.',
      registers: [app.metrics],
      collect() {
        this.set(limiter.tracked);
      },
    });
  }

  // One site must not become many weblogs: spellings of one host that normalisation keeps apart (`?a=1`,
  // `?a=2`, … or paths) each pass the per-weblog throttle. The budget is spent only by accepted pings, so
  // a weblog re-pinging inside its throttle costs its host's other weblogs nothing.
  const budgetWindowSec = config.PING_MIN_INTERVAL > 0 ? config.PING_MIN_INTERVAL : 60;
  const hostBudget = config.PING_HOST_BUDGET > 0 ? new RateLimiter(config.PING_HOST_BUDGET, Date.now, budgetWindowSec * 1000) : undefined;
  if (hostBudget) {
    new Gauge({
      name: 'pingd_host_budget_tracked_hosts',
      help: 'Weblog hosts the per-host budget (PING_HOST_BUDGET) currently tracks in this instance.',
      registers: [app.metrics],
      collect() {
        this.set(hostBudget.tracked);
      },
    });
    app.pings.onOutcome((_method, r) => {
      if (r.ok) hostBudget.spend(weblogHost(r.ping.url));
    });
  }

  const blocked = (raw: RawPing | ValidPing, r: Refused, match: BlockMatch): Refused => {
    hits.inc({ kind: match.kind satisfies RuleKind });
    app.log.debug({ rule: match.rule, clientAddr: raw.clientAddr, url: raw.url }, 'ping refused by the blocklist');
    return r;
  };

  // Before validation: a blocked client address, or one over its rate limit.
  const screenClient = (raw: RawPing): Refused | undefined => {
    const list = blocklist;
    // A blocked client is refused before it costs a rate-limit entry.
    if (list.clientRules > 0 && raw.clientAddr) {
      const m = list.match({ clientAddr: raw.clientAddr, urls: [] });
      if (m) return blocked(raw, { ok: false, reason: 'blocked', message: BLOCKED_CLIENT }, m);
    }
    if (limiter) {
      const d = limiter.take(clientKey(raw.clientAddr));
      if (!d.ok) {
        return {
          ok: false,
          reason: 'rate_limited',
          retryAfterSec: d.retryAfterSec,
          message: `Too many pings from your address (at most ${limiter.capacity} a minute); please ping again in ${d.retryAfterSec} seconds.`,
        };
      }
    }
    return undefined;
  };

  // After validation, so the rules see what would be stored (an invalid ping is refused by intake with the
  // exact reason first). `extraUrls`: more URLs the request carries, screened like the ping's.
  const screenPing = (ping: ValidPing, extraUrls: readonly string[]): Refused | undefined => {
    if (hostBudget) {
      const host = weblogHost(ping.url);
      const d = hostBudget.check(host);
      if (!d.ok) {
        return {
          ok: false,
          reason: 'rate_limited',
          retryAfterSec: d.retryAfterSec,
          message: `Too many weblogs on ${host} were pinged lately (at most ${hostBudget.capacity} every ${budgetWindowSec} seconds); please ping again in ${d.retryAfterSec} seconds.`,
        };
      }
    }
    const list = blocklist;
    if (list.size === list.clientRules) return undefined;
    const urls = [ping.url];
    if (ping.changesUrl) urls.push(ping.changesUrl);
    if (ping.rssUrl) urls.push(ping.rssUrl);
    for (const u of extraUrls) {
      try {
        urls.push(normalizeUrl(u, 'feed_uri'));
      } catch {
        /* refused by the caller's own validation */
      }
    }
    const m = list.match({ urls, name: ping.name });
    if (m) return blocked(ping, { ok: false, reason: 'blocked', message: BLOCKED_WEBLOG }, m);
    return undefined;
  };

  app.pings.addScreen({ client: screenClient, ping: screenPing } satisfies PingScreen);
  app.decorate('abuse', {
    get blocklist() {
      return blocklist;
    },
    reloadBlocklist: () => file?.check() ?? false,
  } satisfies AbuseScreen);

  app.addHook('onClose', async () => {
    file?.close();
    limiter?.close();
  });
}

export default fp(abusePlugin, { name: 'abuse', dependencies: ['metrics', 'pings'] });
