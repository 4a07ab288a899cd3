// Owns the soak's and the multi-instance bench's ping load: XML-RPC weblogUpdates.ping of a new weblog (a
// host of its own, so neither the throttle nor PING_HOST_BUDGET refuses one) per request, over a few
// keep-alive connections, either at a fixed arrival rate (open model: a request is due at t0 + i/rate
// whatever the earlier ones did, and its latency runs from that due time, so queueing in the client shows
// as latency instead of lowering the offered rate as a closed loop would) or closed-loop on N connections.
// Every answer is classified (acknowledged, or a failure of some kind: nothing else counts as success), and
// a run ends by waiting for every request sent, so the acknowledged count is exact.
import { Agent, request } from 'node:http';

const UA = 'The Incutio XML-RPC PHP Library -- WordPress/6.7.1';
const HEAD = Buffer.from(
  '<?xml version="1.0"?>\n<methodCall>\n<methodName>weblogUpdates.ping</methodName>\n<params>\n<param><value><string>Soak Blog</string></value></param>\n<param><value><string>',
);
const TAIL = Buffer.from('</string></value></param>\n</params></methodCall>\n');
/** flerror 0 in pingd's reply (bench/lib/scenarios.ts isRpcAck recognises it the same way). */
const ACK = '<boolean>0</boolean>';
/** flerror 1: refused, saying why (throttled, the database unavailable…). */
const REFUSED = '<boolean>1</boolean>';

export interface Window {
  /** Seconds this window covers. */
  seconds: number;
  acks: number;
  /** Answers other than an acknowledgement, by kind: `status 503`, `fault: …`, `error: ECONNRESET`, `timeout`, `shed`. */
  failures: Map<string, number>;
  /** Latencies (ms) of the acknowledged requests, from their due time. */
  latencies: number[];
  /** Requests sent but not yet answered at the window's end. */
  inFlight: number;
}

export interface PingLoad {
  /** The figures since the previous take() (or the start), and a new window begun. */
  take(): Window;
  /** Stops sending; resolves once every request sent has its answer (or its timeout). */
  stop(): Promise<{ sent: number; acks: number; failures: Map<string, number> }>;
  /** The weblog URLs acknowledged so far (only with keepUrls). */
  ackedUrls: string[];
}

export interface PingLoadOptions {
  /** pingd's (or the proxy's) origin, http://host:port. */
  origin: string;
  /** Connections (keep-alive sockets) at most. */
  connections: number;
  /** Requests per second (open model); absent: closed loop, one request per connection at a time. */
  rate?: number;
  /** Distinguishes this run's weblog hosts from every other run's. */
  tag: string;
  keepUrls?: boolean;
  /** A request unanswered this long is a failure (`timeout`). */
  timeoutMs?: number;
  /** Open model: requests due while this many are unanswered are not sent but counted (`shed`), so a stalled
   * server cannot make the client queue without bound. */
  maxInFlight?: number;
  /** Told of every answer: the weblog pinged, the outcome ('ack' or a failure's kind), when it was due and when it came (performance.now()). */
  onAnswer?: (weblog: string, outcome: string, dueMs: number, atMs: number) => void;
}

export const pingBody = (weblogUrl: string): Buffer => Buffer.concat([HEAD, Buffer.from(weblogUrl), TAIL]);

/** Percentile (0–100) of unsorted values, nearest rank; NaN for none. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = Float64Array.from(values).sort();
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

export function startPingLoad(o: PingLoadOptions): PingLoad {
  const u = new URL(o.origin);
  const agent = new Agent({ keepAlive: true, maxSockets: o.connections, maxFreeSockets: o.connections });
  const timeoutMs = o.timeoutMs ?? 30_000;
  let seq = 0;
  let sent = 0;
  let inFlight = 0;
  let totalAcks = 0;
  const totalFailures = new Map<string, number>();
  const ackedUrls: string[] = [];
  let win: Window = { seconds: 0, acks: 0, failures: new Map(), latencies: [], inFlight: 0 };
  let winStart = performance.now();
  let stopping = false;
  let settle: (() => void) | null = null;

  const fail = (kind: string) => {
    win.failures.set(kind, (win.failures.get(kind) ?? 0) + 1);
    totalFailures.set(kind, (totalFailures.get(kind) ?? 0) + 1);
  };

  const one = (dueMs: number): Promise<void> =>
    new Promise((resolve) => {
      const weblog = `http://s${o.tag}-${(++seq).toString(36)}.soak.example.com/`;
      const body = pingBody(weblog);
      sent++;
      inFlight++;
      let done = false;
      const finish = (outcome: 'ack' | string) => {
        if (done) return;
        done = true;
        inFlight--;
        if (outcome === 'ack') {
          win.acks++;
          totalAcks++;
          win.latencies.push(performance.now() - dueMs);
          if (o.keepUrls) ackedUrls.push(weblog);
        } else fail(outcome);
        o.onAnswer?.(weblog, outcome, dueMs, performance.now());
        if (inFlight === 0 && stopping) settle?.();
        resolve();
      };
      const req = request(
        {
          agent,
          host: u.hostname,
          port: u.port,
          method: 'POST',
          path: '/RPC2',
          headers: { 'content-type': 'text/xml', 'user-agent': UA, 'content-length': body.length },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if (res.statusCode !== 200) finish(`status ${res.statusCode}`);
            else if (text.includes(ACK)) finish('ack');
            else if (text.includes(REFUSED)) finish('flerror 1');
            else finish(`fault: ${/<name>faultString<\/name>\s*<value>(?:<string>)?([^<]{0,80})/.exec(text)?.[1] ?? text.slice(0, 80)}`);
          });
          res.on('error', (e: NodeJS.ErrnoException) => finish(`error: ${e.code ?? e.message}`));
        },
      );
      req.setTimeout(timeoutMs, () => {
        finish('timeout');
        req.destroy();
      });
      req.on('error', (e: NodeJS.ErrnoException) => finish(`error: ${e.code ?? e.message}`));
      req.end(body);
    });

  let timer: NodeJS.Timeout | undefined;
  const t0 = performance.now();
  if (o.rate) {
    const rate = o.rate;
    const maxInFlight = o.maxInFlight ?? Math.max(1000, rate * 20);
    let issued = 0;
    // Every 2 ms, send what has fallen due: at 3,200/s about 6 per tick, each stamped with its own due time.
    const tick = () => {
      if (stopping) return;
      const now = performance.now();
      const due = Math.floor(((now - t0) * rate) / 1000);
      for (; issued < due; issued++) {
        const dueMs = t0 + (issued * 1000) / rate;
        if (inFlight >= maxInFlight) fail('shed');
        else void one(dueMs);
      }
      timer = setTimeout(tick, 2);
    };
    tick();
  } else {
    const loop = async () => {
      while (!stopping) await one(performance.now());
    };
    for (let i = 0; i < o.connections; i++) void loop();
  }

  return {
    ackedUrls,
    take() {
      const now = performance.now();
      const w = { ...win, seconds: (now - winStart) / 1000, inFlight };
      win = { seconds: 0, acks: 0, failures: new Map(), latencies: [], inFlight: 0 };
      winStart = now;
      return w;
    },
    async stop() {
      stopping = true;
      if (timer) clearTimeout(timer);
      if (inFlight > 0) await new Promise<void>((r) => (settle = r));
      agent.destroy();
      return { sent, acks: totalAcks, failures: totalFailures };
    },
  };
}
