// Owns driving load: one autocannon run against a server, reduced to requests/s and latency, and the
// pairing of pingd with the baseline so that every ratio compares two runs taken seconds apart.
import autocannon, { type RequestSpec } from 'autocannon';

export interface LoadSpec {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  /** Fixed body, or a fresh one per request (distinct URLs). */
  body?: Buffer;
  makeBody?: () => Buffer;
  makePath?: () => string;
  /** Told of every response; returns true when it counts as an acknowledgement. */
  isAck?: (status: number, body: string) => boolean;
  /** A refusal after which the ping may still have been stored (the database answered too late). */
  isUnsure?: (status: number, body: string) => boolean;
  /** Status codes that count as success for requests/s (default 2xx). */
  okStatus?: number[];
}

export interface LoadRun {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  ok: number;
  bad: number;
  errors: number;
  timeouts: number;
  acks: number;
  unsure: number;
  seconds: number;
}

/**
 * One run of `amount` requests on `connections` connections (or for `duration` seconds). An amount-bound
 * run waits for every answer, so the acknowledgements counted are exact; a duration-bound one may cut
 * requests off in flight.
 */
export async function runLoad(
  baseUrl: string,
  spec: LoadSpec,
  opts: { connections: number; amount?: number; duration?: number },
): Promise<LoadRun> {
  let acks = 0;
  let unsure = 0;
  let ok = 0;
  let last = 0;
  let bad = 0;
  const okStatus = spec.okStatus;
  const req: RequestSpec = {
    method: spec.method,
    path: spec.path,
    headers: spec.headers ?? {},
    onResponse(status, body) {
      last = performance.now();
      const good = okStatus ? okStatus.includes(status) : status >= 200 && status < 300;
      if (good) ok++;
      else bad++;
      if (spec.isAck?.(status, body)) acks++;
      else if (spec.isUnsure?.(status, body)) unsure++;
    },
  };
  if (spec.body) req.body = spec.body;
  if (spec.makeBody || spec.makePath) {
    const { makeBody, makePath } = spec;
    req.setupRequest = (r) => {
      if (makeBody) r.body = makeBody();
      if (makePath) r.path = makePath();
      return r;
    };
  }
  const started = performance.now();
  const res = await autocannon({
    url: baseUrl,
    connections: opts.connections,
    ...(opts.amount ? { amount: opts.amount } : { duration: opts.duration ?? 5 }),
    timeout: 20,
    requests: [req],
  });
  // autocannon reports its duration at the next whole-second tick after the last answer: time it here.
  const seconds = last > started ? (last - started) / 1000 : res.duration;
  return {
    rps: ok / seconds,
    p50: res.latency.p50,
    p99: res.latency.p99,
    requests: ok + bad,
    ok,
    bad,
    errors: res.errors,
    timeouts: res.timeouts,
    acks,
    unsure,
    seconds,
  };
}

export function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
