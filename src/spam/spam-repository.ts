// Owns the SQL of spam scores (migrations/024_spam.sql): the condition every listing read adds so that a
// held weblog is listed nowhere, setting `held` anew for a mode and threshold, the operator's pins, and what
// the pages and commands show. Intake's write of a new weblog's score is part of its batch statement
// (src/intake/ping/ping-repository.ts).
import type { Queryable } from '../platform/db/database.js';
import { withContext } from '../platform/errors.js';
import type { Reason } from './verdict.js';

/** SQL condition "the weblog whose id is `weblogIdCol` is not held" (the partial index holds only held rows). */
export const notHeldId = (weblogIdCol: string): string =>
  `not exists (select 1 from weblog_spam ws where ws.weblog_id = ${weblogIdCol} and ws.held)`;

/** The same by the weblog's URL, for rows that carry no weblog id (RSS Ping payloads' site_url). */
export const notHeldUrl = (urlCol: string): string => `not exists (select 1 from weblog_spam ws where ws.url = ${urlCol} and ws.held)`;

export type SpamPin = 'allow' | 'deny';

/** How held is decided: only under SPAM_FILTER=hold; a pin wins over the score. */
export interface HoldRule {
  hold: boolean;
  threshold: number;
}

/**
 * `held` as SQL, for a pin and a score given as SQL expressions, the rule's values as $1 (hold) and $2
 * (threshold): under hold, a deny pin, or no pin and a score above the threshold. The one statement of the
 * rule every write of `held` uses.
 */
const heldSql = (pinned: string, score: string): string =>
  `($1::boolean and (${pinned} is not distinct from 'deny' or (${pinned} is null and ${score} > $2::float8)))`;

/** `held` of a weblog_spam row. */
const HELD = heldSql('pinned', 'score');

/**
 * Sets `held` of every row by the rule (at start: the mode or threshold may have changed). Returns how many
 * rows changed: when some did, the caller moves the listings' watermark. One pass over the table, only
 * writing rows that change.
 */
export async function applyHoldRule(q: Queryable, rule: HoldRule): Promise<number> {
  const rows = await withContext('setting which weblogs are held', () =>
    q.query(`update weblog_spam set held = ${HELD} where held <> ${HELD} returning weblog_id`, [rule.hold, rule.threshold]),
  );
  return rows.length;
}

export interface WeblogSpam {
  weblogId: number;
  url: string;
  name: string | null;
  score: number;
  reasons: Reason[];
  held: boolean;
  pinned: SpamPin | null;
  scoredAt: Date;
}

interface Row {
  weblog_id: number;
  url: string;
  name: string | null;
  score: number;
  reasons: Reason[] | string;
  held: boolean;
  pinned: SpamPin | null;
  scored_at: Date;
}

const COLS = 's.weblog_id, s.url, w.name, s.score, s.reasons, s.held, s.pinned, s.scored_at';
const spamOf = (r: Row): WeblogSpam => ({
  weblogId: Number(r.weblog_id),
  url: r.url,
  name: r.name,
  score: Number(r.score),
  reasons: typeof r.reasons === 'string' ? (JSON.parse(r.reasons) as Reason[]) : r.reasons,
  held: Boolean(r.held),
  pinned: r.pinned,
  scoredAt: new Date(r.scored_at),
});

/** A score as `pingd spam show --json` and `pingd feeds show` print it. */
export function spamJson(s: WeblogSpam) {
  return {
    url: s.url,
    score: s.score,
    held: s.held,
    pinned: s.pinned,
    scoredAt: s.scoredAt.toISOString(),
    reasons: s.reasons.map((r) => ({ code: r.code, weight: r.weight, text: r.text })),
  };
}

/** The score of the weblog with this id; undefined when it was never scored (SPAM_FILTER=off). */
export async function spamOfWeblog(q: Queryable, weblogId: number): Promise<WeblogSpam | undefined> {
  const [r] = await withContext(`reading the spam score of weblog ${weblogId}`, () =>
    q.query<Row>(`select ${COLS} from weblog_spam s join weblogs w on w.id = s.weblog_id where s.weblog_id = $1`, [weblogId]),
  );
  return r && spamOf(r);
}

/** Scored weblogs, highest score first (only the held ones with `held`), at most `limit`. */
export async function listSpam(q: Queryable, opts: { held: boolean; limit: number }): Promise<WeblogSpam[]> {
  const rows = await withContext('listing spam scores', () =>
    q.query<Row>(
      `select ${COLS} from weblog_spam s join weblogs w on w.id = s.weblog_id
        where ($1::boolean is false or s.held) order by s.score desc, s.weblog_id limit $2`,
      [opts.held, opts.limit],
    ),
  );
  return rows.map(spamOf);
}

/** Whether the weblog is held now (one probe of the partial index of held weblogs). */
export async function isHeld(q: Queryable, weblogId: number): Promise<boolean> {
  const rows = await withContext(`reading whether weblog ${weblogId} is held`, () =>
    q.query('select 1 from weblog_spam where weblog_id = $1 and held', [weblogId]),
  );
  return rows.length > 0;
}

/** How many weblogs are held now (/status, /api/stats). */
export async function heldCount(q: Queryable): Promise<number> {
  const [r] = await withContext('counting held weblogs', () =>
    q.query<{ n: number }>('select count(*)::bigint as n from weblog_spam where held'),
  );
  return Number(r.n);
}

/**
 * Pins a weblog (or removes its pin with null) and sets its `held` by the rule; a weblog never scored (it
 * pinged under SPAM_FILTER=off) gets `score` as its first. Returns whether `held` changed.
 */
export async function pinWeblog(
  q: Queryable,
  w: { weblogId: number; url: string },
  pin: SpamPin | null,
  rule: HoldRule,
  first: { score: number; reasons: string },
): Promise<{ held: boolean; changed: boolean }> {
  const [r] = await withContext(`pinning the weblog ${w.url}`, () =>
    q.query<{ held: boolean; was: boolean | null }>(
      `with old as (select held from weblog_spam where weblog_id = $3),
       up as (
         insert into weblog_spam as s (weblog_id, url, score, reasons, pinned, held)
         values ($3, $4, $6::float8, $7::jsonb, $5::text, ${heldSql('$5::text', '$6::float8')})
         on conflict (weblog_id) do update
           set pinned = excluded.pinned,
               held = ${heldSql('excluded.pinned', 's.score')}
         returning held)
       select up.held, (select held from old) as was from up`,
      [rule.hold, rule.threshold, w.weblogId, w.url, pin, first.score, first.reasons],
    ),
  );
  return { held: Boolean(r.held), changed: r.was === null ? Boolean(r.held) : Boolean(r.was) !== Boolean(r.held) };
}

// ---------------------------------------------------------------------------------------------------------
// Rescoring (src/publishing/spam-rescorer.ts)

/**
 * The weblogs whose pings or settled verifications have stream positions after `through` (the job's cursor):
 * the oldest `limit` positions, their distinct weblogs, and the highest position read (`through` when
 * none). Positions come from the pings' sequence and become visible in order (EVENT_ORDER_LOCK), so a
 * cursor misses none.
 */
export async function rescoreTargets(q: Queryable, through: number, limit: number): Promise<{ weblogIds: number[]; last: number }> {
  const rows = await withContext('reading which weblogs to rescore', () =>
    q.query<{ weblog_id: number; pos: number }>(
      `select weblog_id, pos from (
         (select weblog_id, id as pos from pings where id > $1 order by id limit $2)
         union all
         (select weblog_id, event_id as pos from ping_verifications where event_id > $1 order by event_id limit $2)
       ) x order by pos limit $2`,
      [through, limit],
    ),
  );
  let last = through;
  const ids = new Set<number>();
  for (const r of rows) {
    ids.add(Number(r.weblog_id));
    last = Math.max(last, Number(r.pos));
  }
  return { weblogIds: [...ids], last };
}

export async function rescoreCursor(q: Queryable): Promise<number> {
  const [r] = await withContext('reading the rescoring cursor', () =>
    q.query<{ through: number }>('select through from spam_rescore_cursor'),
  );
  return Number(r?.through ?? 0);
}

export interface Rescored {
  weblogId: number;
  score: number;
  reasons: Reason[];
  site: string | null;
}

/**
 * Writes new scores (and a missing site), sets `held` by the rule (a pin still wins) and moves the cursor to
 * `through`, in one statement. Returns the weblogs whose `held` changed: when any did, the caller moves the
 * listings' watermark in the same transaction.
 */
export async function writeRescores(q: Queryable, rule: HoldRule, rows: Rescored[], through: number): Promise<number[]> {
  const changed = await withContext(`writing ${rows.length} spam scores`, () =>
    q.query<{ weblog_id: number }>(
      `with u as (select * from unnest($3::bigint[], $4::float8[], $5::text[], $6::text[]) as u(id, score, reasons, site)),
       up as (
         update weblog_spam s
            set score = u.score, reasons = u.reasons::jsonb, site = coalesce(s.site, u.site), scored_at = now(),
                held = ${heldSql('s.pinned', 'u.score')}
           from u, weblog_spam o
          where s.weblog_id = u.id and o.weblog_id = u.id
         returning s.weblog_id, s.held, o.held as was),
       cur as (update spam_rescore_cursor set through = greatest(through, $7::bigint), run_at = now())
       select weblog_id from up where held <> was`,
      [
        rule.hold,
        rule.threshold,
        rows.map((r) => r.weblogId),
        rows.map((r) => r.score),
        rows.map((r) => JSON.stringify(r.reasons)),
        rows.map((r) => r.site),
        through,
      ],
    ),
  );
  return changed.map((r) => Number(r.weblog_id));
}
