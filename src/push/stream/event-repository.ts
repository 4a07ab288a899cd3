// Owns the SQL of the live stream: reading the events after a position (accepted pings and settled
// verifications, merged in position order), the columns and frames every read of events shares (a
// replay's reads are replay-repository.ts's), stamping settled verifications with their positions, the
// latest position, and the retention horizon. Plain values in, plain rows out.
import type { Db, Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';
import { EVENT_ORDER_LOCK } from '../../intake/ping/ping-repository.js';
import { notHeldId } from '../../spam/spam-repository.js';

export interface EventRow {
  type: 'ping' | 'verified';
  pos: number;
  pingId: number;
  url: string;
  tags: string[] | null;
  method: string | null;
  outcome: string | null;
  /** The weblog is held as spam (SPAM_FILTER=hold): sent only to connections that ask `?spam=include`. */
  held: boolean;
  /**
   * The event's frame as the database wrote it (`ping` events: PING_FRAME); null when it is formatted from
   * the fields below (`verified` events, events.ts's toStreamEvent), which the database then leaves null.
   */
  frame: string | null;
  name: string | null;
  changesUrl: string | null;
  rssUrl: string | null;
  receivedAt: Date | null;
  newItems: { title: string | null; link: string | null; guid: string | null }[] | null;
}

/** A row of the events' union as the database returns it (the replay reads share it). */
export interface RawRow {
  type: 'ping' | 'verified';
  pos: number;
  ping_id: number;
  name: string | null;
  url: string;
  changes_url: string | null;
  rss_url: string | null;
  tags: string[] | null;
  method: string | null;
  received_at: Date | null;
  outcome: string | null;
  new_items: unknown;
  held: boolean;
  frame: string | null;
}

/** JSON of a nullable column, as JSON.stringify writes it (to_json escapes strings as it does: tested). */
const json = (col: string) => `coalesce(to_json(${col})::text, 'null')`;
/**
 * A `ping` event's frame, written by the database: the bytes events.ts's toStreamEvent writes from the same
 * row (test/push/stream/event-frames.test.ts compares them on nasty input), `receivedAt` in
 * Date.toISOString()'s form (milliseconds, cut, not rounded, as the driver's Date is). Why here: in a 1M-ping
 * replay on PostgreSQL, parsing the row's columns into a Date and objects and formatting them took about
 * half of pingd's 11 µs of CPU per event; the database formats it on its own core, and pingd reads one
 * string. `pos` is the event's position (the ping's id, or its release under VERIFY_PINGS=require).
 */
export const pingFrame = (pos: string) =>
  `'id: ' || ${pos} || E'\\nevent: ping\\ndata: {"id":' || p.id || ',"name":' || ${json('p.name')} || ',"url":' || to_json(p.url)::text ||
   ',"changesUrl":' || ${json('p.changes_url')} || ',"rssUrl":' || ${json('p.rss_url')} || ',"tags":' || coalesce(to_json(p.tags)::text, '[]') ||
   ',"method":' || ${json('p.method')} || ',"receivedAt":"' || to_char(p.received_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"' ||
   case when h.held then ',"held":true' else '' end || E'}\\n\\n'`;
/** The columns of a `ping` event: what filters look at, and its frame (the other fields stay null). */
export const pingCols = (pos: string) => `p.id as ping_id, p.url, p.tags, p.method, h.held, ${pingFrame(pos)} as frame,
  null::text as name, null::text as changes_url, null::text as rss_url, null::timestamptz as received_at, null::text as outcome, null::jsonb as new_items`;
// A job's ping is looked up by (id, received_at), one row per job (LATERAL): the received_at picks its day
// partition when the statement runs; a plain join was planned as a hash join over every partition.
// `held`: one probe of weblog_spam's partial index of held weblogs per event (notHeldId, negated), once per
// row (pingCols reads it twice).
export const PING_HELD = `cross join lateral (select not ${notHeldId('p.weblog_id')} as held) h`;
const VERIFIED_HELD = `not ${notHeldId('v.weblog_id')} as held`;
/** A `verified` event's columns, in pingCols's order: formatted by toStreamEvent (frame null). */
export const VERIFIED_COLS = `v.ping_id, w.url, p.tags, null::text as method, ${VERIFIED_HELD}, null::text as frame,
  null::text as name, null::text as changes_url, null::text as rss_url, v.received_at, v.outcome, v.new_items`;

/** Where `verified` events come from: each settled verification, its weblog, and its ping's tags. */
export const VERIFIED_FROM = `from ping_verifications v join weblogs w on w.id = v.weblog_id left join lateral (select p.tags from pings p where p.id = v.ping_id and p.received_at = v.received_at limit 1) p on true`;
/**
 * Where `ping` events come from under VERIFY_PINGS=require: each released verification and its ping, looked
 * up by (id, received_at), one row per job (LATERAL, as above).
 */
export const RELEASED_FROM = `from ping_verifications v cross join lateral (select * from pings p where p.id = v.ping_id and p.received_at = v.received_at limit 1) p ${PING_HELD}`;

/** `verified` events: every settled verification, by its stamped position. */
const VERIFIED = `
  (select 'verified' as type, v.event_id as pos, ${VERIFIED_COLS}
     ${VERIFIED_FROM}
    where v.event_id > $1 order by v.event_id limit $2)`;

/**
 * Every event after `after`, in position order, at most `limit`. `ping` events are the pings themselves
 * (position = id), or under VERIFY_PINGS=require the verified pings at the position they were released at.
 * Each branch walks its own index from `after`, so a read costs the same however long the tables are.
 */
const EVENTS_AFTER = {
  listed: `select * from (
    (select 'ping' as type, p.id as pos, ${pingCols('p.id')} from pings p ${PING_HELD} where p.id > $1 order by p.id limit $2)
    union all ${VERIFIED}) e order by pos limit $2`,
  require: `select * from (
    (select 'ping' as type, v.release_id as pos, ${pingCols('v.release_id')}
       ${RELEASED_FROM}
      where v.release_id > $1 order by v.release_id limit $2)
    union all ${VERIFIED}) e order by pos limit $2`,
};

export type ReleaseRule = keyof typeof EVENTS_AFTER;

export const eventRow = (r: RawRow): EventRow => ({
  type: r.type,
  pos: Number(r.pos),
  pingId: Number(r.ping_id),
  url: r.url,
  tags: r.tags,
  method: r.method,
  outcome: r.outcome,
  held: Boolean(r.held),
  frame: r.frame,
  name: r.name,
  changesUrl: r.changes_url,
  rssUrl: r.rss_url,
  receivedAt: r.received_at === null ? null : new Date(r.received_at),
  newItems: r.new_items as EventRow['newItems'],
});

export async function eventsAfter(q: Queryable, rule: ReleaseRule, after: number, limit: number): Promise<EventRow[]> {
  return withContext(`reading stream events after ${after}`, async () => {
    const rows = await q.query<RawRow>(EVENTS_AFTER[rule], [after, limit], { name: `pingd_stream_events_${rule}` });
    return rows.map(eventRow);
  });
}

/**
 * The position just before the first ping received at or after `time` (the latest position when none is):
 * a stream started there sends every event from that time on. Positions are drawn in commit order and a
 * ping's time when its transaction started, so the two orders differ only among pings committed at about
 * the same moment: the least id among the first 1,000 pings by time covers them. Walks the received_at
 * index of the partitions from that day on.
 */
export async function positionBefore(q: Queryable, time: Date): Promise<number | null> {
  return withContext('finding the stream position of a time', async () => {
    const [r] = await q.query<{ pos: number | null }>(
      'select min(id) - 1 as pos from (select id from pings where received_at >= $1 order by received_at limit 1000) first',
      [time],
    );
    return r.pos === null ? null : Number(r.pos);
  });
}

/** An end of the kept log: a position and when its ping was received (null: no ping kept). */
export interface LogEnd {
  position: number;
  time: Date | null;
}

/** The oldest and newest ping still kept (ping positions: the ends of what a replay can send). */
export async function logEnds(q: Queryable): Promise<{ oldest: LogEnd | null; newest: LogEnd | null }> {
  return withContext('reading the ends of the stream log', async () => {
    const rows = await q.query<{ end: string; id: number; received_at: Date }>(
      `(select 'oldest' as end, id, received_at from pings order by id limit 1)
       union all (select 'newest' as end, id, received_at from pings order by id desc limit 1)`,
    );
    const end = (which: string): LogEnd | null => {
      const r = rows.find((x) => x.end === which);
      return r ? { position: Number(r.id), time: new Date(r.received_at) } : null;
    };
    return { oldest: end('oldest'), newest: end('newest') };
  });
}

/** The highest position handed out so far (0 on an empty database). */
export async function latestPosition(q: Queryable): Promise<number> {
  return withContext('reading the latest stream position', async () => {
    const [r] = await q.query<{ pos: number }>(
      // A release position is always drawn before its row's event position: the event ids bound both.
      `select greatest((select coalesce(max(id), 0) from pings),
                       (select coalesce(max(event_id), 0) from ping_verifications))::bigint as pos`,
    );
    return Number(r.pos);
  });
}

/** The pings' id sequence, which every stream position is drawn from (migrations/005_stream.sql, 011). */
const POSITIONS = `pg_get_serial_sequence('pings', 'id')::regclass`;
const LAST_POSITION = `coalesce(pg_sequence_last_value(${POSITIONS}), 0)::bigint`;

/**
 * Raises the positions' sequence to `to` when its last value is below `seen` (a position this instance
 * knows was committed); returns the value it had, or null when it was not below. The first read takes no
 * lock: on the server the positions came from, the sequence is past every committed one, and nothing more
 * is done. The raise holds EVENT_ORDER_LOCK, which every transaction drawing from the sequence holds from
 * before its first draw to its commit, and reads the value again under it (the lock's row comes first:
 * the read is made from it): setval cannot take the sequence back under a concurrent nextval, and
 * instances raising at once leave it at the highest of their values. One statement each, so any
 * Queryable will do (Db.onConnect's connection, a pool).
 */
export async function raisePositions(q: Queryable, seen: number, to: number): Promise<number | null> {
  if (seen <= 0) return null;
  return withContext('raising the stream positions past those already seen', async () => {
    const [cur] = await q.query<{ was: number }>(`select ${LAST_POSITION} as was`);
    if (Number(cur.was) >= seen) return null;
    const [raised] = await q.query<{ was: number }>(
      `with locked as materialized (select pg_advisory_xact_lock($3) is null as l),
            cur as materialized (select ${LAST_POSITION} as was from locked)
       select was, setval(${POSITIONS}, $2::bigint) from cur where was < $1::bigint`,
      [seen, to, EVENT_ORDER_LOCK],
    );
    return raised ? Number(raised.was) : null;
  });
}

/** The highest position retention has deleted: resuming from before it may skip events. */
export async function prunedThrough(q: Queryable): Promise<number> {
  return withContext('reading the stream horizon', async () => {
    const [r] = await q.query<{ n: number }>('select pruned_through as n from stream_horizon');
    return Number(r?.n ?? 0);
  });
}

/**
 * Gives settled verifications their positions, oldest outcome first: a verified one first its released
 * `ping` position (used under VERIFY_PINGS=require), then every one its `verified` position. Outcomes are
 * committed by the verifier without EVENT_ORDER_LOCK (taking it there would stall intake behind fetch
 * bookkeeping, or deadlock with its weblog row locks); this short transaction takes it first, so positions
 * still become visible in order. Rows another stamper holds are skipped. Returns how many were stamped and
 * the highest position given (0 when none).
 */
export async function stampVerifications(db: Db, limit: number): Promise<{ stamped: number; last: number }> {
  return withContext('stamping verification outcomes with stream positions', async () => {
    // Most calls find nothing: answer those from the partial index, without the lock or a transaction.
    const [any] = await db.query<{ due: boolean }>(
      'select exists (select 1 from ping_verifications where outcome is not null and event_id is null) as due',
    );
    if (!any.due) return { stamped: 0, last: 0 };
    return db.transaction(async (tx) => {
      await tx.query('select pg_advisory_xact_lock($1) is null as locked', [EVENT_ORDER_LOCK]);
      const rows = await tx.query<{ ping_id: number; verified: boolean }>(
        `select ping_id, outcome = 'verified' as verified from ping_verifications
          where outcome is not null and event_id is null
          order by done_at, ping_id limit $1 for update skip locked`,
        [limit],
      );
      if (rows.length === 0) return { stamped: 0, last: 0 };
      const need = rows.reduce((n, r) => n + (r.verified ? 2 : 1), 0);
      const drawn = await tx.query<{ v: number }>(
        `select nextval(pg_get_serial_sequence('pings', 'id'))::bigint as v from generate_series(1, $1::int) order by 1`,
        [need],
      );
      const values = drawn.map((d) => Number(d.v));
      const ids: number[] = [];
      const release: (number | null)[] = [];
      const event: number[] = [];
      let i = 0;
      for (const r of rows) {
        ids.push(Number(r.ping_id));
        release.push(r.verified ? values[i++] : null);
        event.push(values[i++]);
      }
      await tx.query(
        `update ping_verifications v set release_id = u.r, event_id = u.e
           from unnest($1::bigint[], $2::bigint[], $3::bigint[]) as u(ping_id, r, e) where v.ping_id = u.ping_id`,
        [ids, release, event],
      );
      return { stamped: rows.length, last: values[values.length - 1] };
    });
  });
}
