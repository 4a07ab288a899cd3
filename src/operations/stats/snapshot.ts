// Owns the shape of GET /api/stats (its JSON Schema and the pure function that builds it from the stored
// minutes, this instance's unflushed tally and the other readings): columnar per-minute arrays, as the
// status page's charts (uPlot) take them.
import { Type, type Static } from '@sinclair/typebox';
import { MINUTE_MS, minuteOf, type SeriesCount } from './minute-tally.js';

export const WINDOWS = { '1h': 60, '24h': 24 * 60 } as const;
export type StatsWindow = keyof typeof WINDOWS;
export const isWindow = (w: string): w is StatsWindow => Object.hasOwn(WINDOWS, w);

/** Refusal reasons always present in the answer (a chart's legend does not jump when one first appears). */
export const REFUSALS = ['invalid', 'throttled', 'rate_limited', 'blocked', 'unavailable'] as const;

const SERIES = /^(accepted|refused:[a-z][a-z_]{0,31}|verification:[a-z][a-z_]{0,31})$/;

const Nullable = <T extends ReturnType<typeof Type.Number>>(t: T) => Type.Union([t, Type.Null()]);
const Counts = Type.Array(Type.Integer({ minimum: 0 }));

export const StatsReply = Type.Object({
  window: Type.Union([Type.Literal('1h'), Type.Literal('24h')]),
  generatedAt: Type.String({ format: 'date-time' }),
  bucketSeconds: Type.Literal(60),
  /** Start of each minute, in Unix seconds, oldest first; the last is the current (partial) minute. */
  minutes: Type.Array(Type.Integer()),
  accepted: Counts,
  /** Refused pings per minute by reason. */
  refused: Type.Record(Type.String(), Counts),
  /** Verification outcomes per minute (pings whose verification settled that minute). */
  verification: Type.Record(Type.String(), Counts),
  totals: Type.Object({
    accepted: Type.Integer(),
    refused: Type.Record(Type.String(), Type.Integer()),
    verification: Type.Record(Type.String(), Type.Integer()),
  }),
  /** This instance's intake latency per minute (bucket bounds, ms); null for a minute without pings. */
  latencyMs: Type.Object({ p50: Type.Array(Nullable(Type.Number())), p99: Type.Array(Nullable(Type.Number())) }),
  topHosts: Type.Array(Type.Object({ host: Type.String(), accepted: Type.Integer(), refused: Type.Integer() })),
  documents: Type.Array(
    Type.Object({
      path: Type.String(),
      name: Type.String(),
      renderedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
      ageSeconds: Type.Union([Type.Integer(), Type.Null()]),
      entries: Type.Union([Type.Integer(), Type.Null()]),
      renderMs: Type.Union([Type.Integer(), Type.Null()]),
    }),
  ),
  health: Type.Object({
    database: Type.Union([Type.Literal('postgres'), Type.Literal('pglite')]),
    ready: Type.Boolean(),
    reason: Type.Optional(Type.String()),
    pingQueue: Type.Integer(),
    queues: Type.Array(
      Type.Object({
        name: Type.String(),
        depth: Type.Integer(),
        oldestAgeSeconds: Type.Number(),
        /** relay: waiting weblogs dropped because a target's queue held RELAY_QUEUE_MAX (the stalest first), in total. */
        dropped: Type.Optional(Type.Integer()),
        /** relay: pings not relayed to a target because the weblog was relayed to it within RELAY_LOOP_WINDOW, in total. */
        suppressed: Type.Optional(Type.Integer()),
        /** rsscloud: unexpired subscriptions. */
        subscriptions: Type.Optional(Type.Integer()),
        /** websub: deliveries this instance made (2xx) over the last minute; rsscloud: notifications delivered in the last minute (from every instance). */
        perMinute: Type.Optional(Type.Integer()),
      }),
    ),
  }),
  /** The spam filter: its mode (SPAM_FILTER) and how many weblogs are held out of the documents now. */
  spam: Type.Object({ filter: Type.Union([Type.Literal('off'), Type.Literal('mark'), Type.Literal('hold')]), held: Type.Integer() }),
  recent: Type.Array(
    Type.Object({ id: Type.Integer(), receivedAt: Type.String(), method: Type.String(), name: Type.String(), url: Type.String() }),
  ),
  uptimeSeconds: Type.Integer(),
});
export type StatsReply = Static<typeof StatsReply>;

export interface SnapshotInputs {
  window: StatsWindow;
  now: number;
  /** Stored counts of the window's minutes, and this instance's not yet flushed. */
  counts: readonly SeriesCount[];
  latency: { p50: (number | null)[]; p99: (number | null)[] };
  topHosts: StatsReply['topHosts'];
  documents: StatsReply['documents'];
  health: StatsReply['health'];
  spam: StatsReply['spam'];
  recent: StatsReply['recent'];
  uptimeSeconds: number;
}

/** The window's minutes, oldest first, ending with the current one. */
export function windowMinutes(window: StatsWindow, now: number): { from: number; to: number } {
  const to = minuteOf(now);
  return { from: to - (WINDOWS[window] - 1) * MINUTE_MS, to };
}

export function buildSnapshot(i: SnapshotInputs): StatsReply {
  const { from, to } = windowMinutes(i.window, i.now);
  const size = WINDOWS[i.window];
  const zeros = () => new Array<number>(size).fill(0);
  const accepted = zeros();
  const refused: Record<string, number[]> = Object.fromEntries(REFUSALS.map((r) => [r, zeros()]));
  const verification: Record<string, number[]> = {};
  // Own properties only: a name like "constructor" is a new series, not Object's.
  const own = (r: Record<string, number[]>, k: string) => (Object.hasOwn(r, k) ? r[k] : (r[k] = zeros()));
  for (const c of i.counts) {
    // Series names become object keys: only plain names (our own reasons and outcomes) are taken.
    if (c.minute < from || c.minute > to || !SERIES.test(c.series)) continue;
    const at = (c.minute - from) / MINUTE_MS;
    if (c.series === 'accepted') accepted[at] += c.n;
    else if (c.series.startsWith('refused:')) own(refused, c.series.slice(8))[at] += c.n;
    else if (c.series.startsWith('verification:')) own(verification, c.series.slice(13))[at] += c.n;
  }
  const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);
  const sums = (r: Record<string, number[]>) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, sum(v)]));
  const minutes = Array.from({ length: size }, (_, k) => (from + k * MINUTE_MS) / 1000);
  return {
    window: i.window,
    generatedAt: new Date(i.now).toISOString(),
    bucketSeconds: 60,
    minutes,
    accepted,
    refused,
    verification,
    totals: { accepted: sum(accepted), refused: sums(refused), verification: sums(verification) },
    latencyMs: i.latency,
    topHosts: i.topHosts,
    documents: i.documents,
    health: i.health,
    spam: i.spam,
    recent: i.recent,
    uptimeSeconds: i.uptimeSeconds,
  };
}
