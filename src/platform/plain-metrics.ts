// Owns the counters and histograms of the hot paths (every request's latency, every published-document
// response, every ping's outcome): plain numbers per labelled series, counted without prom-client on the
// request path and published in prom-client's own exposition at scrape time (same names, labels, values).
//
// Why: prom-client 15 hashes and validates the label object on every inc()/observe(), even through a
// labels() child (histogram.js observe, counter.js inc): ~7 µs of a 304's ~130 µs under the profiler
// (bench/results/evidence/2026-11-23-wrk.md). Here a caller looks a series up once by a flat key and bumps numbers.
import type { Registry } from 'prom-client';

type LabelValues = Record<string, string | number>;

/** One prom-client sample as Registry.getMetricsAsString reads it (labels first, then the shared ones). */
interface Sample {
  labels: Record<string, string | number>;
  sharedLabels?: LabelValues;
  value: number;
  metricName?: string;
}

interface Exposed {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  values: Sample[];
  aggregator: 'sum';
}

/** What prom-client's Registry needs of a metric (registerMetric, metrics(), getMetricsAsJSON, resetMetrics). */
abstract class PlainMetric {
  readonly aggregator = 'sum' as const;
  abstract readonly type: 'counter' | 'histogram';

  constructor(
    readonly name: string,
    readonly help: string,
    registry: Registry,
  ) {
    registry.registerMetric(this as never);
  }

  protected abstract samples(splay: boolean): Sample[];

  /** Registry.metrics() formats this: buckets carry `le` first, then the series' labels (as prom-client does). */
  async getForPromString(): Promise<Exposed> {
    return { name: this.name, help: this.help, type: this.type, values: this.samples(false), aggregator: this.aggregator };
  }

  /** getMetricsAsJSON() reads this: labels merged into one object per sample. */
  async get(): Promise<Exposed> {
    return { name: this.name, help: this.help, type: this.type, values: this.samples(true), aggregator: this.aggregator };
  }

  abstract reset(): void;
}

/** One labelled series of a PlainCounter. */
export interface CounterSeries {
  readonly labels: LabelValues;
  value: number;
}

export class PlainCounter extends PlainMetric {
  readonly type = 'counter' as const;
  private series = new Map<string, CounterSeries>();

  /**
   * The series named by `key`, the caller's flat spelling of its labels (e.g. "ping accepted"), if it was
   * added: looked up per event by a string, never by hashing a label object.
   */
  find(key: string): CounterSeries | undefined {
    return this.series.get(key);
  }

  /** Adds the series `key` with its `labels` (in exposition order), at 0. */
  add(key: string, labels: LabelValues): CounterSeries {
    const s = { labels, value: 0 };
    this.series.set(key, s);
    return s;
  }

  protected samples(): Sample[] {
    return [...this.series.values()].map((s) => ({ labels: s.labels, value: s.value }));
  }

  reset(): void {
    this.series = new Map();
  }
}

/** One labelled series of a PlainHistogram: per-bucket counts (not cumulative), their sum and count. */
export class HistogramSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: LabelValues,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length);
  }

  observe(v: number): void {
    // prom-client's findBound: the first bucket whose bound is ≥ v; beyond the last only +Inf (the count).
    const b = this.bounds;
    for (let i = 0; i < b.length; i++) {
      if (v <= b[i]) {
        this.counts[i]++;
        break;
      }
    }
    this.sum += v;
    this.count++;
  }
}

export class PlainHistogram extends PlainMetric {
  readonly type = 'histogram' as const;
  private series = new Map<string, HistogramSeries>();
  private readonly bounds: readonly number[];

  constructor(name: string, help: string, buckets: readonly number[], registry: Registry) {
    super(name, help, registry);
    this.bounds = [...buckets].sort((a, b) => a - b);
  }

  /** The series named by the caller's flat `key` (see PlainCounter.find). */
  find(key: string): HistogramSeries | undefined {
    return this.series.get(key);
  }

  /** Adds the series `key` with its `labels` (in exposition order), empty. */
  add(key: string, labels: LabelValues): HistogramSeries {
    const s = new HistogramSeries(labels, this.bounds);
    this.series.set(key, s);
    return s;
  }

  protected samples(splay: boolean): Sample[] {
    const out: Sample[] = [];
    const bucket = `${this.name}_bucket`;
    const sample = (le: Record<string, string | number>, value: number, metricName: string, labels: LabelValues): Sample =>
      splay ? { labels: { ...le, ...labels }, value, metricName } : { labels: le, sharedLabels: labels, value, metricName };
    for (const s of this.series.values()) {
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += s.counts[i];
        out.push(sample({ le: this.bounds[i] }, acc, bucket, s.labels));
      }
      out.push(
        sample({ le: '+Inf' }, s.count, bucket, s.labels),
        sample({}, s.sum, `${this.name}_sum`, s.labels),
        sample({}, s.count, `${this.name}_count`, s.labels),
      );
    }
    return out;
  }

  reset(): void {
    this.series = new Map();
  }
}
