// Owns GET /stream/info's document: what a consumer needs to know before it connects (NIP-11's
// `limitation`, Jetstream's status page): the ends of the kept log, retention, the timings, the parameters
// and their caps, the connections open against the cap, and the slow-consumer rule, with its schema. A pure
// function of the settings and what the hub and the database report.
import { Type, type Static } from '@sinclair/typebox';
import { EVENT_TYPES, FILTER_CAPS, STREAM_METHODS, STREAM_OUTCOMES, STREAM_PARAMETERS } from './events.js';
import type { LogEnd } from './event-repository.js';

/** The configuration the stream publishes (from src/platform/config.ts). */
export interface StreamSettings {
  maxClients: number;
  bufferBytes: number;
  heartbeatMs: number;
  retryMs: number;
  cursorMs: number;
  slowFloorBytesPerSecond: number;
  slowWindowMs: number;
  replayPage: number;
  replayConcurrency: number;
  replayRowsPerSecond: number;
  replayBytesPerSecond: number;
  /** RETENTION_DAYS (0: kept forever). */
  retentionDays: number;
}

/** What the database says about the log's ends. */
export interface LogState {
  oldest: LogEnd | null;
  newest: LogEnd | null;
  /** The latest position handed out (a ping's or a verification's). */
  latest: number;
  /** The highest position retention deleted. */
  prunedThrough: number;
}

const End = Type.Union([Type.Object({ position: Type.Integer(), time: Type.Union([Type.String(), Type.Null()]) }), Type.Null()]);
const Values = Type.Array(Type.String());

export const StreamInfo = Type.Object({
  oldest: End,
  newest: End,
  prunedThrough: Type.Integer(),
  retentionDays: Type.Integer(),
  heartbeatMs: Type.Integer(),
  retryMs: Type.Integer(),
  cursorMs: Type.Integer(),
  events: Values,
  parameters: Values,
  filters: Type.Object({
    host: Type.Object({ max: Type.Integer() }),
    tag: Type.Object({ max: Type.Integer() }),
    types: Values,
    method: Values,
    outcome: Values,
  }),
  clients: Type.Object({ max: Type.Integer(), open: Type.Integer(), replaying: Type.Integer() }),
  slowConsumer: Type.Object({
    bufferBytes: Type.Integer(),
    minBytesPerSecond: Type.Integer(),
    windowMs: Type.Integer(),
    rule: Type.String(),
  }),
  replay: Type.Object({ page: Type.Integer(), concurrency: Type.Integer(), rowsPerSecond: Type.Integer(), bytesPerSecond: Type.Integer() }),
});
export type StreamInfo = Static<typeof StreamInfo>;

/** Every event type a stream sends (`event:` names). */
export const STREAM_EVENTS = [...EVENT_TYPES, 'reset', 'live', 'refused'] as const;

export function streamInfo(s: StreamSettings, log: LogState, clients: { open: number; replaying: number }): StreamInfo {
  const kb = (b: number) => `${Math.round(b / 1024)} KiB`;
  return {
    oldest: log.oldest && { position: log.oldest.position, time: log.oldest.time?.toISOString() ?? null },
    newest: log.newest && { position: Math.max(log.latest, log.newest.position), time: log.newest.time?.toISOString() ?? null },
    prunedThrough: log.prunedThrough,
    retentionDays: s.retentionDays,
    heartbeatMs: s.heartbeatMs,
    retryMs: s.retryMs,
    cursorMs: s.cursorMs,
    events: [...STREAM_EVENTS],
    parameters: [...STREAM_PARAMETERS],
    filters: {
      host: { max: FILTER_CAPS.host },
      tag: { max: FILTER_CAPS.tag },
      types: [...EVENT_TYPES],
      method: [...STREAM_METHODS],
      outcome: [...STREAM_OUTCOMES],
    },
    clients: { max: s.maxClients, open: clients.open, replaying: clients.replaying },
    slowConsumer: {
      bufferBytes: s.bufferBytes,
      minBytesPerSecond: s.slowFloorBytesPerSecond,
      windowMs: s.slowWindowMs,
      rule:
        `A live connection with more than ${kb(s.bufferBytes)} waiting goes back to catching up from the database at its own pace. ` +
        `A connection is disconnected only when it is catching up with bytes waiting for it and reads less than ` +
        `${s.slowFloorBytesPerSecond} bytes/s over ${s.slowWindowMs / 1000} s; it resumes with Last-Event-ID.`,
    },
    replay: {
      page: s.replayPage,
      concurrency: s.replayConcurrency,
      rowsPerSecond: s.replayRowsPerSecond,
      bytesPerSecond: s.replayBytesPerSecond,
    },
  };
}
