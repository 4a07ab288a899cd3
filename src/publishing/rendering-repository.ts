// Owns the SQL of renderings: their bytes in chunks per content coding, their delta cut points, which
// rendering of each path is current, the render watermarks, and removing superseded renderings and old
// hourly archives. Plain values in, plain rows out; times cross the boundary as integer microseconds.
import type { Queryable } from '../platform/db/database.js';
import { tsParam as TS, usOf as US } from '../platform/db/sql-time.js';
import { withContext } from '../platform/errors.js';

/** Stored bytes are split in chunks of this size: a big archive is streamed, never loaded whole. */
export const CHUNK_BYTES = 1 << 20;

export type Variant = 'identity' | 'gzip' | 'br' | 'dgzip' | 'dbr';

/** Store work, its failure wrapped with what was being done. */
const store = <T>(what: string, fn: () => Promise<T>): Promise<T> => withContext(what, fn, 'PUBLISH_STORE_FAILED');

export function toBuffer(v: unknown): Buffer {
  if (Buffer.isBuffer(v)) return v;
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  throw new TypeError(`expected bytea, got ${typeof v}`);
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
  /** Made from the open hour's appended gzip stream (open-hour-stream.ts): where its gzip bytes are. */
  stream: StreamRef | null;
}

/** A rendering's gzip is its own bytes [0, headLength), the stream's first `chunks` chunks, then the rest of its own. */
export interface StreamRef {
  id: number;
  chunks: number;
  headLength: number;
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
  stream_id: number | null;
  stream_chunks: number;
  gzip_head_length: number;
}

const RENDERING_COLS = `r.id, r.path, r.document, r.content_type, (extract(epoch from r.updated_at) * 1000)::bigint as updated_ms,
  r.cursor_us, r.fingerprint, r.entries, r.closed, r.identity_length, r.identity_stored, r.gzip_length, r.br_length,
  r.footer, r.sha256, r.render_ms, ${US('r.created_at')} as created_us, r.stream_id, r.stream_chunks, r.gzip_head_length`;

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
    stream:
      r.stream_id === null ? null : { id: Number(r.stream_id), chunks: Number(r.stream_chunks), headLength: Number(r.gzip_head_length) },
  };
}

/** The rendering currently published at `path`, if any. */
export async function currentRendering(q: Queryable, path: string): Promise<RenderingMeta | undefined> {
  return store(`reading the current rendering of ${path}`, async () => {
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
  return store(`reading recent renderings of ${path}`, async () => {
    const rows = await q.query<{ id: number; cursor_us: number }>(
      `select id, cursor_us from renderings where path = $1 and complete and cursor_us >= $2
        order by cursor_us desc, id desc limit $3`,
      [path, minCursorUs, limit],
    );
    return rows.map((r) => ({ id: Number(r.id), cursorUs: Number(r.cursor_us) }));
  });
}

/** What a rendering is reserved with, before its bytes exist. */
export type NewRendering = Pick<RenderingMeta, 'path' | 'document' | 'contentType' | 'updatedMs' | 'cursorUs' | 'fingerprint' | 'closed'>;

/** Reserves a rendering (incomplete until completeRendering) so its chunks can be written as they come. */
export async function createRendering(q: Queryable, r: NewRendering): Promise<number> {
  return store(`creating a rendering of ${r.path}`, async () => {
    const [row] = await q.query<{ id: number }>(
      `insert into renderings (path, document, content_type, updated_at, cursor_us, fingerprint, closed)
       values ($1, $2, $3, timestamptz 'epoch' + $4::bigint * interval '1 millisecond', $5, $6, $7) returning id`,
      [r.path, r.document, r.contentType, r.updatedMs, r.cursorUs, r.fingerprint, r.closed],
    );
    return Number(row.id);
  });
}

export async function insertChunk(q: Queryable, renderingId: number, variant: Variant, seq: number, data: Buffer): Promise<void> {
  await store(`storing chunk ${seq} of ${variant} of rendering ${renderingId}`, () =>
    q.query('insert into rendering_chunks (rendering_id, variant, seq, data) values ($1, $2, $3, $4)', [renderingId, variant, seq, data]),
  );
}

/** Bytes [from, to) of a stored variant, as the chunks that hold them (the caller slices). */
export async function readChunks(q: Queryable, renderingId: number, variant: Variant, fromSeq: number, toSeq: number): Promise<Buffer[]> {
  return store(`reading ${variant} of rendering ${renderingId}`, async () => {
    const rows = await q.query<{ seq: number; data: unknown }>(
      'select seq, data from rendering_chunks where rendering_id = $1 and variant = $2 and seq >= $3 and seq <= $4 order by seq',
      [renderingId, variant, fromSeq, toSeq],
    );
    if (rows.length !== toSeq - fromSeq + 1)
      throw new Error(`chunks ${fromSeq}..${toSeq} of ${variant} are missing (the rendering was superseded and pruned)`);
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

/** What completing a rendering records: its results as RenderingMeta names them, and its delta cuts. */
export interface CompletedRendering extends Pick<
  RenderingMeta,
  | 'id'
  | 'path'
  | 'document'
  | 'entries'
  | 'closed'
  | 'identityLength'
  | 'identityStored'
  | 'gzipLength'
  | 'brLength'
  | 'footer'
  | 'sha256'
  | 'renderMs'
> {
  deltas: DeltaCut[];
  /** For hourly archives: the hour's start (ms). */
  hourStartMs?: number;
  stream?: StreamRef | null;
}

/**
 * Marks a rendering complete, records its delta cut points and makes it the current rendering of its path,
 * in one transaction: every instance switches to it at once. The previous one is marked superseded.
 */
export async function completeRendering(
  db: { transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> },
  c: CompletedRendering,
): Promise<void> {
  await store(`publishing rendering ${c.id} of ${c.path}`, () =>
    db.transaction(async (tx) => {
      await tx.query(
        `update renderings set complete = true, entries = $2, identity_length = $3, identity_stored = $4, gzip_length = $5,
           br_length = $6, footer = $7, sha256 = $8, render_ms = $9, stream_id = $10, stream_chunks = $11, gzip_head_length = $12
         where id = $1`,
        [
          c.id,
          c.entries,
          c.identityLength,
          c.identityStored,
          c.gzipLength,
          c.brLength,
          c.footer,
          c.sha256,
          Math.round(c.renderMs),
          c.stream?.id ?? null,
          c.stream?.chunks ?? 0,
          c.stream?.headLength ?? 0,
        ],
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
  await store(`discarding rendering ${id}`, () =>
    q.query('delete from renderings where id = $1 and not exists (select 1 from published_documents where rendering_id = $1)', [id]),
  );
}

/**
 * Every delta cut point recorded with rendering `renderingId`, by base id: a rendering has one per recent
 * base (at most PUBLISH_DELTA_WINDOW / the render cadence), so the whole set is small and read once.
 */
export async function deltasOf(q: Queryable, renderingId: number): Promise<Map<number, DeltaCut>> {
  return store(`reading the deltas of rendering ${renderingId}`, async () => {
    const rows = await q.query<{
      base_id: number;
      base_cursor_us: number;
      entries: number;
      identity_end: number;
      gzip_end: number;
      gzip_crc: number;
      br_end: number;
    }>('select base_id, base_cursor_us, entries, identity_end, gzip_end, gzip_crc, br_end from rendering_deltas where rendering_id = $1', [
      renderingId,
    ]);
    const out = new Map<number, DeltaCut>();
    for (const r of rows) {
      out.set(Number(r.base_id), {
        baseId: Number(r.base_id),
        baseCursorUs: Number(r.base_cursor_us),
        entries: Number(r.entries),
        identityEnd: Number(r.identity_end),
        gzipEnd: Number(r.gzip_end),
        gzipCrc: Number(r.gzip_crc),
        brEnd: Number(r.br_end),
      });
    }
    return out;
  });
}

// ---------------------------------------------------------------------------------------------------------
// Watermarks and housekeeping

/**
 * The renderer's mark: every hour before it has its archive closed (rendered for the last time). Retention
 * keeps the raw pings of later hours whatever their age, so an archive is never rendered from a pruned hour.
 */
export const ARCHIVES_CLOSED_WATERMARK = 'archives_closed_before';
/**
 * Moved whenever the operator removes or restores a weblog, or a weblog is held as spam or released after it
 * was listed (`pingd spam allow|deny|clear`, a start with another SPAM_FILTER or SPAM_THRESHOLD): a renderer (in any instance) that sees it move
 * drops the windows and the hour it keeps, which only ever add what new pings bring.
 */
export const WEBLOG_REMOVALS_WATERMARK = 'weblog_removals_changed';

export async function getWatermark(q: Queryable, name: string): Promise<number | null> {
  return store(`reading watermark ${name}`, async () => {
    const [r] = await q.query<{ us: number }>(`select ${US('at')} as us from publish_watermarks where name = $1`, [name]);
    return r ? Number(r.us) : null;
  });
}

/** Moves watermark `name` to the database's clock, and always forward: readers compare it for a change. */
export async function touchWatermark(q: Queryable, name: string): Promise<void> {
  await store(`moving watermark ${name}`, () =>
    q.query(
      `insert into publish_watermarks (name, at) values ($1, clock_timestamp())
       on conflict (name) do update set at = greatest(clock_timestamp(), publish_watermarks.at + interval '1 microsecond')`,
      [name],
    ),
  );
}

export async function setWatermark(q: Queryable, name: string, us: number): Promise<void> {
  await store(`setting watermark ${name}`, () =>
    q.query(`insert into publish_watermarks (name, at) values ($1, ${TS(2)}) on conflict (name) do update set at = excluded.at`, [
      name,
      us,
    ]),
  );
}

export interface RenderingPruneResult {
  bytesDropped: number;
  renderingsDropped: number;
}

/**
 * Superseded renderings lose their bytes after `graceSec` (responses still streaming them finish first) and
 * their row, which delta bases are looked up in, after `keepSec`. Renderings left incomplete (by a crash, or
 * a paced render given up) are removed after `incompleteSec`, as the slowest render still under way is
 * older (render/paced.ts: a slice per tick). An open hour's appended stream goes once no rendering names it
 * (older than `graceSec`: the renderer writes a new stream's first chunks before the rendering naming it).
 */
export async function pruneRenderings(
  q: Queryable,
  graceSec: number,
  keepSec: number,
  incompleteSec = graceSec,
): Promise<RenderingPruneResult> {
  return store('pruning renderings', async () => {
    const [dropped] = await q.query<{ n: number }>(
      `with gone as (
         delete from rendering_chunks c using renderings r
          where c.rendering_id = r.id
            and ((r.superseded_at is not null and r.superseded_at < now() - make_interval(secs => $1))
              or (not r.complete and r.created_at < now() - make_interval(secs => $2)))
         returning octet_length(c.data) as n)
       select coalesce(sum(n), 0)::bigint as n from gone`,
      [graceSec, incompleteSec],
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
      [keepSec, incompleteSec],
    );
    await q.query(
      `delete from archive_streams s
        where s.created_at < now() - make_interval(secs => $1)
          and not exists (select 1 from renderings r where r.stream_id = s.id)`,
      [graceSec],
    );
    return { bytesDropped: Number(dropped.n), renderingsDropped: rows.length };
  });
}

// ---------------------------------------------------------------------------------------------------------
// Archive retention (called by the operations' retention pass, ARCHIVE_RETENTION_DAYS)

/** How many hourly archives hold an hour that started before `cutoff`. */
export async function countArchivesBefore(q: Queryable, cutoff: Date): Promise<number> {
  return store('counting old archives', async () => {
    const [r] = await q.query<{ n: number }>('select count(*)::bigint as n from published_documents where hour_start < $1', [cutoff]);
    return Number(r.n);
  });
}

/**
 * Deletes at most `limit` hourly archives whose hour started before `cutoff` (oldest first), with all their
 * renderings and bytes, in one statement; returns how many were deleted. They are then answered 404.
 */
export async function deleteArchivesBefore(q: Queryable, cutoff: Date, limit: number): Promise<number> {
  return store('deleting old archives', async () => {
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

/**
 * Marks the finished hours holding pings of `weblogIds` as to be rendered again (archive_stale_hours): the
 * spam rescoring job, in the commit that held or released them. The open hour is rendered on every tick.
 */
export async function markArchiveHoursStale(q: Queryable, weblogIds: number[]): Promise<void> {
  if (weblogIds.length === 0) return;
  await store(`marking the archive hours of ${weblogIds.length} weblogs to render again`, () =>
    q.query(
      `insert into archive_stale_hours (hour)
       select distinct date_trunc('hour', p.received_at) from pings p
        where p.weblog_id = any($1::bigint[]) and p.received_at < date_trunc('hour', now())
       on conflict (hour) do nothing`,
      [weblogIds],
    ),
  );
}

/** The oldest-marked stale archive hours (ms since the epoch), at most `limit`. */
export async function staleArchiveHours(q: Queryable, limit: number): Promise<number[]> {
  return store('reading the archive hours to render again', async () => {
    const rows = await q.query<{ ms: number }>(
      `select floor(extract(epoch from hour) * 1000)::float8 as ms from archive_stale_hours order by marked_at, hour limit $1`,
      [limit],
    );
    return rows.map((r) => Number(r.ms));
  });
}

/** The hour was rendered again (or has no published archive to render). */
export async function clearStaleArchiveHour(q: Queryable, hourMs: number): Promise<void> {
  await store('clearing a stale archive hour', () =>
    q.query(`delete from archive_stale_hours where hour = to_timestamp($1::float8 / 1000.0)`, [hourMs]),
  );
}
