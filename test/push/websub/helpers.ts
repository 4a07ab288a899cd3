// Test harness for the WebSub hub: a real subscriber (node:http on one of 127.0.0.30–39) that answers
// verifications of intent by echoing the challenge (or as a test says) and records every request; the
// form POST a subscriber sends; a publication (pings, then a render); and waiting for the hub's worker.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import type { Config } from '../../../src/platform/config.js';
import { waitFor } from '../../helpers/wait.js';

export interface Received {
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export type Answer = { status: number; body?: string; headers?: Record<string, string>; delayMs?: number };

export interface Subscriber {
  origin: string;
  gets: Received[];
  posts: Received[];
  /** How a GET (verification of intent, denial) to a path is answered; default: 200 echoing hub.challenge. */
  onGet(path: string, answer: (q: URLSearchParams) => Answer): void;
  /** How a POST (delivery) to a path is answered; default: 204. */
  onPost(path: string, answer: () => Answer): void;
  getsTo(path: string): Received[];
  postsTo(path: string): Received[];
  close(): Promise<void>;
}

export async function startSubscriber(host: string): Promise<Subscriber> {
  const getAnswers = new Map<string, (q: URLSearchParams) => Answer>();
  const postAnswers = new Map<string, () => Answer>();
  const s: Subscriber = {
    origin: '',
    gets: [],
    posts: [],
    onGet: (p, a) => void getAnswers.set(p, a),
    onPost: (p, a) => void postAnswers.set(p, a),
    getsTo: (p) => s.gets.filter((r) => r.path === p),
    postsTo: (p) => s.posts.filter((r) => r.path === p),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const u = new URL(req.url ?? '/', 'http://x');
      const rec: Received = { path: u.pathname, query: u.searchParams, headers: req.headers, body: Buffer.concat(parts) };
      let a: Answer;
      if (req.method === 'POST') {
        s.posts.push(rec);
        a = postAnswers.get(u.pathname)?.() ?? { status: 204 };
      } else {
        s.gets.push(rec);
        a = getAnswers.get(u.pathname)?.(u.searchParams) ?? { status: 200, body: u.searchParams.get('hub.challenge') ?? '' };
      }
      setTimeout(() => {
        res.writeHead(a.status, { 'content-type': 'text/plain', ...a.headers });
        res.end(a.body ?? '');
      }, a.delayMs ?? 0);
    });
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  s.origin = `http://${host}:${(server.address() as AddressInfo).port}`;
  return s;
}

/** The public address the hub's topics are under in most tests. */
export const PUBLIC = 'http://pingd.test';

/** The operator's token: the subscriptions list is the operator API's. */
export const ADMIN_TOKEN = 'websub-admin-token-0123456789';

/** An app ready to verify and deliver to loopback subscribers, rendering only when a test asks. */
export async function hubApp(overrides: Partial<Config> = {}): Promise<TestApp> {
  const t = await startApp({
    FETCH_ALLOW_PRIVATE: true,
    FETCH_HOST_INTERVAL_MS: 0,
    RENDER_SCHEDULER: false,
    PING_MIN_INTERVAL: 0,
    PUBLIC_URL: PUBLIC,
    ADMIN_TOKEN,
    ...overrides,
  });
  await t.app.ready();
  return t;
}

/** POSTs a subscription form to /websub the way subscribers do. */
export async function subscribe(
  t: TestApp,
  form: Record<string, string>,
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const r = await t.app.inject({
    method: 'POST',
    url: '/websub',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams(form).toString(),
  });
  return { status: r.statusCode, body: r.body, headers: r.headers };
}

/** New pings, then a render: every live document gets a new current rendering (and the hub hears of it). */
export async function publish(t: TestApp, pings = 1): Promise<void> {
  for (let i = 0; i < pings; i++) {
    const r = await t.app.pings.accept({ method: 'ping', name: 'A weblog', url: uniqueUrl('websub') });
    if (!r.ok) throw new Error(`ping refused: ${JSON.stringify(r)}`);
  }
  const report = await t.app.renderer.tick();
  if (!report || report.rendered.length === 0) throw new Error(`nothing rendered: ${JSON.stringify(report)}`);
}

/**
 * Waits until `cond` holds, waking the hub's worker meanwhile (it would otherwise look once a second). The
 * bound is generous: a slow CI machine took more than 15 s for two failed deliveries on the embedded
 * database (its one session is shared with the renderer and verification); only a broken hub waits it out.
 */
export async function waitForHub(
  t: TestApp | TestApp[],
  cond: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 60_000,
): Promise<void> {
  const apps = Array.isArray(t) ? t : [t];
  await waitFor(cond, {
    what,
    timeoutMs,
    between: () => {
      for (const a of apps) a.app.websub.worker.wake();
    },
  });
}

/** Tasks still queued (none: every verification, denial and delivery has finished). */
export async function queued(t: TestApp): Promise<number> {
  const [r] = await t.app.db.query<{ n: number }>('select count(*)::int as n from websub_tasks');
  return Number(r.n);
}

export async function subscriptionsApi(t: TestApp): Promise<any[]> {
  const r = await t.app.inject({ method: 'GET', url: '/api/websub/subscriptions', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  if (r.statusCode !== 200) throw new Error(`GET /api/websub/subscriptions: ${r.statusCode} ${r.body}`);
  return r.json().subscriptions;
}

/** One sample of a metric from /metrics, or undefined. */
export async function metric(t: TestApp, series: string): Promise<number | undefined> {
  const r = await t.app.inject({ method: 'GET', url: '/metrics' });
  const line = r.body.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}
