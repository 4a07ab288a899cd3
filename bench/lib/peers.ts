// Owns the push benchmark's peers (BENCH_PUSH_PEERS=1; bench/push.ts): other hubs run against the same farm
// of N loopback subscribers in the same run, each subscribed through its own protocol, published to, and
// its arrivals timed the way pingd's are. WebSub: flask-websub 0.4.1 (Flask + a Celery worker, redis as
// the broker; bench/lib/peers/flask_websub_hub.py). rssCloud: rsscloud-server (apps/server 4.0.0, REST).
// Both are installed into .peers/ by bench/lib/peers/setup.sh (apt packages, the sources at pinned commits,
// rsscloud-server's workspace built); redis must listen on 127.0.0.1:6379. Off by default: a default or CI
// run needs none of it. All their traffic is on loopback: fetches and deliveries go to 127.0.x.y only
// (rsscloud-server listens on every interface, it takes no host, but is only addressed at 127.0.0.1).
import http from 'node:http';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { cpuMicros } from './cpu.js';
import { postForm } from './post-form.js';
import { track, ROOT } from './servers.js';

export const PEERS_ON = process.env.BENCH_PUSH_PEERS === '1';
const PEERS_DIR = join(ROOT, '.peers');
const HERE = join(ROOT, 'bench/lib/peers');
/** The Python that has Flask, requests, Celery and redis (Debian's packages, setup.sh). */
const PYTHON = process.env.BENCH_PEERS_PYTHON || '/usr/bin/python3';
/** Celery's broker: a redis database of its own, emptied before each start (a killed run's tasks left over). */
const BROKER = 'redis://127.0.0.1:6379/15';
/** Celery worker processes: the bare sender's 8 at a time, so the two send with the same parallelism. */
const CELERY_CONCURRENCY = 8;

/** What of bench/push.ts's farm a peer uses: the subscribers, and arming a timed round. */
export interface PeerFarm {
  subs: { address: string; port: number; callback: string }[];
  arm(): { t0: (at: number) => void; finished: Promise<number[]> };
}

/** A peer's round: arrival times (ms after the publish) and its processes' CPU over the round. */
export interface PeerRound {
  times: number[];
  cpuUs: number;
}

export const PEER_NOTES = [
  `Peers (BENCH_PUSH_PEERS=1), on the same farm after pingd has stopped, one warm-up round then the same number of rounds, each a publish of a feed that has gained an item:`,
  `WebSub: **flask-websub 0.4.1** (commit c23cbd8) as its server_example.py sets it up (PUBLISH_SUPPORTED, SQLite storage, Werkzeug's threaded server, no topic validator), a Celery 5.2.6 worker (prefork, concurrency ${CELERY_CONCURRENCY}, --without-mingle/gossip/heartbeat), redis as the broker; the publisher POSTs hub.mode=publish with hub.topic (which it reads) and hub.url, the hub fetches the feed (it must link rel="hub" and rel="self") and queues one delivery task per subscriber. CPU: the hub, the worker and its pool, and redis-server.`,
  `rssCloud: **rsscloud-server** (commit e9d1f33, apps/server 4.0.0, Node ${process.versions.node}) with its defaults, loopback allowed (WEBSUB_FETCH_ALLOW_CIDRS and WEBSUB_CALLBACK_ALLOW_CIDRS 127.0.0.0/8), subscribed by REST pleaseNotify (http-post) from each subscriber's address, one at a time (concurrent ones for a feed are lost), published by REST /ping. CPU: its one process.`,
  `pingd / peer: deliveries/s over the peer's (above 1: pingd faster), CPU per delivery over the peer's (below 1: pingd cheaper).`,
].join(' ');

const log = (s: string) => process.stderr.write(`${s}\n`);

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** The child's environment: no proxy (Python's requests honours *_proxy), so every request stays on loopback. */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, ...extra, NO_PROXY: '*', no_proxy: '*' };
  for (const k of ['http_proxy', 'https_proxy', 'all_proxy', 'HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY']) delete e[k];
  return e;
}

/** Starts a tracked child, keeping the tail of its output for errors; resolves once `ready` matches a line. */
async function startChild(
  what: string,
  cmd: string,
  args: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; ready?: RegExp },
): Promise<{ proc: ChildProcess; tail: () => string }> {
  const proc = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
  track(proc);
  let out = '';
  let seen: () => void = () => {};
  const ready = new Promise<void>((r) => (seen = r));
  const take = (c: Buffer) => {
    out = (out + c.toString()).slice(-8000);
    if (opts.ready?.test(out)) seen();
  };
  proc.stdout!.on('data', take);
  proc.stderr!.on('data', take);
  const tail = () => out;
  if (opts.ready) {
    const exited = new Promise<never>((_, reject) =>
      proc.once('exit', (code) => reject(new Error(`${what} exited (${code}) before it was ready:\n${out}`))),
    );
    const late = new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`${what} not ready after 60 s:\n${out}`)), 60_000).unref(),
    );
    await Promise.race([ready, exited, late]);
  }
  return { proc, tail };
}

async function stopChild(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  proc.kill('SIGTERM');
  const t = setTimeout(() => proc.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(t);
}

async function waitHttp(url: string, what: string): Promise<void> {
  const until = Date.now() + 60_000;
  for (;;) {
    try {
      const r = await fetch(url);
      await r.arrayBuffer();
      if (r.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > until) throw new Error(`${what} not answering at ${url}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Each process's parent, from /proc: a Celery pool's workers are the worker's children. */
function descendants(root: number): number[] {
  const parent = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const s = readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out = [root];
  for (let i = 0; i < out.length; i++) for (const [p, pp] of parent) if (pp === out[i]) out.push(p);
  return out;
}

function pidsNamed(comm: string): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return readFileSync(`/proc/${d}/comm`, 'utf8').trim() === comm;
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** CPU microseconds of each of the processes `pids()` names now; a process that appears later counts whole. */
function cpuOf(pids: () => number[]): () => number {
  const start = new Map(pids().map((p) => [p, cpuMicros(p)]));
  return () => pids().reduce((sum, p) => sum + cpuMicros(p) - (start.get(p) ?? 0), 0);
}

interface PeerFeed {
  url: string;
  add(): void;
  close(): Promise<void>;
}

/**
 * The peers' feed on 127.0.1.200 (pingd's are 127.0.1.1…): the same RSS as pingd's feeds, an item more per
 * round, and a Link header naming the hub and the feed itself, which flask-websub requires of a topic.
 */
async function startPeerFeed(hubUrl: string): Promise<PeerFeed> {
  const host = '127.0.1.200';
  let items = 1;
  let self = '';
  const server = http.createServer((_req, res) => {
    const list = Array.from({ length: Math.min(items, 20) }, (_, k) => items - k)
      .map(
        (n) =>
          `<item><title>Post ${n}</title><link>http://${host}/p/${n}</link><guid>http://${host}/p/${n}</guid><description>Body of post ${n}.</description></item>`,
      )
      .join('');
    const body = `<?xml version="1.0"?><rss version="2.0"><channel><title>Peer feed</title><link>http://${host}/</link><description>d</description>${list}</channel></rss>`;
    res.writeHead(200, {
      'content-type': 'application/rss+xml; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      link: `<${hubUrl}>; rel="hub", <${self}>; rel="self"`,
    });
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  self = `http://${host}:${(server.address() as AddressInfo).port}/feed.xml`;
  return {
    url: self,
    add: () => void items++,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

async function eachLimited<T>(items: T[], limit: number, f: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await f(items[next++]);
    }),
  );
}

interface RunningPeer {
  name: string;
  /** Its hub URL, which a WebSub topic names in its Link header. */
  hubUrl: string;
  /** Subscribes every farm subscriber to `feed`; resolves once the peer has stored them all. */
  subscribe(farm: PeerFarm, feed: string): Promise<void>;
  publish(feed: string): Promise<void>;
  /** CPU counter over the peer's processes, started now. */
  cpu(): () => number;
  stop(): Promise<void>;
}

async function startFlaskWebsub(dir: string): Promise<RunningPeer> {
  const lib = join(PEERS_DIR, 'flask-websub');
  const flushed = spawnSync(PYTHON, ['-c', `import redis; redis.Redis.from_url('${BROKER}').flushdb()`], { encoding: 'utf8' });
  if (flushed.status !== 0)
    throw new Error(`flask-websub: cannot empty the broker (is redis on 127.0.0.1:6379, setup.sh run?): ${flushed.stderr}`);
  const port = await freePort();
  const env = childEnv({ PYTHONPATH: lib, PEER_PORT: String(port), PEER_DB: join(dir, 'hub.sqlite3'), PEER_BROKER: BROKER });
  const hub = await startChild('flask-websub hub', PYTHON, [join(HERE, 'flask_websub_hub.py')], { cwd: HERE, env, ready: /hub ready/ });
  const worker = await startChild(
    'flask-websub worker',
    PYTHON,
    [
      '-m',
      'celery',
      '-A',
      'flask_websub_hub:celery',
      'worker',
      '--concurrency',
      String(CELERY_CONCURRENCY),
      '--loglevel',
      'WARNING',
      '--without-mingle',
      '--without-gossip',
      '--without-heartbeat',
    ],
    { cwd: HERE, env, ready: /worker ready/ },
  );
  const base = `http://127.0.0.1:${port}`;
  await waitHttp(`${base}/`, 'flask-websub hub');
  const redis = pidsNamed('redis-server');
  return {
    name: 'flask-websub 0.4.1',
    hubUrl: `${base}/hub`,
    async subscribe(farm, feed) {
      const refused: string[] = [];
      await eachLimited(farm.subs, 16, async (s) => {
        const r = await postForm(base, '/hub', { 'hub.mode': 'subscribe', 'hub.topic': feed, 'hub.callback': s.callback }, s.address);
        if (r.status !== 202) refused.push(`${r.status} ${r.body.slice(0, 200)}`);
      });
      if (refused.length) throw new Error(`flask-websub refused ${refused.length} subscriptions, e.g. ${refused[0]}`);
      // The worker verifies each intent (a GET with hub.challenge, which the farm echoes) and then stores it.
      const until = Date.now() + 300_000;
      for (;;) {
        const n = Number(await (await fetch(`${base}/count?topic=${encodeURIComponent(feed)}`)).text());
        if (n >= farm.subs.length) return;
        if (Date.now() > until) throw new Error(`flask-websub stored ${n} of ${farm.subs.length} subscriptions:\n${worker.tail()}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    },
    async publish(feed) {
      // It reads the published URL from hub.topic (hub.url, the common spelling, it ignores): both are sent.
      const r = await postForm(base, '/hub', { 'hub.mode': 'publish', 'hub.topic': feed, 'hub.url': feed });
      if (r.status !== 202) throw new Error(`flask-websub refused the publish: ${r.status} ${r.body.slice(0, 200)}`);
    },
    cpu: () => cpuOf(() => [hub.proc.pid!, ...descendants(worker.proc.pid!), ...redis]),
    async stop() {
      await Promise.all([stopChild(worker.proc), stopChild(hub.proc)]);
    },
  };
}

async function startRsscloudServer(dir: string): Promise<RunningPeer> {
  const app = join(PEERS_DIR, 'rsscloud-server/apps/server');
  const port = await freePort();
  const env = childEnv({
    PORT: String(port),
    DOMAIN: '127.0.0.1',
    DATA_FILE_PATH: join(dir, 'subscriptions.json'),
    STATS_FILE_PATH: join(dir, 'stats.json'),
    WEBSUB_FETCH_ALLOW_CIDRS: '127.0.0.0/8',
    WEBSUB_CALLBACK_ALLOW_CIDRS: '127.0.0.0/8',
  });
  const server = await startChild('rsscloud-server', process.execPath, ['--use_strict', 'app.js'], { cwd: app, env });
  const base = `http://127.0.0.1:${port}`;
  await waitHttp(`${base}/`, 'rsscloud-server');
  return {
    name: 'rsscloud-server 4.0.0',
    hubUrl: `${base}/`,
    async subscribe(farm, feed) {
      const refused: string[] = [];
      // It verifies each callback with a POST there before it answers, so a success is a stored subscription.
      const one = async (s: PeerFarm['subs'][number]) => {
        const r = await postForm(
          base,
          '/pleaseNotify',
          { notifyProcedure: '', port: String(s.port), path: new URL(s.callback).pathname, protocol: 'http-post', url1: feed },
          s.address,
        );
        if (!(r.status === 200 && /success="true"/.test(r.body))) refused.push(`${r.status} ${r.body.slice(0, 200)}`);
      };
      // One at a time: it stores a feed's subscriptions by reading the list and writing it back, so of
      // concurrent pleaseNotify for one feed all but one are lost (seen at 16 at once: 2 of 5 stored).
      for (const s of farm.subs) await one(s);
      if (refused.length) throw new Error(`rsscloud-server refused ${refused.length} subscriptions, e.g. ${refused[0]}\n${server.tail()}`);
    },
    async publish(feed) {
      const r = await postForm(base, '/ping', { url: feed });
      if (!(r.status === 200 && /success="true"/.test(r.body)))
        throw new Error(`rsscloud-server refused the ping: ${r.status} ${r.body.slice(0, 300)}`);
    },
    cpu: () => cpuOf(() => [server.proc.pid!]),
    stop: () => stopChild(server.proc),
  };
}

/**
 * The surface's peer against `farm`: started, every subscriber subscribed, a warm-up round, then `runs`
 * rounds; stopped after. Each round: the feed gains an item, the publisher notifies the peer, and every
 * subscriber's first POST is timed from the publish.
 */
export async function measurePeer(
  surface: 'websub' | 'rsscloud',
  farm: PeerFarm,
  runs: number,
): Promise<{ name: string; rounds: PeerRound[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'pingd-peer-'));
  let peer: RunningPeer | undefined;
  let feed: PeerFeed | undefined;
  try {
    peer = surface === 'websub' ? await startFlaskWebsub(dir) : await startRsscloudServer(dir);
    const running = peer;
    feed = await startPeerFeed(running.hubUrl);
    const s0 = performance.now();
    await running.subscribe(farm, feed.url);
    log(`    ${running.name}: ${farm.subs.length} subscribed in ${((performance.now() - s0) / 1000).toFixed(1)} s`);
    const round = async (): Promise<PeerRound> => {
      feed!.add();
      const armed = farm.arm();
      const cpu = running.cpu();
      const t0 = performance.now();
      armed.t0(t0);
      await running.publish(feed!.url);
      // The farm ends a round at its own timeout, with the arrivals so far.
      const times = await armed.finished;
      return { times, cpuUs: cpu() };
    };
    await round();
    const rounds: PeerRound[] = [];
    for (let k = 0; k < runs; k++) {
      const r = await round();
      rounds.push(r);
      const last = r.times[r.times.length - 1] ?? NaN;
      log(
        `    ${running.name} round ${k + 1}: ${r.times.length}/${farm.subs.length}, last after ${last.toFixed(0)} ms, ${(r.cpuUs / Math.max(1, r.times.length)).toFixed(0)} µs CPU each`,
      );
    }
    return { name: running.name, rounds };
  } finally {
    await peer?.stop();
    await feed?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
