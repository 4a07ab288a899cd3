// Owns the SQL of ping intake: the group-commit insert with its per-weblog throttle and the running total of
// accepted pings, and the lookups the rest of the service needs about weblogs and pings. Plain values in,
// plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import type { ValidPing } from './validate.js';
import { withContext } from '../../platform/errors.js';
import type { UrlScorer } from '../../spam/intake-score.js';

/** Scoring at intake (SPAM_FILTER is not off): the URL scorer and the hold rule a new weblog's row gets. */
export interface IntakeSpam {
  scorer: UrlScorer;
  hold: boolean;
  threshold: number;
}

/**
 * Held (transaction-scoped) by every transaction that hands out live-stream positions from the pings' id
 * sequence: the ping insert below and the stream's stamping of verification outcomes.
 */
export const EVENT_ORDER_LOCK = 0x70657673; // 'pevs'

/** Slots of ping_totals a batch spreads its increment over (migrations/009_ping_totals.sql makes 0–15). */
const PING_TOTAL_SLOTS = 16;

export type InsertOutcome = { status: 'accepted'; id: number; receivedAt: Date } | { status: 'throttled'; lastPingAt: Date | null };

/**
 * One statement inserts a whole batch: new weblogs are created, known ones updated only when their last
 * accepted ping is at least `minIntervalSec` old (the throttle is decided by the row lock of the upsert,
 * so it holds across concurrent batches and instances), and a ping row is written for every weblog the
 * upsert touched. Callers must not pass two pings for one URL in a batch (ON CONFLICT cannot touch a row
 * twice in one statement). Results come back in input order.
 *
 * The statement reads weblogs only through the upsert's unique index, so its plan does not depend on the
 * table's size: it is prepared once per connection and its cached generic plan (made when the table may
 * still be empty) stays right. Issue #7 measured a former variant whose generic plan scanned `weblogs`
 * sequentially: PostgreSQL's CPU per ping grew with the table, 60 → 400 µs.
 *
 * With `queueVerification`, each accepted ping's verification job is written by the same statement. Every
 * batch also adds the number of pings it accepted to the running total (ping_totals, see totalPings()).
 *
 * Ping ids are the live stream's positions, and a stream reader takes "every row after the last id I saw":
 * that is only gap-free if ids become visible in id order. Two batches committing at once could make id
 * 101 visible before 100 (a reader would pass 100 for good), so every transaction that draws from the
 * pings' sequence holds EVENT_ORDER_LOCK (transaction-scoped) from before its first id until its commit.
 * It is taken after the weblog upserts, once their row locks are held: a batch waiting on a weblog row
 * (another batch, the verifier recording an outcome) waits without it, so it holds up no other batch, and
 * a holder never waits for a row lock, so nothing deadlocks on it. It is held only for inserting the ping
 * rows and the commit; batches overlap up to there (REGRESSION: taken first, one batch stuck on a row lock
 * stalled every other batch behind the lock).
 */
export const INSERT_BATCH = `
with input as (
  select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $11::float8[], $12::text[], $15::text[])
    as t(method, name, url, changes_url, rss_url, tags, client_addr, user_agent, spam_score, spam_reasons, spam_site)
),
up as (
  insert into weblogs as w (url, name, changes_url, rss_url, first_ping_at, last_ping_at)
  select url, name, changes_url, rss_url, now(), now() from input
  on conflict (url) do update
    set name = excluded.name,
        changes_url = coalesce(excluded.changes_url, w.changes_url),
        rss_url = coalesce(excluded.rss_url, w.rss_url),
        last_ping_at = greatest(w.last_ping_at, excluded.last_ping_at),
        ping_count = w.ping_count + 1
    where $9::int = 0 or w.last_ping_at <= now() - make_interval(secs => $9::int)
  returning w.id, w.url
),
-- Counting up's rows makes the upsert (and its waits for row locks) finish before the lock is taken.
serial as materialized (
  select pg_advisory_xact_lock(${EVENT_ORDER_LOCK}) is null as locked from (select count(*) from up) n
),
ins as (
  insert into pings (weblog_id, received_at, method, name, url, changes_url, rss_url, tags, client_addr, user_agent)
  select up.id, now(), i.method, i.name, i.url, i.changes_url, i.rss_url, string_to_array(i.tags, '|'), i.client_addr, i.user_agent
  from input i join up on up.url = i.url cross join serial
  returning id, weblog_id, url, received_at
),
-- Verification's job, committed with the ping it is for (nothing acknowledged is lost, promised work
-- included); no row at all when verification is off.
job as (
  insert into ping_verifications (ping_id, weblog_id, received_at)
  select id, weblog_id, received_at from ins where $10::boolean
),
-- A new weblog's spam score (its URL's, src/spam/intake-score.ts), committed with its first ping, so no
-- render or stream reader sees the ping before the score: held at once under SPAM_FILTER=hold ($13) when
-- above the threshold ($14). A weblog scored already keeps its row (the conflict costs one probe of the
-- primary key); none is written under SPAM_FILTER=off (no score passed). Its site (siteOf, cached with the
-- score) is what the rescoring job (src/publishing/spam-rescorer.ts) counts siblings and address bursts by.
spam as (
  insert into weblog_spam (weblog_id, url, score, reasons, held, site)
  select up.id, up.url, i.spam_score, i.spam_reasons::jsonb, $13::boolean and i.spam_score > $14::float8, i.spam_site
  from input i join up on up.url = i.url where i.spam_score is not null
  on conflict (weblog_id) do nothing
),
-- The total of accepted pings (migrations/009_ping_totals.sql): this statement's ping rows are added to one
-- slot, so the counter commits (or not) with them. It reads ins, so it runs while EVENT_ORDER_LOCK is held:
-- batches already take turns there and never wait on a slot; a random slot keeps that true if it moves.
-- Nothing is written when every ping of the batch was throttled.
tally as (
  insert into ping_totals as t (slot, n)
  select floor(random() * ${PING_TOTAL_SLOTS})::smallint, count(*) from ins having count(*) > 0
  on conflict (slot) do update set n = t.n + excluded.n
)
-- The time as epoch milliseconds (a float8, read as a number): pg's parseDate of a timestamptz per row was
-- ~3 µs a ping (bench/results/evidence/2026-11-23-wrk.md); floor() truncates the microseconds as parseDate does.
select id, url, floor(extract(epoch from received_at) * 1000)::float8 as at_ms from ins`;

// The pings of a batch the upsert did not touch were throttled: when their weblog last took a ping (for
// the "ping again after" message). Only runs when a batch had some.
const LAST_PING_AT = 'select url, last_ping_at as at from weblogs where url = any($1::text[])';

export async function insertPingBatch(
  q: Queryable,
  pings: ValidPing[],
  minIntervalSec: number,
  queueVerification = false,
  spam: IntakeSpam | null = null,
): Promise<InsertOutcome[]> {
  const n = pings.length;
  const method: string[] = new Array(n);
  const name: string[] = new Array(n);
  const url: string[] = new Array(n);
  const changesUrl: (string | null)[] = new Array(n);
  const rssUrl: (string | null)[] = new Array(n);
  const tags: (string | null)[] = new Array(n);
  const clientAddr: (string | null)[] = new Array(n);
  const userAgent: (string | null)[] = new Array(n);
  const spamScore: (number | null)[] = new Array(n);
  const spamReasons: (string | null)[] = new Array(n);
  const spamSite: (string | null)[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const p = pings[i];
    method[i] = p.method;
    name[i] = p.name;
    url[i] = p.url;
    changesUrl[i] = p.changesUrl;
    rssUrl[i] = p.rssUrl;
    tags[i] = p.tags ? p.tags.join('|') : null;
    clientAddr[i] = p.clientAddr;
    userAgent[i] = p.userAgent;
    const v = spam?.scorer.score(p.url, p.name) ?? null;
    spamScore[i] = v?.score ?? null;
    spamReasons[i] = v?.reasons ?? null;
    spamSite[i] = v?.site ?? null;
  }
  const byUrl = new Map<string, InsertOutcome>();
  await withContext(`inserting a batch of ${n} pings failed`, async () => {
    // Named: prepared once per connection. Planning this statement cost more than executing it for a
    // batch of 20 (profiled: ~1.2 ms per batch).
    const rows = await q.query<{ id: number; url: string; at_ms: number }>(
      INSERT_BATCH,
      [
        method,
        name,
        url,
        changesUrl,
        rssUrl,
        tags,
        clientAddr,
        userAgent,
        minIntervalSec,
        queueVerification,
        spamScore,
        spamReasons,
        spam?.hold ?? false,
        spam?.threshold ?? 1,
        spamSite,
      ],
      {
        name: 'pingd_insert_ping_batch',
      },
    );
    for (const r of rows) byUrl.set(r.url, { status: 'accepted', id: Number(r.id), receivedAt: new Date(Number(r.at_ms)) });
    if (rows.length < n) {
      const throttled = url.filter((u) => !byUrl.has(u));
      for (const r of await q.query<{ url: string; at: Date }>(LAST_PING_AT, [throttled]))
        byUrl.set(r.url, { status: 'throttled', lastPingAt: new Date(r.at) });
    }
  });
  return pings.map((p) => byUrl.get(p.url) ?? { status: 'throttled', lastPingAt: null });
}

/** Whether a weblog is inside its throttle window now (read-only; the insert decides for real). */
export async function throttleState(
  q: Queryable,
  url: string,
  minIntervalSec: number,
): Promise<{ throttled: boolean; lastPingAt: Date | null }> {
  if (minIntervalSec <= 0) return { throttled: false, lastPingAt: null };
  const [r] = await withContext(`reading the throttle of ${url}`, () =>
    q.query<{ last_ping_at: Date; throttled: boolean }>(
      'select last_ping_at, last_ping_at > now() - make_interval(secs => $2::int) as throttled from weblogs where url = $1',
      [url, minIntervalSec],
    ),
  );
  return r ? { throttled: Boolean(r.throttled), lastPingAt: new Date(r.last_ping_at) } : { throttled: false, lastPingAt: null };
}
