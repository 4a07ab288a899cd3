// Owns the live stream as a Fastify resource (`app.stream`): the hub, what wakes it (pings this instance
// accepted, outcomes the verifier committed, other instances' notifications, a safety poll), stamping
// outcomes with positions, the NOTIFY that tells other instances, its metrics, and closing every connection
// cleanly on shutdown.
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { randomBytes } from 'node:crypto';
import { Counter, Gauge } from 'prom-client';
import type { Config } from '../../platform/config.js';
import { coalesced } from '../../platform/coalesce.js';
import { raisePositions, stampVerifications } from './event-repository.js';
import { StreamHub } from './hub.js';
import { streamRoutes } from './routes.js';
import type { ResponseSink } from './sink.js';

declare module 'fastify' {
  interface FastifyInstance {
    stream: StreamHub;
  }
}

/** The PostgreSQL channel carrying "something new up to position N" between instances. */
export const STREAM_CHANNEL = 'pingd_stream';
/**
 * Safety poll: a notification lost while a listening connection reconnected, or an instance killed between
 * its commit and its NOTIFY, costs at most this much delay.
 */
const POLL_MS = 1000;
/**
 * Least time between two NOTIFYs of one instance. Measured (npm run bench, ping on PostgreSQL, alternating
 * runs): a NOTIFY per committed batch cost ~50 µs of pingd CPU and ~20 µs of the server's per ping; one
 * per 10 ms still ~8 µs of the server's; one per second none measurable. 25 ms keeps it to a few µs and
 * adds at most that to the latency other instances' streams see.
 */
const NOTIFY_GAP_MS = 25;
/**
 * STREAM_REPLAY_ROWS_PER_SECOND when unset, per backend. Measured with bench/lib/stream-replay-cases.ts
 * (1M stored pings, `?since=0` to 1 and to 50 clients, intake at 20/s): on PostgreSQL its server formats
 * each ping's frame and joins a window's frames (replay-repository.ts), and pingd spends ~4.3 µs of CPU per
 * replayed event, writing included, so a lone replay reads ~155,000-160,000 rows a second (2026-11-30):
 * 300,000 leaves it unpaced; 50 replays at once share their windows and read 2-3.4M rows in all. On the
 * embedded database the reads run in pingd's process, in the session intake uses (~16 µs per event): 30,000,
 * ~25,000 events a second.
 */
const REPLAY_ROWS_PER_SECOND = { postgres: 300_000, pglite: 30_000 } as const;
/** Outcomes stamped per statement. */
const STAMP_BATCH = 1000;
/**
 * How far past the highest position this instance has seen the sequence is raised on a server that is
 * behind it (raisePositions, below): room for the positions other instances committed and streamed that
 * this one was not yet told of when the primary died. They tell each other at most every NOTIFY_GAP_MS
 * (25 ms); 10,000 positions is over a second at the most one PostgreSQL took here (7,791 pings/s, README).
 * A jump costs nothing: clients take ids as they come, and a replay passes an empty window in one read.
 */
const POSITION_MARGIN = 10_000;

async function streamPlugin(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;
  const instance = randomBytes(6).toString('hex');
  const connections = new Set<ResponseSink>();
  let closing = false;

  const eventsRead = new Counter({
    name: 'pingd_stream_events_read_total',
    help: 'Events the stream hub read from the database for its live connections.',
    registers: [app.metrics],
  });
  const dropped = new Counter({
    name: 'pingd_stream_disconnects_total',
    help: 'Stream connections this server ended: slow (the slow-consumer rule: behind and reading below STREAM_SLOW_MIN_BYTES_PER_SECOND for STREAM_SLOW_WINDOW_MS), refused (beyond STREAM_MAX_CLIENTS: a 200 stream that ends with retry:).',
    labelNames: ['reason'] as const,
    registers: [app.metrics],
  });
  dropped.inc({ reason: 'slow' }, 0);
  dropped.inc({ reason: 'refused' }, 0);
  const replayRead = new Counter({
    name: 'pingd_stream_replay_read_total',
    help: 'What stream replays read from the database: rows returned, positions covered (STREAM_REPLAY_ROWS_PER_SECOND paces them).',
    labelNames: ['what'] as const,
    registers: [app.metrics],
  });
  const fellBehind = new Counter({
    name: 'pingd_stream_fell_behind_total',
    help: 'Live stream connections that had STREAM_BUFFER_BYTES waiting and went back to catching up from the database.',
    registers: [app.metrics],
  });
  replayRead.inc({ what: 'rows' }, 0);
  replayRead.inc({ what: 'positions' }, 0);
  const replayRowsPerSecond = config.STREAM_REPLAY_ROWS_PER_SECOND ?? REPLAY_ROWS_PER_SECOND[app.db.kind];
  const hub = new StreamHub({
    db: app.db,
    rule: config.VERIFY_PINGS === 'require' ? 'require' : 'listed',
    replayPage: config.STREAM_REPLAY_PAGE,
    replayBytesPerSecond: config.STREAM_REPLAY_BYTES_PER_SECOND,
    replayConcurrency: config.STREAM_REPLAY_CONCURRENCY,
    replayRowsPerSecond: replayRowsPerSecond,
    replayCacheBytes: config.STREAM_REPLAY_CACHE_BYTES,
    slow: { floorBytesPerSecond: config.STREAM_SLOW_MIN_BYTES_PER_SECOND, windowMs: config.STREAM_SLOW_WINDOW_MS },
    onFellBehind: () => fellBehind.inc(),
    onCut: () => dropped.inc({ reason: 'slow' }),
    onRead: (n) => eventsRead.inc(n),
    onReplayRead: (rows, positions) => {
      replayRead.inc({ what: 'rows' }, rows);
      replayRead.inc({ what: 'positions' }, positions);
    },
    onError: (err) => app.log.warn({ err: { message: err.message } }, 'stream read failed; retried on the next event or poll'),
  });
  // Positions never go back, across a failover too (issue 41, item 4). With asynchronous replication the
  // promoted standby lacks the last pings the old primary committed, and its sequence resumes where its
  // copy was last logged (PostgreSQL logs a sequence 32 values ahead): below ids this instance already sent
  // for those pings. Pings stored after the promotion took those ids, and a client past them (live, or
  // resuming with Last-Event-ID) was never sent them: 0–16 acknowledged pings per run in the failover
  // bench with the standby's WAL 50 ms late, 88 with it 500 ms late
  // (bench/results/evidence/2026-11-28-failover-async-500.md). So every new connection, before it serves
  // anything, raises the sequence past the highest position this instance knows (hub.highest) when the
  // server is behind it. Writes reach a new primary only through new connections (those to the old one
  // died with it), so nothing is stored there under an id already sent. The renderer, which follows ping
  // ids in memory too, reads only committed ones, which this instance wrote or was told of: the same raise
  // covers it. On the server the positions came from, the sequence is past them all: one read per new
  // connection, nothing written.
  // The embedded database has no onConnect: its one session never moves to another server.
  app.db.onConnect?.(async (q) => {
    const seen = hub.highest;
    const was = await raisePositions(q, seen, seen + POSITION_MARGIN);
    if (was !== null)
      app.log.warn(
        { was, seen, to: seen + POSITION_MARGIN },
        `the database's stream positions were behind those already seen (${was} < ${seen}: a standby promoted without the last pings?): raised to ${seen + POSITION_MARGIN}`,
      );
  });
  let shared = 0;
  new Counter({
    name: 'pingd_stream_replay_shared_total',
    help: "Replay windows a stream connection took from another connection's read (STREAM_REPLAY_CACHE_BYTES, or a read in flight) instead of reading them itself.",
    registers: [app.metrics],
    collect() {
      this.inc(hub.sharedWindows - shared);
      shared = hub.sharedWindows;
    },
  });
  new Gauge({
    name: 'pingd_stream_clients',
    help: 'Live stream connections served by this instance.',
    registers: [app.metrics],
    collect() {
      this.set(hub.size);
    },
  });
  new Gauge({
    name: 'pingd_stream_replays',
    help: "Stream connections catching up from the database: all of them (replaying), those waiting for their next read's turn (waiting).",
    labelNames: ['state'] as const,
    registers: [app.metrics],
    collect() {
      this.set({ state: 'replaying' }, hub.replaying);
      this.set({ state: 'waiting' }, hub.replayWaiting);
    },
  });

  // Other instances learn of new events by NOTIFY (a position, never the event: payloads and the queue are
  // bounded). Sent after the commit, outside intake's statement: a full notification queue must never
  // refuse a ping. One in flight at a time; positions arriving meanwhile go in the next.
  let highest = 0;
  let notified = 0;
  let notifiedAt = 0;
  const notify = coalesced(async () => {
    while (highest > notified) {
      const wait = notifiedAt + NOTIFY_GAP_MS - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      notifiedAt = performance.now();
      const pos = highest;
      await app.db.notify(STREAM_CHANNEL, `${instance}:${pos}`);
      notified = pos;
    }
  });
  const announce = (pos: number) => {
    hub.poke(pos);
    if (app.db.kind === 'pglite') return; // one process: the hub above is everyone
    highest = Math.max(highest, pos);
    notify().catch((err: Error) => app.log.warn({ err: { message: err.message } }, 'stream notify failed; other instances poll'));
  };

  const stamp = coalesced(async () => {
    for (;;) {
      const r = await stampVerifications(app.db, STAMP_BATCH);
      if (r.last > 0) announce(r.last);
      if (r.stamped < STAMP_BATCH) return;
    }
  });
  const stampSoon = () =>
    void stamp().catch((err: Error) => app.log.warn({ err: { message: err.message } }, 'stamping outcomes failed; retried by the poll'));

  app.pings.onOutcome((_m, r) => {
    if (r.ok) announce(r.id);
  });
  app.verification.onSettled(stampSoon);

  let timer: NodeJS.Timeout | undefined;
  let unlisten: (() => Promise<void>) | undefined;
  app.addHook('onReady', async () => {
    if (app.db.kind === 'postgres') {
      unlisten = await app.db.listen(
        STREAM_CHANNEL,
        (payload) => {
          const [from, pos] = payload.split(':');
          if (from !== instance) hub.poke(Number(pos) || undefined);
        },
        () => hub.poke(),
      );
    }
    timer = setInterval(() => {
      stampSoon();
      hub.poke();
      hub.tick();
    }, POLL_MS).unref();
  });

  await app.register(streamRoutes, {
    hub,
    settings: {
      maxClients: config.STREAM_MAX_CLIENTS,
      bufferBytes: config.STREAM_BUFFER_BYTES,
      heartbeatMs: config.STREAM_HEARTBEAT_MS,
      retryMs: config.STREAM_RETRY_MS,
      cursorMs: config.STREAM_CURSOR_MS,
      slowFloorBytesPerSecond: config.STREAM_SLOW_MIN_BYTES_PER_SECOND,
      slowWindowMs: config.STREAM_SLOW_WINDOW_MS,
      replayPage: config.STREAM_REPLAY_PAGE,
      replayConcurrency: config.STREAM_REPLAY_CONCURRENCY,
      replayRowsPerSecond,
      replayBytesPerSecond: config.STREAM_REPLAY_BYTES_PER_SECOND,
      retentionDays: config.RETENTION_DAYS,
    },
    connections,
    isClosing: () => closing,
    onRefused: () => dropped.inc({ reason: 'refused' }),
  });
  app.decorate('stream', hub);

  // Before the server stops listening: open streams would otherwise hold the close until they end.
  app.addHook('preClose', async () => {
    closing = true;
    clearInterval(timer);
    for (const c of connections) c.end();
    connections.clear();
    await hub.close();
  });
  app.addHook('onClose', async () => {
    clearInterval(timer);
    await unlisten?.();
    await stamp.idle();
    await notify.idle();
  });
}

export default fp(streamPlugin, { name: 'stream', dependencies: ['db', 'metrics', 'pings', 'verification'] });
