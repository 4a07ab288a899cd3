// Owns the SQL of the open hour's appended gzip streams (render/open-hour-stream.ts): a stream's row, its
// compressed bytes in full chunks written once each, and reading them back for the renderings made from it.
// Deleting the streams no rendering names is pruneRenderings' (rendering-repository.ts).
import type { Queryable } from '../platform/db/database.js';
import { withContext } from '../platform/errors.js';
import { toBuffer } from './rendering-repository.js';

const store = <T>(what: string, fn: () => Promise<T>): Promise<T> => withContext(what, fn, 'PUBLISH_STORE_FAILED');

export async function createStream(q: Queryable, path: string): Promise<number> {
  return store(`starting the appended stream of ${path}`, async () => {
    const [r] = await q.query<{ id: number }>('insert into archive_streams (path) values ($1) returning id', [path]);
    return Number(r.id);
  });
}

export async function streamExists(q: Queryable, streamId: number): Promise<boolean> {
  return store(`looking for stream ${streamId}`, async () => {
    const rows = await q.query('select 1 from archive_streams where id = $1', [streamId]);
    return rows.length > 0;
  });
}

export async function insertStreamChunk(q: Queryable, streamId: number, seq: number, data: Buffer): Promise<void> {
  await store(`storing chunk ${seq} of stream ${streamId}`, () =>
    q.query('insert into archive_stream_chunks (stream_id, seq, data) values ($1, $2, $3)', [streamId, seq, data]),
  );
}

/** Chunks [fromSeq, toSeq] of a stream, in order. */
export async function readStreamChunks(q: Queryable, streamId: number, fromSeq: number, toSeq: number): Promise<Buffer[]> {
  return store(`reading stream ${streamId}`, async () => {
    const rows = await q.query<{ data: unknown }>(
      'select data from archive_stream_chunks where stream_id = $1 and seq >= $2 and seq <= $3 order by seq',
      [streamId, fromSeq, toSeq],
    );
    if (rows.length !== toSeq - fromSeq + 1) throw new Error(`chunks ${fromSeq}..${toSeq} of stream ${streamId} are missing (pruned)`);
    return rows.map((r) => toBuffer(r.data));
  });
}
