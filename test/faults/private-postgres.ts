// A PostgreSQL cluster of the test's own, which it may stop and start (the shared one on :5432 must never
// be touched): initdb into a temporary directory owned by the postgres user, pg_ctl on a free port with
// the socket in that directory. Needs the PostgreSQL 15 binaries and root (for runuser), as on CI.
import { mkdtempSync, chownSync, rmSync, existsSync, appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { execFileSync, execFile } from 'node:child_process';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { promisify } from 'node:util';
import pg from 'pg';

const BIN = '/usr/lib/postgresql/15/bin';
const run = promisify(execFile);

export function privatePostgresAvailable(): boolean {
  return existsSync(join(BIN, 'pg_ctl')) && process.getuid?.() === 0;
}

/**
 * Why a test of a replicated pair cannot run here, or false when it can: it needs the PostgreSQL backend
 * (the embedded database has no standby) and private clusters (PostgreSQL 15 binaries and root).
 */
export function replicatedPairSkip(backend: string): string | false {
  if (backend !== 'postgres') return 'failover needs PostgreSQL servers: the embedded database has no standby';
  if (!privatePostgresAvailable()) return 'needs private PostgreSQL clusters (PostgreSQL 15 binaries and root)';
  return false;
}

export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

export interface PrivatePostgres {
  port: number;
  url: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  destroy(): Promise<void>;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'pingd-pg-'));
  const { uid, gid } = postgresIds();
  chownSync(dir, uid, gid);
  const data = join(dir, 'data');
  const asPostgres = (cmd: string, args: string[]) => run('runuser', ['-u', 'postgres', '--', join(BIN, cmd), ...args], { cwd: dir });
  await asPostgres('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale=C']);
  const port = await freePort();
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=30`;
  let running = false;
  const pg: PrivatePostgres = {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async start() {
      await asPostgres('pg_ctl', ['-D', data, '-o', opts, '-l', join(dir, 'log'), '-w', '-t', '30', 'start']);
      running = true;
    },
    async stop() {
      await asPostgres('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '30', 'stop']);
      running = false;
    },
    async destroy() {
      if (running) await pg.stop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await pg.start();
  return pg;
}

function postgresIds(): { uid: number; gid: number } {
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  return { uid, gid };
}

/**
 * A TCP proxy in front of a database that a test can break: `blackhole()` keeps every connection open
 * but forwards nothing (a cut cable, a silent firewall: the worst case, no error ever arrives), `reset()`
 * drops every connection and refuses new ones, `heal()` forwards again. With `delayMs`, what the target
 * sends reaches the client that much later (a link with lag); what is still delayed when either side
 * closes is dropped, as what a crashed server had not yet got across.
 */
export interface FaultyProxy {
  port: number;
  mode: 'forward' | 'blackhole' | 'reset';
  blackhole(): void;
  reset(): void;
  heal(): void;
  close(): Promise<void>;
}

export async function startProxy(targetHost: string, targetPort: number, opts: { delayMs?: number } = {}): Promise<FaultyProxy> {
  const pairs = new Set<[Socket, Socket]>();
  const proxy: FaultyProxy = {
    port: 0,
    mode: 'forward',
    blackhole() {
      proxy.mode = 'blackhole';
    },
    reset() {
      proxy.mode = 'reset';
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      pairs.clear();
    },
    heal() {
      proxy.mode = 'forward';
    },
    async close() {
      proxy.reset();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server: Server = createServer((client) => {
    if (proxy.mode === 'reset') {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(targetPort, targetHost);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const forward = (from: Socket, to: Socket, delayMs = 0) =>
      from.on('data', (d) => {
        if (proxy.mode !== 'forward') return; // blackhole: swallowed; both sides keep waiting
        if (delayMs === 0) to.write(d);
        else setTimeout(() => to.destroyed || to.write(d), delayMs);
      });
    forward(client, upstream);
    forward(upstream, client, opts.delayMs);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  proxy.port = (server.address() as { port: number }).port;
  return proxy;
}

/** One server of a replicated pair: its port, and what a failover test does to it. */
export interface ReplicaNode {
  port: number;
  /** Stops it the way a crash does (`pg_ctl stop -m immediate`: no checkpoint, clients cut off). */
  crash(): Promise<void>;
  /** Makes a standby the primary (`pg_ctl promote -w`: returns once it accepts writes). */
  promote(): Promise<void>;
  /** A statement on it through a connection of its own. */
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
}

export interface ReplicatedPair {
  primary: ReplicaNode;
  standby: ReplicaNode;
  /**
   * Resolves once the standby has replayed everything the primary had written when called (an asynchronous
   * or late standby lags: a crash right after a schema change would lose the change, not only pings).
   */
  replayed(timeoutMs?: number): Promise<void>;
  destroy(): Promise<void>;
}

/**
 * A primary and a synchronous streaming standby on loopback, each its own cluster and port: initdb, the
 * primary started, `pg_basebackup -R -X stream` for the standby (it follows the primary through the
 * primary_conninfo that -R writes), and `synchronous_standby_names = '*'` set only once the standby streams
 * (set before, every commit on the primary waits for a standby that is not there). With `synchronous:
 * false` it stays asynchronous (synchronous_standby_names empty: a commit waits for no standby). With
 * `linkDelayMs`, the standby streams through a proxy that delivers the primary's WAL that much later (a
 * standby that far behind; what is still on its way when the primary crashes never arrives).
 */
export async function startReplicatedPair(opts: { synchronous?: boolean; linkDelayMs?: number } = {}): Promise<ReplicatedPair> {
  const dir = mkdtempSync(join(tmpdir(), 'pingd-pg-pair-'));
  const { uid, gid } = postgresIds();
  chownSync(dir, uid, gid);
  const asPostgres = (cmd: string, args: string[]) => run('runuser', ['-u', 'postgres', '--', join(BIN, cmd), ...args], { cwd: dir });
  const started = new Set<string>();
  const node = (name: string, port: number): ReplicaNode & { data: string; start(): Promise<void> } => {
    const data = join(dir, name);
    const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=30 -c wal_sender_timeout=5s`;
    return {
      port,
      data,
      async start() {
        await asPostgres('pg_ctl', ['-D', data, '-o', opts, '-l', join(dir, `${name}.log`), '-w', '-t', '30', 'start']);
        started.add(data);
      },
      async crash() {
        await asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', '-t', '30', 'stop']);
        started.delete(data);
      },
      async promote() {
        await asPostgres('pg_ctl', ['-D', data, '-w', '-t', '30', 'promote']);
      },
      async query<T>(sql: string, params?: unknown[]) {
        const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres', connectionTimeoutMillis: 5000 });
        await c.connect();
        try {
          return (await c.query(sql, params)).rows as T[];
        } finally {
          await c.end();
        }
      },
    };
  };
  const primary = node('primary', await freePort());
  const standby = node('standby', await freePort());
  let link: FaultyProxy | undefined;
  const destroy = async () => {
    for (const data of started) await asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', '-t', '30', 'stop']).catch(() => {});
    await link?.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await asPostgres('initdb', ['-D', primary.data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale=C']);
    appendFileSync(join(primary.data, 'pg_hba.conf'), 'host replication all 127.0.0.1/32 trust\n');
    await primary.start();
    await asPostgres('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(primary.port),
      '-U',
      'postgres',
      '-D',
      standby.data,
      '-R',
      '-X',
      'stream',
    ]);
    if (opts.linkDelayMs) {
      link = await startProxy('127.0.0.1', primary.port, { delayMs: opts.linkDelayMs });
      // -R wrote primary_conninfo with the primary's port: the standby connects through the link instead.
      const auto = join(standby.data, 'postgresql.auto.conf');
      writeFileSync(auto, readFileSync(auto, 'utf8').replace(`port=${primary.port}`, `port=${link.port}`));
    }
    await standby.start();
    await waitStreaming(primary, 'async');
    if (link) {
      const [w] = await standby.query<{ port: number }>('select sender_port as port from pg_stat_wal_receiver');
      if (w?.port !== link.port) throw new Error(`the standby streams from port ${w?.port}, not through the delaying link (${link.port})`);
    }
    if (opts.synchronous ?? true) {
      await primary.query(`alter system set synchronous_standby_names = '*'`);
      await primary.query('select pg_reload_conf()');
      await waitStreaming(primary, 'sync');
    }
  } catch (err) {
    await destroy();
    throw err;
  }
  const replayed = async (timeoutMs = 30_000) => {
    const [{ lsn }] = await primary.query<{ lsn: string }>('select pg_current_wal_lsn()::text as lsn');
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const [r] = await standby.query<{ ok: boolean }>('select coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false) as ok', [lsn]);
      if (r.ok) return;
      if (Date.now() > deadline) throw new Error(`the standby has not replayed the primary's WAL up to ${lsn} after ${timeoutMs} ms`);
      await new Promise((res) => setTimeout(res, 20));
    }
  };
  return { primary, standby, replayed, destroy };
}

async function waitStreaming(primary: ReplicaNode, state: 'async' | 'sync'): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const rows = await primary.query<{ n: number }>(
      `select count(*)::int as n from pg_stat_replication where state = 'streaming' and sync_state = $1`,
      [state],
    );
    if (rows[0].n > 0) return;
    if (Date.now() > deadline) throw new Error(`the standby is not streaming (${state}) after 30 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
