// Owns the live statistics as a Fastify resource (`app.stats`) and GET /api/stats?window=1h|24h: it counts
// every ping outcome, verification outcome and intake request time in memory, adds the counts to the
// per-minute tables every few seconds, and answers from those tables plus what it has not written yet.
import { heldCount } from '../../spam/spam-repository.js';
import fp from 'fastify-plugin';
import zlib from 'node:zlib';
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { weblogHost } from '../../intake/abuse/rate-limit.js';
import { verifyQueueStats as verifyQueue } from '../../verification/job-repository.js';
import { relayQueueStats as relayQueue } from '../../push/relay/job-repository.js';
import { taskQueueStats as websubQueue } from '../../push/websub/task-repository.js';
import { notificationQueueStats } from '../../push/rsscloud/notification-repository.js';
import { subscriptionStats } from '../../push/rsscloud/subscription-repository.js';
import { MINUTE_MS, MinuteTally, type Drained } from './minute-tally.js';
import { addMinuteCounts, minuteCounts, pruneMinutes, topHosts } from './minute-repository.js';
import { recentPings } from './stats-repository.js';
import { buildSnapshot, isWindow, StatsReply, windowMinutes, type StatsWindow } from './snapshot.js';
import { negotiateEncoding } from '../../publishing/read/conditional.js';

/** How often counts reach the database: what another instance's chart lags behind this one's by. */
export const FLUSH_MS = 5_000;
/** An answer is reused this long: a room full of open dashboards costs the database one read per window. */
export const CACHE_MS = 2_000;
/** Minutes older than this are dropped (the longest window is a day). */
const KEEP_MS = 25 * 60 * MINUTE_MS;
const PRUNE_EVERY_MS = 10 * MINUTE_MS;
const TOP_HOSTS = 10;
const RECENT = 20;
/** A host name is at most 253 characters; a longer "host" from a refused URL is cut. */
const HOST_MAX = 253;

export interface Stats {
  /** The answer of GET /api/stats for `window` (cached for CACHE_MS). */
  snapshot(window: StatsWindow): Promise<StatsReply>;
  /** Writes what was counted so far (tests and shutdown call it; a timer does otherwise). */
  flush(): Promise<void>;
  /**
   * The clock answers are made (their window, generatedAt) and cached by, read at each use: Date.now. Tests
   * move it forward instead of waiting CACHE_MS; counting stays on Date.now, so it must not go back.
   */
  now: () => number;
}

declare module 'fastify' {
  interface FastifyInstance {
    stats: Stats;
  }
}

const Query = Type.Object({ window: Type.Optional(Type.String({ maxLength: 16 })) });
const ApiError = Type.Object({ error: Type.String(), message: Type.String() });

async function statsPlugin(app: FastifyInstance): Promise<void> {
  const tally = new MinuteTally();
  const started = Date.now();

  app.pings.onOutcome((_method, r, url) => {
    const now = Date.now();
    tally.count(r.ok ? 'accepted' : `refused:${r.reason}`, now);
    if (!url) return;
    // One scan per ping: weblogHost hands back a URL without `scheme://` (a refused one) whole: it names no host.
    const host = weblogHost(url);
    if (host !== url && host !== '') tally.host(host.slice(0, HOST_MAX).toLowerCase(), r.ok, now);
  });
  app.verification.onSettled((outcome, settled) => tally.count(`verification:${outcome}`, Date.now(), settled));
  app.pings.onAnswered((ms) => tally.latencyMs(ms, Date.now()));

  let flushing: Promise<void> | undefined;
  /** What a flush is writing: still this instance's to show until it is committed. */
  let writing: Drained | undefined;
  /** Flushes committed so far: a read that overlapped one is done again. */
  let committed = 0;
  let lastPrune = 0;
  const flush = (): Promise<void> =>
    (flushing ??= (async () => {
      const d = (writing = tally.drain());
      try {
        await app.db.transaction((tx) => addMinuteCounts(tx, d.counts, d.hosts));
      } catch (err) {
        tally.restore(d);
        app.log.warn({ err: { message: (err as Error).message } }, 'writing the minute statistics failed; kept for the next flush');
        return;
      } finally {
        writing = undefined;
      }
      committed++;
      if (Date.now() - lastPrune > PRUNE_EVERY_MS) {
        lastPrune = Date.now();
        await pruneMinutes(app.db, Date.now() - KEEP_MS).catch((err: Error) =>
          app.log.warn({ err: { message: err.message } }, 'pruning the minute statistics failed'),
        );
      }
    })().finally(() => {
      flushing = undefined;
    }));
  const timer = setInterval(() => void flush(), FLUSH_MS);
  timer.unref();

  /**
   * The stored counts and this instance's own (not yet written, or being written), taken so that none is
   * missing or counted twice: a flush that committed while the tables were read makes the read start over.
   */
  const readCounts = async (from: number, to: number) => {
    for (let attempt = 0; ; attempt++) {
      const before = committed;
      const pending = tally.pending();
      const mine: Drained = {
        counts: [...pending.counts, ...(writing?.counts ?? [])],
        hosts: [...pending.hosts, ...(writing?.hosts ?? [])],
      };
      const [stored, hosts] = await Promise.all([
        minuteCounts(app.db, from, to),
        topHosts(app.db, Math.max(from, to - 59 * MINUTE_MS), to, TOP_HOSTS),
      ]);
      if (committed === before || attempt === 2) return { stored, hosts, mine };
    }
  };

  /** An answer, its JSON and a tag for it, made once per CACHE_MS (69 KiB of JSON took 3.3 ms per request). */
  interface Answer {
    reply: StatsReply;
    json: string;
    etag: string;
    /** The JSON compressed, made when a client first asks for that coding: once per answer, not per request. */
    coded: { gzip?: Buffer; br?: Buffer };
  }
  const cache = new Map<StatsWindow, { at: number; answer: Promise<Answer> }>();
  const compute = async (window: StatsWindow): Promise<StatsReply> => {
    const now = stats.now();
    const { from, to } = windowMinutes(window, now);
    const [counted, documents, readiness, verify, relay, websub, recent, cloudQueue, cloud, held] = await Promise.all([
      readCounts(from, to),
      app.publications.states(),
      app.readiness(),
      verifyQueue(app.db),
      relayQueue(app.db),
      websubQueue(app.db),
      recentPings(app.db, RECENT),
      notificationQueueStats(app.db),
      subscriptionStats(app.db),
      heldCount(app.db),
    ]);
    return buildSnapshot({
      window,
      now,
      counts: [...counted.stored, ...counted.mine.counts],
      latency: tally.latencyPercentiles(from, to),
      topHosts: mergeHosts(counted.hosts, counted.mine.hosts, TOP_HOSTS),
      documents: documents.map((d) => ({
        path: d.path,
        name: d.name,
        renderedAt: d.rendering ? new Date(d.rendering.renderedAtMs).toISOString() : null,
        ageSeconds: d.rendering ? Math.max(0, Math.round((now - d.rendering.renderedAtMs) / 1000)) : null,
        entries: d.rendering?.entries ?? null,
        renderMs: d.rendering ? Math.round(d.rendering.renderMs) : null,
      })),
      health: {
        database: app.db.kind,
        ready: readiness.ready,
        ...(readiness.ready ? {} : { reason: readiness.reason }),
        pingQueue: app.pings.pending,
        queues: [
          { name: 'verification', depth: verify.depth, oldestAgeSeconds: Math.round(verify.oldestAgeSec) },
          {
            name: 'relay',
            depth: relay.depth,
            oldestAgeSeconds: Math.round(relay.oldestAgeSec),
            dropped: relay.dropped,
            suppressed: relay.suppressed,
          },
          {
            name: 'websub',
            depth: websub.depth,
            oldestAgeSeconds: Math.round(websub.oldestAgeSec),
            perMinute: app.websub.deliveriesPerMinute(),
          },
          {
            name: 'rsscloud',
            depth: cloudQueue.depth,
            oldestAgeSeconds: Math.round(cloudQueue.oldestAgeSec),
            dropped: cloud.dropped,
            subscriptions: cloud.subscriptions,
            perMinute: cloud.deliveredLastMinute,
          },
        ],
      },
      spam: { filter: app.config.SPAM_FILTER, held },
      recent: recent.map((p) => ({ id: p.id, receivedAt: p.receivedAt.toISOString(), method: p.method, name: p.name, url: p.url })),
      uptimeSeconds: Math.round((now - started) / 1000),
    });
  };
  const answerFor = (window: StatsWindow): Promise<Answer> => {
    const hit = cache.get(window);
    if (hit && stats.now() - hit.at < CACHE_MS) return hit.answer;
    const answer = compute(window).then((r) => ({
      reply: r,
      json: JSON.stringify(r),
      etag: `"stats-${window}-${Date.parse(r.generatedAt).toString(36)}"`,
      coded: {},
    }));
    cache.set(window, { at: stats.now(), answer });
    answer.catch(() => cache.delete(window));
    return answer;
  };
  const snapshot = async (window: StatsWindow): Promise<StatsReply> => (await answerFor(window)).reply;
  const stats: Stats = { snapshot, flush, now: () => Date.now() };
  app.decorate('stats', stats);

  app.get<{ Querystring: Static<typeof Query> }>(
    '/api/stats',
    { schema: { querystring: Query, response: { 200: StatsReply, 400: ApiError, 503: ApiError } } },
    async (req, reply) => {
      const window = req.query.window ?? '1h';
      if (!isWindow(window))
        return reply.code(400).send({ error: 'WINDOW_INVALID', message: `window must be 1h or 24h, not ${JSON.stringify(window)}.` });
      let a: Answer;
      try {
        a = await answerFor(window);
      } catch (err) {
        req.log.warn({ err: { message: (err as Error).message } }, 'statistics unavailable');
        return reply
          .code(503)
          .header('cache-control', 'no-store')
          .send({ error: 'STATS_UNAVAILABLE', message: 'The database did not answer; statistics are unavailable for now.' });
      }
      // Each coding is a representation with its own tag (RFC 9110 §8.8.3), as the published documents'.
      const enc = negotiateEncoding(req.headers['accept-encoding']);
      const etag = enc === 'identity' ? a.etag : a.etag.replace(/"$/, enc === 'br' ? '-br"' : '-gz"');
      reply
        .header('cache-control', `public, max-age=${CACHE_MS / 1000}`)
        .header('etag', etag)
        .header('vary', 'Accept-Encoding');
      if (req.headers['if-none-match'] === etag) return reply.code(304).send();
      // The JSON made with the answer (the schema above documents it; its shape is buildSnapshot's type).
      reply.type('application/json; charset=utf-8');
      if (enc === 'identity') return reply.send(a.json);
      return reply.header('content-encoding', enc).send((a.coded[enc] ??= compressJson(enc, a.json)));
    },
  );

  app.addHook('onClose', async () => {
    clearInterval(timer);
    await flush();
  });
}

/**
 * An answer's JSON in a coding. A day's 24h answer (51.6 kB of JSON, measured with zlib on this machine):
 * brotli 4 0.89 ms → 12.8 kB (5: 2.0 ms → 12.6 kB; 11: 93 ms → 11.5 kB), gzip 4 0.93 ms → 16.1 kB (6: 2.6
 * ms → 15.6 kB). Once per answer, so open dashboards share it.
 */
function compressJson(enc: 'gzip' | 'br', json: string): Buffer {
  const bytes = Buffer.from(json);
  if (enc === 'gzip') return zlib.gzipSync(bytes, { level: 4 });
  return zlib.brotliCompressSync(bytes, {
    params: {
      [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
      [zlib.constants.BROTLI_PARAM_QUALITY]: 4,
      [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length,
    },
  });
}

/** The stored busiest hosts plus this instance's unwritten counts, busiest first. */
function mergeHosts(
  stored: readonly { host: string; accepted: number; refused: number }[],
  pending: readonly { host: string; accepted: number; refused: number }[],
  limit: number,
): { host: string; accepted: number; refused: number }[] {
  const by = new Map<string, { host: string; accepted: number; refused: number }>();
  for (const h of [...stored, ...pending]) {
    const e = by.get(h.host) ?? { host: h.host, accepted: 0, refused: 0 };
    e.accepted += h.accepted;
    e.refused += h.refused;
    by.set(h.host, e);
  }
  return [...by.values()].sort((a, b) => b.accepted + b.refused - (a.accepted + a.refused) || (a.host < b.host ? -1 : 1)).slice(0, limit);
}

export default fp(statsPlugin, { name: 'stats', dependencies: ['db', 'pings', 'verification', 'publishing', 'health', 'websub'] });
