// Owns rescoring weblogs for spam in the background (issue 39): every SPAM_RESCORE_INTERVAL, under an
// advisory lock so one instance of many does it, the weblogs pinged or verified since the last run (a cursor
// over stream positions) get their evidence gathered by SQL (src/spam/evidence-repository.ts) and every
// family's score (scoreWeblog); `held` follows the score (a pin still wins), and when a `held` flips the
// listings' watermark moves in the same transaction, so every renderer drops its kept windows and its next
// render lists or drops the weblog. Intake keeps scoring a new weblog's URL with its first ping; from then
// on this job makes the score rise and fall. It lives in publishing because the watermark is publishing's.
import type { FastifyBaseLogger } from 'fastify';
import { setTimeout as sleep } from 'node:timers/promises';
import { inBackground, type Db } from '../platform/db/database.js';
import { gatherEvidence } from '../spam/evidence-repository.js';
import { rescoreCursor, rescoreTargets, writeRescores, type HoldRule, type Rescored } from '../spam/spam-repository.js';
import { scoreWeblog } from '../spam/score.js';
import { markArchiveHoursStale, touchWatermark, WEBLOG_REMOVALS_WATERMARK } from './rendering-repository.js';

/** Held by the instance that rescores (session-level, so a second instance skips its run). */
export const SPAM_RESCORE_LOCK = 0x73636f72; // 'scor'

/** On the embedded database, the pause after a batch, as a multiple of the time the batch took. */
export const PGLITE_YIELD = 2;

/** Batches one run does at most: a backlog (a first run over an old database) is worked off over runs. */
export const MAX_BATCHES_PER_RUN = 20;

export type RescoreRun =
  | { ran: true; weblogs: number; batches: number; flipped: number; complete: boolean; ms: number }
  | { ran: false; reason: 'locked' | 'busy' | 'closed' };

export interface RescorerOptions {
  db: Db;
  log: FastifyBaseLogger;
  rule: HoldRule;
  /** Weblogs per batch (SPAM_RESCORE_BATCH). */
  batch: number;
  maxBatches?: number;
}

export class SpamRescorer {
  private running: Promise<RescoreRun> | undefined;
  private closed = false;

  constructor(private readonly opts: RescorerOptions) {}

  /** One run now (what the schedule runs): at most maxBatches batches; `complete` when it caught up. */
  runOnce(): Promise<RescoreRun> {
    if (this.closed) return Promise.resolve({ ran: false, reason: 'closed' });
    if (this.running) return Promise.resolve({ ran: false, reason: 'busy' });
    this.running = this.run().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** Stops after the batch in progress. */
  async close(): Promise<void> {
    this.closed = true;
    await this.running?.catch(() => undefined);
  }

  private async run(): Promise<RescoreRun> {
    const { db, rule, batch } = this.opts;
    const maxBatches = this.opts.maxBatches ?? MAX_BATCHES_PER_RUN;
    const started = performance.now();
    // Background work: on the embedded database intake's statements go first.
    const r = await inBackground(() =>
      db.withTryAdvisoryLock(SPAM_RESCORE_LOCK, async (q) => {
        let weblogs = 0;
        let flipped = 0;
        let batches = 0;
        let complete = false;
        while (batches < maxBatches && !this.closed) {
          const through = await rescoreCursor(q);
          const t = await rescoreTargets(q, through, batch);
          if (t.last === through) {
            complete = true;
            break;
          }
          batches++;
          const b0 = performance.now();
          const gathered = await gatherEvidence(q, t.weblogIds);
          const rows: Rescored[] = gathered.map((g) => {
            const v = scoreWeblog(g.evidence);
            return { weblogId: g.weblogId, score: v.score, reasons: v.reasons, site: g.site };
          });
          // The scores, the cursor and the watermark in one transaction: a renderer that sees a flip sees
          // the watermark move.
          const changed = await db.transaction(async (tx) => {
            const c = await writeRescores(tx, rule, rows, t.last);
            if (c.length > 0) {
              await touchWatermark(tx, WEBLOG_REMOVALS_WATERMARK);
              // Their earlier hours' archives too: the renderer renders them again a few per tick.
              await markArchiveHoursStale(tx, c);
            }
            return c;
          });
          weblogs += rows.length;
          flipped += changed.length;
          // The embedded database is one session: intake waits behind each of this job's statements. After
          // a batch it gets the session back for twice as long as the batch held it (a flood's backlog of
          // one domain cost ~1-6 s a batch, and intake fell from ~8,000 to under 1,000 pings/s meanwhile).
          if (db.kind === 'pglite' && !this.closed) await sleep(PGLITE_YIELD * (performance.now() - b0));
        }
        return { weblogs, flipped, batches, complete };
      }),
    );
    if (!r.ran) return { ran: false, reason: 'locked' };
    const out = { ran: true as const, ...r.value, ms: Math.round(performance.now() - started) };
    if (out.weblogs > 0) this.opts.log.info(out, 'spam rescoring run done');
    return out;
  }
}

/** Runs the rescorer every `intervalSec` (never overlapping); returns the stop function. */
export function scheduleRescoring(rescorer: SpamRescorer, intervalSec: number, log: FastifyBaseLogger): () => Promise<void> {
  const timer = setInterval(() => {
    rescorer
      .runOnce()
      .catch((err: Error) => log.warn({ err: { message: err.message } }, 'spam rescoring run failed; the next run goes on'));
  }, intervalSec * 1000);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await rescorer.close();
  };
}
