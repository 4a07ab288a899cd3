// Owns the SQL of publishing: reading what documents are rendered from (weblogs in a time window, pings
// of an hour, in keyset-paginated batches so memory stays flat), and storing renderings — their bytes in
// chunks per content coding, their delta cut points, and which rendering of each path is current.
// Plain values in, plain rows out; times cross the boundary as integer microseconds since the epoch.
import type { Queryable } from '../platform/db/database.js';

/** Stored bytes are split in chunks of this size: a big archive is streamed, never loaded whole. */
export const CHUNK_BYTES = 1 << 20;

export type Variant = 'identity' | 'gzip' | 'br' | 'dgzip' | 'dbr';

// Exact µs → timestamptz (integer arithmetic on the interval; to_timestamp(double) can be 1 µs off).
const TS = (n: number) => `(timestamptz 'epoch' + $${n}::bigint * interval '1 microsecond')`;
const US = (col: string) => `(extract(epoch from ${col}) * 1000000)::bigint`;

class StoreError extends Error {
  readonly code = 'PUBLISH_STORE_FAILED';
}

async function run<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw new StoreError(`${what}: ${(err as Error).message}`, { cause: err });
  }
}

function toBuffer(v: unknown): Buffer {
  if (Buffer.isBuffer(v)) return v;
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  throw new StoreError(`expected bytea, got ${typeof v}`);
}

// ---------------------------------------------------------------------------------------------------------
// The clock and the horizon

export interface Clock {
  /** The database's clock, µs. */
  nowUs: number;
  /**
   * Just before (µs) the start of the oldest transaction still open on another pingd connection, if any. A
   * ping is stamped with its transaction's start time but becomes visible only at commit, so everything
   * stamped at or before this instant is already visible; later stamps may still appear. Null when no such
   * transaction is open (always on the embedded database: one session).
   */
  oldestOpenUs: number | null;
}

/** Transactions older than this are ignored (a stuck session must not hold every cursor back forever). */
export const HORIZON_MAX_LAG_US = 60_000_000;

export async function readClock(q: Queryable): Promise<Clock> {
  return run('reading the clock', async () => {
    const [r] = await q.query<{ now_us: number; oldest_us: number | null }>(
      `select ${US('clock_timestamp()')} as now_us,
              (select ${US('min(xact_start)')} from pg_stat_activity
                where datname = current_database() and pid <> pg_backend_pid() and xact_start is not null
                  and application_name = 'pingd') as oldest_us`,
    );
    const nowUs = Number(r.now_us);
    const oldest = r.oldest_us === null ? null : Number(r.oldest_us);
    // A ping stamped exactly at the oldest open start may be invisible still: the horizon is 1 µs before.
    return { nowUs, oldestOpenUs: oldest === null || oldest < nowUs - HORIZON_MAX_LAG_US ? null : Math.min(oldest - 1, nowUs) };
  });
}

/** Starts a read-only snapshot on a dedicated connection (server only), so a document is one consistent view. */
export async function beginSnapshot(q: Queryable): Promise<void> {
  await run('starting a snapshot', () => q.exec('begin isolation level repeatable read read only'));
}

export async function endSnapshot(q: Queryable, ok: boolean): Promise<void> {
  await run('ending a snapshot', () => q.exec(ok ? 'commit' : 'rollback'));
}

// ---------------------------------------------------------------------------------------------------------
// What documents are rendered from

/**
 * Refreshes the planner statistics of the tables documents are read from. The embedded database runs no
 * autovacuum: without statistics its planner sorts a whole hour for every page (quadratic: 16 s instead of
 * 1 s for 100k weblogs). The server's autovacuum does this by itself.
 */
export async function analyzeSources(q: Queryable): Promise<void> {
  await run('analyzing weblogs and pings', () => q.exec('analyze weblogs, pings'));
}

/** Total pings ever accepted (the `count` attribute of the live documents). */
export async function totalPings(q: Queryable): Promise<number> {
  return run('counting pings', async () => {
    const [r] = await q.query<{ n: number | null }>('select coalesce(sum(ping_count), 0)::bigint as n from weblogs');
    return Number(r.n ?? 0);
  });
}

export interface WindowStats {
  n: number;
  maxUs: number;
}

/** How many weblogs pinged last in (fromUs, toUs], and the latest such ping. */
export async function weblogWindowStats(q: Queryable, fromUs: number, toUs: number): Promise<WindowStats> {
  return run('reading the weblog window', async () => {
    const [r] = await q.query<{ n: number; max_us: number | null }>(
      `select count(*)::bigint as n, ${US('max(last_ping_at)')} as max_us
         from weblogs where last_ping_at > ${TS(1)} and last_ping_at <= ${TS(2)}`,
      [fromUs, toUs],
    );
    return { n: Number(r.n), maxUs: Number(r.max_us ?? 0) };
  });
}

export interface WeblogWindowRow {
  id: number;
  name: string;
  url: string;
  rss_url: string | null;
  changes_url: string | null;
  at_us: number;
}

/**
 * One page of the weblogs pinged last in (fromUs, toUs], newest first (last_ping_at desc, id desc), after
 * the keyset `after` (the last row of the previous page). Uses the last_ping_at index.
 */
export async function weblogWindowPage(q: Queryable, fromUs: number, toUs: number, after: { atUs: number; id: number } | null, limit: number): Promise<WeblogWindowRow[]> {
  return run('reading a page of weblogs', async () => {
    // The first page starts at toUs; later ones strictly after the previous page's last (time, id).
    const rows = await q.query<WeblogWindowRow>(
      `select id, name, url, rss_url, changes_url, ${US('last_ping_at')} as at_us from weblogs
        where last_ping_at > ${TS(1)} and last_ping_at <= ${TS(2)} and (last_ping_at < ${TS(2)} or id < $3)
        order by last_ping_at desc, id desc limit $4`,
      [fromUs, after ? after.atUs : toUs, after ? after.id : Number.MAX_SAFE_INTEGER, limit],
    );
    for (const r of rows) {
      r.id = Number(r.id);
      r.at_us = Number(r.at_us);
    }
    return rows;
  });
}

export interface HourStats {
  n: number;
  maxId: number;
}

/** Pings received in [startUs, endUs): how many, and the highest id (bounds the pages of one rendering). */
export async function hourStats(q: Queryable, startUs: number, endUs: number): Promise<HourStats> {
  return run('reading an hour of pings', async () => {
    const [r] = await q.query<{ n: number; max_id: number | null }>(
      `select count(*)::bigint as n, max(id) as max_id from pings where received_at >= ${TS(1)} and received_at < ${TS(2)}`,
      [startUs, endUs],
    );
    return { n: Number(r.n), maxId: Number(r.max_id ?? 0) };
  });
}

export interface PingPageRow {
  id: number;
  name: string;
  url: string;
  rss_url: string | null;
  at_us: number;
}

/** One page of the pings received in [startUs, endUs) with id <= maxId, oldest first (received_at, id). */
export async function hourPage(q: Queryable, startUs: number, endUs: number, maxId: number, after: { atUs: number; id: number } | null, limit: number): Promise<PingPageRow[]> {
  return run('reading a page of pings', async () => {
    const rows = await q.query<PingPageRow>(
      `select id, name, url, rss_url, ${US('received_at')} as at_us from pings
        where received_at >= ${TS(1)} and received_at < ${TS(2)} and id <= $3
          and (received_at > ${TS(1)} or id > $4)
        order by received_at, id limit $5`,
      [after ? after.atUs : startUs, endUs, maxId, after ? after.id : 0, limit],
    );
    for (const r of rows) {
      r.id = Number(r.id);
      r.at_us = Number(r.at_us);
    }
    return rows;
  });
}

/** The earliest ping still stored (µs), or null: where catching up on archive hours starts. */
export async function firstPingUs(q: Queryable): Promise<number | null> {
  return run('reading the first ping', async () => {
    const [r] = await q.query<{ us: number | null }>(`select ${US('min(received_at)')} as us from pings`);
    return r.us === null ? null : Number(r.us);
  });
}

/** Whether any ping was received in [startUs, endUs). */
export async function anyPingBetween(q: Queryable, startUs: number, endUs: number): Promise<boolean> {
  return run('probing an hour', async () => {
    const rows = await q.query(`select 1 from pings where received_at >= ${TS(1)} and received_at < ${TS(2)} limit 1`, [startUs, endUs]);
    return rows.length > 0;
  });
}

// ---------------------------------------------------------------------------------------------------------
// Renderings

export interface RenderingMeta {
  id: number;
  path: string;
  document: string;
  contentType: string;
  updatedMs: number;
  cursorUs: number;
  fingerprint: string;
  entries: number;
  closed: boolean;
  identityLength: number;
  identityStored: boolean;
  gzipLength: number;
  brLength: number;
  footer: Buffer;
  sha256: string;
  renderMs: number;
  createdUs: number;
}

interface RenderingRow {
  id: number;
  path: string;
  document: string;
  content_type: string;
  updated_ms: number;
  cursor_us: number;
  fingerprint: string;
  entries: number;
  closed: boolean;
  identity_length: number;
  identity_stored: boolean;
  gzip_length: number;
  br_length: number;
  footer: unknown;
  sha256: string;
  render_ms: number;
  created_us: number;
}

const RENDERING_COLS = `r.id, r.path, r.document, r.content_type, (extract(epoch from r.updated_at) * 1000)::bigint as updated_ms,
  r.cursor_us, r.fingerprint, r.entries, r.closed, r.identity_length, r.identity_stored, r.gzip_length, r.br_length,
  r.footer, r.sha256, r.render_ms, ${US('r.created_at')} as created_us`;

function toMeta(r: RenderingRow): RenderingMeta {
  return {
    id: Number(r.id),
    path: r.path,
    document: r.document,
    contentType: r.content_type,
    updatedMs: Number(r.updated_ms),
    cursorUs: Number(r.cursor_us),
    fingerprint: r.fingerprint,
    entries: Number(r.entries),
    closed: r.closed,
    identityLength: Number(r.identity_length),
    identityStored: r.identity_stored,
    gzipLength: Number(r.gzip_length),
    brLength: Number(r.br_length),
    footer: toBuffer(r.footer),
    sha256: r.sha256,
    renderMs: Number(r.render_ms),
    createdUs: Number(r.created_us),
  };
}

/** The rendering currently published at `path`, if any. */
export async function currentRendering(q: Queryable, path: string): Promise<RenderingMeta | undefined> {
  return run(`reading the current rendering of ${path}`, async () => {
    const [r] = await q.query<RenderingRow>(
      `select ${RENDERING_COLS} from published_documents p join renderings r on r.id = p.rendering_id where p.path = $1`,
      [path],
    );
    return r ? toMeta(r) : undefined;
  });
}

export interface BaseRow {
  id: number;
  cursorUs: number;
}

/** Complete renderings of `path` with a cursor at or after `minCursorUs`, newest first: the delta bases. */
export async function recentRenderings(q: Queryable, path: string, minCursorUs: number, limit: number): Promise<BaseRow[]> {
  return run(`reading recent renderings of ${path}`, async () => {
    const rows = await q.query<{ id: number; cursor_us: number }>(
      `select id, cursor_us from renderings where path = $1 and complete and cursor_us >= $2
        order by cursor_us desc, id desc limit $3`,
      [path, minCursorUs, limit],
    );
    return rows.map((r) => ({ id: Number(r.id), cursorUs: Number(r.cursor_us) }));
  });
}

export interface NewRendering {
  path: string;
  document: string;
  contentType: string;
  updatedMs: number;
  cursorUs: number;
  fingerprint: string;
  closed: boolean;
}

/** Reserves a rendering (incomplete until completeRendering) so its chunks can be written as they come. */
export async function createRendering(q: Queryable, r: NewRendering): Promise<number> {
  return run(`creating a rendering of ${r.path}`, async () => {
    const [row] = await q.query<{ id: number }>(
      `insert into renderings (path, document, content_type, updated_at, cursor_us, fingerprint, closed)
       values ($1, $2, $3, timestamptz 'epoch' + $4::bigint * interval '1 millisecond', $5, $6, $7) returning id`,
      [r.path, r.document, r.contentType, r.updatedMs, r.cursorUs, r.fingerprint, r.closed],
    );
    return Number(row.id);
  });
}

export async function insertChunk(q: Queryable, renderingId: number, variant: Variant, seq: number, data: Buffer): Promise<void> {
  await run(`storing chunk ${seq} of ${variant} of rendering ${renderingId}`, () =>
    q.query('insert into rendering_chunks (rendering_id, variant, seq, data) values ($1, $2, $3, $4)', [renderingId, variant, seq, data]),
  );
}

/** Bytes [from, to) of a stored variant, as the chunks that hold them (the caller slices). */
export async function readChunks(q: Queryable, renderingId: number, variant: Variant, fromSeq: number, toSeq: number): Promise<Buffer[]> {
  return run(`reading ${variant} of rendering ${renderingId}`, async () => {
    const rows = await q.query<{ seq: number; data: unknown }>(
      'select seq, data from rendering_chunks where rendering_id = $1 and variant = $2 and seq >= $3 and seq <= $4 order by seq',
      [renderingId, variant, fromSeq, toSeq],
    );
    if (rows.length !== toSeq - fromSeq + 1) throw new Error(`chunks ${fromSeq}..${toSeq} of ${variant} are missing (the rendering was superseded and pruned)`);
    return rows.map((r) => toBuffer(r.data));
  });
}

export interface DeltaCut {
  baseId: number;
  baseCursorUs: number;
  /** Entries newer than the base's cursor (the delta's entries). */
  entries: number;
  identityEnd: number;
  gzipEnd: number;
  /** CRC-32 of identity bytes [0, identityEnd). */
  gzipCrc: number;
  brEnd: number;
}

export interface CompletedRendering {
  id: number;
  path: string;
  document: string;
  entries: number;
  closed: boolean;
  identityLength: number;
  identityStored: boolean;
  gzipLength: number;
  brLength: number;
  footer: Buffer;
  sha256: string;
  renderMs: number;
  deltas: DeltaCut[];
  /** For hourly archives: the hour's start (ms). */
  hourStartMs?: number;
}

/**
 * Marks a rendering complete, records its delta cut points and makes it the current rendering of its path,
 * in one transaction: every instance switches to it at once. The previous one is marked superseded.
 */
export async function completeRendering(db: { transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> }, c: CompletedRendering): Promise<void> {
  await run(`publishing rendering ${c.id} of ${c.path}`, () =>
    db.transaction(async (tx) => {
      await tx.query(
        `update renderings set complete = true, entries = $2, identity_length = $3, identity_stored = $4, gzip_length = $5,
           br_length = $6, footer = $7, sha256 = $8, render_ms = $9 where id = $1`,
        [c.id, c.entries, c.identityLength, c.identityStored, c.gzipLength, c.brLength, c.footer, c.sha256, Math.round(c.renderMs)],
      );
      if (c.deltas.length) {
        const cols: number[][] = [[], [], [], [], [], [], []];
        for (const d of c.deltas) {
          cols[0].push(d.baseId);
          cols[1].push(d.baseCursorUs);
          cols[2].push(d.entries);
          cols[3].push(d.identityEnd);
          cols[4].push(d.gzipEnd);
          cols[5].push(d.gzipCrc);
          cols[6].push(d.brEnd);
        }
        await tx.query(
          `insert into rendering_deltas (rendering_id, base_id, base_cursor_us, entries, identity_end, gzip_end, gzip_crc, br_end)
           select $1, * from unnest($2::bigint[], $3::bigint[], $4::int[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[])`,
          [c.id, ...cols],
        );
      }
      await tx.query(
        `update renderings set superseded_at = now()
          where id = (select rendering_id from published_documents where path = $1) and id <> $2`,
        [c.path, c.id],
      );
      await tx.query(
        `insert into published_documents (path, document, rendering_id, closed, hour_start)
         values ($1, $2, $3, $4, timestamptz 'epoch' + $5::bigint * interval '1 millisecond')
         on conflict (path) do update set document = excluded.document, rendering_id = excluded.rendering_id,
           closed = excluded.closed, hour_start = excluded.hour_start`,
        [c.path, c.document, c.id, c.closed, c.hourStartMs ?? null],
      );
    }),
  );
}

/** Removes a rendering that will not be published (failed, or identical to the current one). */
export async function discardRendering(q: Queryable, id: number): Promise<void> {
  await run(`discarding rendering ${id}`, () => q.query('delete from renderings where id = $1 and not exists (select 1 from published_documents where rendering_id = $1)', [id]));
}

/** Drops the bytes kept for a rendering when the identity coding turned out too big to store. */
export async function deleteVariant(q: Queryable, id: number, variant: Variant): Promise<void> {
  await run(`dropping ${variant} of rendering ${id}`, () => q.query('delete from rendering_chunks where rendering_id = $1 and variant = $2', [id, variant]));
}

/** The cut point of the delta from `baseId` to rendering `renderingId`, if one was recorded. */
export async function findDelta(q: Queryable, renderingId: number, baseId: number): Promise<DeltaCut | undefined> {
  return run(`reading a delta of rendering ${renderingId}`, async () => {
    const [r] = await q.query<{ base_id: number; base_cursor_us: number; entries: number; identity_end: number; gzip_end: number; gzip_crc: number; br_end: number }>(
      'select base_id, base_cursor_us, entries, identity_end, gzip_end, gzip_crc, br_end from rendering_deltas where rendering_id = $1 and base_id = $2',
      [renderingId, baseId],
    );
    if (!r) return undefined;
    return {
      baseId: Number(r.base_id),
      baseCursorUs: Number(r.base_cursor_us),
      entries: Number(r.entries),
      identityEnd: Number(r.identity_end),
      gzipEnd: Number(r.gzip_end),
      gzipCrc: Number(r.gzip_crc),
      brEnd: Number(r.br_end),
    };
  });
}

/** Paths of the hourly archives that are published and closed, among the given ones. */
export async function closedPaths(q: Queryable, paths: string[]): Promise<Set<string>> {
  return run('reading closed archives', async () => {
    const rows = await q.query<{ path: string }>('select path from published_documents where closed and path = any($1::text[])', [paths]);
    return new Set(rows.map((r) => r.path));
  });
}

// ---------------------------------------------------------------------------------------------------------
// Watermarks and housekeeping

export async function getWatermark(q: Queryable, name: string): Promise<number | null> {
  return run(`reading watermark ${name}`, async () => {
    const [r] = await q.query<{ us: number }>(`select ${US('at')} as us from publish_watermarks where name = $1`, [name]);
    return r ? Number(r.us) : null;
  });
}

export async function setWatermark(q: Queryable, name: string, us: number): Promise<void> {
  await run(`setting watermark ${name}`, () =>
    q.query(
      `insert into publish_watermarks (name, at) values ($1, ${TS(2)}) on conflict (name) do update set at = excluded.at`,
      [name, us],
    ),
  );
}

export interface PruneResult {
  bytesDropped: number;
  renderingsDropped: number;
}

/**
 * Superseded renderings lose their bytes after `graceSec` (responses still streaming them finish first) and
 * their row, which delta bases are looked up in, after `keepSec`. Renderings left incomplete by a crash
 * are removed after `graceSec` as well.
 */
export async function prune(q: Queryable, graceSec: number, keepSec: number): Promise<PruneResult> {
  return run('pruning renderings', async () => {
    const [dropped] = await q.query<{ n: number }>(
      `with gone as (
         delete from rendering_chunks c using renderings r
          where c.rendering_id = r.id
            and ((r.superseded_at is not null and r.superseded_at < now() - make_interval(secs => $1))
              or (not r.complete and r.created_at < now() - make_interval(secs => $1)))
         returning octet_length(c.data) as n)
       select coalesce(sum(n), 0)::bigint as n from gone`,
      [graceSec],
    );
    await q.query(
      `delete from rendering_deltas d using renderings r
        where d.rendering_id = r.id and r.superseded_at is not null and r.superseded_at < now() - make_interval(secs => $1)`,
      [graceSec],
    );
    const rows = await q.query(
      `delete from renderings r
        where ((r.superseded_at is not null and r.superseded_at < now() - make_interval(secs => $1))
            or (not r.complete and r.created_at < now() - make_interval(secs => $2)))
          and not exists (select 1 from published_documents p where p.rendering_id = r.id)
        returning id`,
      [keepSec, graceSec],
    );
    return { bytesDropped: Number(dropped.n), renderingsDropped: rows.length };
  });
}

// ---------------------------------------------------------------------------------------------------------
// Archive retention (called by the operations' retention pass, ARCHIVE_RETENTION_DAYS)

/** How many hourly archives hold an hour that started before `cutoff`. */
export async function countArchivesBefore(q: Queryable, cutoff: Date): Promise<number> {
  return run('counting old archives', async () => {
    const [r] = await q.query<{ n: number }>('select count(*)::bigint as n from published_documents where hour_start < $1', [cutoff]);
    return Number(r.n);
  });
}

/**
 * Deletes at most `limit` hourly archives whose hour started before `cutoff` (oldest first), with all their
 * renderings and bytes, in one statement; returns how many were deleted. They are then answered 404.
 */
export async function deleteArchivesBefore(q: Queryable, cutoff: Date, limit: number): Promise<number> {
  return run('deleting old archives', async () => {
    const rows = await q.query<{ path: string }>(
      `with doomed as (
         select path from published_documents where hour_start < $1 order by hour_start limit $2
       ), unpublished as (
         delete from published_documents p using doomed d where p.path = d.path returning p.path
       ), gone as (
         delete from renderings r using unpublished u where r.path = u.path returning r.id
       )
       select path from unpublished`,
      [cutoff, limit],
    );
    return rows.length;
  });
}
