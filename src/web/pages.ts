// Owns the pages for people: GET / (what this server is and how to ping it), GET /weblog?url= ("did my
// ping arrive?") and GET /status (the live dashboard). Each reads through the resources below it and
// renders one template; the status page's JavaScript adds charts and live updates, nothing more.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { firstParam, queryParam } from '../platform/http-schema.js';
import { requestBase } from '../platform/public-url.js';
import { MAX_URL_LENGTH, normalizeUrl, PingValidationError } from '../intake/ping/validate.js';
import { archivePath, hourStart, HOUR_MS } from '../publishing/documents/archive.js';
import { weblogView } from '../verification/feed-repository.js';
import { latestPings } from './weblog-repository.js';
import { feedSubscribers } from '../push/websub/subscription-repository.js';
import { resourceSubscribers } from '../push/rsscloud/subscription-repository.js';
import {
  appearances,
  HELD_APPEARANCE,
  heldText,
  pingRows,
  reasonWeight,
  REMOVED_APPEARANCE,
  removedText,
  utc,
  type ListedDocument,
} from './weblog-model.js';
import { spamOfWeblog } from '../spam/spam-repository.js';
import { removedAt } from '../intake/abuse/removal-repository.js';
import type { RecentRefusals } from './recent-refusals.js';

const LATEST_PINGS = 20;
/** The documents that list weblogs by their last ping, and so answer "where does it appear?". */
const LISTING_PATHS = ['/shortChanges.xml', '/changes.xml'];

/** Each page's <meta name="description"> (what a search result shows under its title: at most ~160 characters). */
export const DESCRIPTION = {
  home: 'A weblogUpdates ping server: point your blog engine at its XML-RPC address or ping by hand, and your weblog is listed in changes.xml for crawlers.',
  weblog:
    'Did my ping arrive? Look a weblog up on this pingd server: its latest pings, accepted or refused and why, and the changes.xml lists it appears in.',
  status:
    'The live status of this pingd server: pings accepted and refused per minute, intake latency, the busiest hosts, its queues and how fresh changes.xml is.',
  ping: 'Ping this weblogUpdates server by hand: tell it your weblog changed, and it is listed in changes.xml for crawlers and feed readers.',
} as const;

const NoQuery = Type.Object({});
const WeblogQuery = Type.Object({ url: queryParam(MAX_URL_LENGTH + 64) });

export async function pageRoutes(app: FastifyInstance, opts: { refusals: RecentRefusals }): Promise<void> {
  const { config } = app;
  const listedOnlyVerified = config.VERIFY_PINGS === 'require';
  const listing: ListedDocument[] = LISTING_PATHS.flatMap((p) => {
    const d = app.documents.get(p);
    return d ? [{ path: d.path, name: d.name, windowSec: d.windowSec }] : [];
  });

  app.get('/', { schema: { querystring: NoQuery } }, async (req, reply) =>
    reply.header('cache-control', 'no-cache').view('home', {
      title: 'A weblogUpdates ping server',
      description: DESCRIPTION.home,
      base: requestBase(config.PUBLIC_URL, config.PORT, req),
      lastArchive: archivePath(hourStart(Date.now()) - HOUR_MS),
    }),
  );

  app.get<{ Querystring: Static<typeof WeblogQuery> }>('/weblog', { schema: { querystring: WeblogQuery } }, async (req, reply) => {
    reply.header('cache-control', 'no-store');
    const asked = firstParam(req.query, 'url');
    const base = {
      title: 'Did my ping arrive?',
      description: DESCRIPTION.weblog,
      asked,
      minInterval: config.PING_MIN_INTERVAL,
      verifyOff: config.VERIFY_PINGS === 'off',
    };
    if (asked === null || asked === '') return reply.view('weblog', base);
    let url: string;
    try {
      url = normalizeUrl(asked);
    } catch (err) {
      if (!(err instanceof PingValidationError)) throw err;
      return reply.code(400).view('weblog', { ...base, error: err.message });
    }
    const w = await weblogView(app.db, url);
    const refusals = opts.refusals.of(url);
    if (!w) {
      // Refused pings of an unknown weblog still answer the question.
      if (refusals.length === 0) return reply.code(404).view('weblog', { ...base, unknown: url });
      return reply.code(404).view('weblog', {
        ...base,
        unknown: url,
        error: `Its pings were refused: ${refusals.map((r) => r.reason.replace(/_/g, ' ')).join(', ')}.`,
      });
    }
    const pings = await latestPings(app.db, w.id, LATEST_PINGS);
    const removed = await removedAt(app.db, w.id);
    // Its spam score (none under SPAM_FILTER=off, or for a weblog that pinged only then).
    const spam = config.SPAM_FILTER === 'off' ? undefined : await spamOfWeblog(app.db, w.id);
    const held = spam?.held === true;
    const unlisted = removed !== null ? REMOVED_APPEARANCE : held ? HELD_APPEARANCE : null;
    const f = w.feed;
    const websub = f ? await feedSubscribers(app.db, f.id) : null;
    // rssCloud: how many subscribe to the feed and how the last notifications went (never who they are).
    const feedUrl = f?.url ?? w.rssUrl;
    const cloud = feedUrl ? await resourceSubscribers(app.db, feedUrl) : null;
    return reply.view('weblog', {
      ...base,
      weblog: {
        url: w.url,
        name: w.name,
        rssUrl: w.rssUrl,
        pingCount: w.pingCount,
        removed: removed && removedText(removed),
        held: held && heldText(spam!, config.SPAM_THRESHOLD),
        spam: spam && {
          score: spam.score.toFixed(2),
          pinned: spam.pinned,
          reasons: spam.reasons.map((r) => ({ weight: reasonWeight(r.weight), text: r.text })),
        },
        lastPingAt: w.lastPingAt.toISOString(),
        lastPingText: `${utc(w.lastPingAt)} UTC`,
        feed: f
          ? { url: f.url, status: f.lastStatus, outcome: f.lastOutcome, lastFetch: f.lastFetchAt ? utc(f.lastFetchAt) : null, gone: f.gone }
          : null,
        websub: websub && {
          subscribers: websub.subscribers,
          recent: websub.recent.map((d) => ({
            at: d.at.toISOString(),
            atText: utc(d.at),
            ok: d.ok,
            text: `${d.ok ? 'delivered' : 'failed'}${d.status !== null ? ` (HTTP ${d.status})` : d.ok ? '' : ' (no answer)'}`,
          })),
        },
        verification: w.verification
          ? { outcome: w.verification.outcome.replace(/_/g, ' '), at: utc(w.verification.at), newItems: w.verification.newItems.length }
          : null,
        rsscloud:
          cloud && (cloud.subscribers > 0 || cloud.delivered + cloud.failed > 0)
            ? {
                subscribers: cloud.subscribers,
                delivered: cloud.delivered,
                failed: cloud.failed,
                dropped: cloud.dropped,
                recent: cloud.recent.map(
                  (r) =>
                    `${utc(r.at)} UTC ${r.ok ? 'delivered' : 'failed'}${r.status !== null ? ` (HTTP ${r.status})` : r.error ? ` (${r.error})` : ''}`,
                ),
              }
            : null,
      },
      appears: appearances(w, listing, Date.now(), listedOnlyVerified, unlisted),
      pings: pingRows(pings, refusals, listedOnlyVerified, unlisted !== null),
    });
  });

  app.get('/status', { schema: { querystring: NoQuery } }, async (req, reply) => {
    reply.header('cache-control', 'no-store');
    let stats;
    try {
      stats = await app.stats.snapshot('1h');
    } catch (err) {
      req.log.warn({ err: { message: (err as Error).message } }, 'status page: statistics unavailable');
      return reply.code(503).header('retry-after', '10').view('unavailable', {
        title: 'Status unavailable',
        description: DESCRIPTION.status,
        message:
          'The database did not answer, so the statistics cannot be read. Pings are refused with a clear answer meanwhile; this page will work again once the database is back.',
      });
    }
    return reply.view('status', {
      title: 'Status',
      description: DESCRIPTION.status,
      stats,
      verifyOff: config.VERIFY_PINGS === 'off',
      styles: ['uPlot.min.css'],
      scripts: ['uPlot.iife.min.js', 'status.js'],
    });
  });
}
