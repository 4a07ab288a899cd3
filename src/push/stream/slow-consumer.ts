// Owns the slow-consumer rule: when a connection that does not read is cut, measured by the bytes its
// client takes while the server waits on it.
import type { Subscriber } from './subscriber.js';

/**
 * The slow-consumer rule (Jetstream v2's): a connection is cut only when it is both behind (catching up
 * from the database with bytes waiting for it in this process: the server is waiting on the client, not
 * the other way round) and has read less than `floorBytesPerSecond` over a whole `windowMs` of being so.
 * A client that reads steadily over a slow link, however far behind, is never cut; one that stops reading
 * is, a window later. Memory stays bounded meanwhile: a live connection holds at most STREAM_BUFFER_BYTES
 * before it falls back to catching up, and catching up holds one read's events until the client takes them.
 */
export interface SlowConsumerRule {
  floorBytesPerSecond: number;
  windowMs: number;
}

/** Whether to cut: `samples` are the delivered-byte counts taken while the connection was behind, oldest first. */
export function tooSlow(
  samples: readonly { at: number; delivered: number }[],
  now: number,
  delivered: number,
  rule: SlowConsumerRule,
): boolean {
  if (samples.length === 0) return false;
  const first = samples[0];
  const span = now - first.at;
  if (span < rule.windowMs) return false;
  return ((delivered - first.delivered) * 1000) / span < rule.floorBytesPerSecond;
}

/**
 * One round of the rule for a connection (once a second): true when it must be cut; else its samples are
 * kept or cleared (a connection not behind has none).
 */
export function mustCut(s: Subscriber, now: number, rule: SlowConsumerRule): boolean {
  if (!s.catchingUp || s.sink.waiting === 0) {
    s.behind.length = 0;
    return false;
  }
  const delivered = s.sink.delivered;
  if (tooSlow(s.behind, now, delivered, rule)) return true;
  s.behind.push({ at: now, delivered });
  // Only the first sample at least a window old matters: keep the window, and one before it.
  while (s.behind.length > 1 && s.behind[1].at <= now - rule.windowMs) s.behind.shift();
  return false;
}
