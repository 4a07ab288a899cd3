// Owns the failover bench (issue 41, item 6): pingd (a process of its own, never restarted) on a multi-host
// DATABASE_URL (target_session_attrs=read-write, connect_timeout=2) over a replicated pair of private
// PostgreSQL 15 clusters on loopback (test/faults/private-postgres.ts: initdb, pg_basebackup -R), XML-RPC
// pings at a fixed rate (open model, a new weblog each, bench/lib/soak-load.ts), the primary crashed
// (`pg_ctl stop -m immediate`) at BENCH_FAILOVER_CRASH_AT s and the standby promoted (`pg_ctl promote`)
// BENCH_FAILOVER_PROMOTE_AFTER s later, and a /stream client following all along, reconnecting with its
// Last-Event-ID as an EventSource does (test/helpers/sse-client.ts followStream). Once with a synchronous
// standby (synchronous_standby_names = '*'), once asynchronous (empty) for contrast. Per run:
//   - acknowledged, refused (flerror 1, or an HTTP refusal), no answer (timeout, socket error);
//   - lost: acknowledged and absent from the promoted server (must be 0 when synchronous);
//   - refused but stored: a commit whose answer the crash cut off (the client pings again; not a loss);
//   - write gap: from `pg_ctl promote` returning to the first acknowledgement; and the whole stretch
//     without one (last acknowledgement before the crash to the first after the promotion);
//   - stream gap: acknowledged pings the /stream client never received (must be 0 when synchronous; when
//     asynchronous, only pings the promoted server lacks may be missing), and events it received that the
//     promoted server does not have; read once a last ping sent after the load
//     has reached the client (positions go up, and a client is sent them in order), or after 30 s without it;
//   - whether pingd exited, and what it logged (warn and above), message by message.
//
//   node --import tsx bench/failover.ts [--write]      (also `npm run bench -- --failover`; writes bench/results/failover.md)
//
// Each mode runs once per BENCH_FAILOVER_LAGS_MS value: 0 is the bare loopback link (the standby a fraction
// of a millisecond behind); 50 delivers the primary's WAL to the standby 50 ms late (test/faults/
// private-postgres.ts startProxy with delayMs: what is on its way at the crash never arrives), a standby
// that far behind, as over a slow link or under a burst, which is what asynchronous replication loses.
// The log summary is of pingd at LOG_LEVEL=info, as deployed; /readyz is asked every 250 ms.
//
// Environment: BENCH_FAILOVER_SECONDS (60), BENCH_FAILOVER_CRASH_AT (20), BENCH_FAILOVER_PROMOTE_AFTER (5),
// BENCH_FAILOVER_RATE (pings/s, 200), BENCH_FAILOVER_MODES (synchronous,asynchronous), BENCH_FAILOVER_LAGS_MS
// (0,50). A quick run:
// BENCH_FAILOVER_SECONDS=12 BENCH_FAILOVER_CRASH_AT=4 BENCH_FAILOVER_PROMOTE_AFTER=2. Needs root and
// PostgreSQL 15's server binaries (/usr/lib/postgresql/15/bin), as the failover tests; not the shared server.
import { cpus, loadavg, totalmem } from 'node:os';
import { envNumber } from './lib/env.js';
import { git } from './lib/git.js';
import { recordRun } from './lib/results.js';
import { isMain, runDirect, type DirectOptions } from './lib/run-direct.js';
import { PINGD_ROOT, ROOT, startPingd, type Child } from './lib/servers.js';
import { pingBody, startPingLoad } from './lib/soak-load.js';
import { privatePostgresAvailable, startReplicatedPair } from '../test/faults/private-postgres.js';
import { dataOf, followStream, type StreamFollower } from '../test/helpers/sse-client.js';

const log = (s: string) => process.stderr.write(`${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const s2 = (ms: number) => (Number.isFinite(ms) ? (ms / 1000).toFixed(2) : '–');
const ok = (b: boolean) => (b ? '✅' : '❌');

type Mode = 'synchronous' | 'asynchronous';

interface Settings {
  seconds: number;
  crashAt: number;
  promoteAfter: number;
  rate: number;
}

interface Answer {
  weblog: string;
  outcome: string;
  due: number;
  at: number;
}

export interface FailoverResult {
  mode: Mode;
  /** Delay of the primary's WAL on its way to the standby (ms). */
  lagMs: number;
  sent: number;
  acknowledged: number;
  lost: number;
  refused: number;
  /** Refused pings that were due before the crash (the primary still up: intake could not keep up). */
  refusedBeforeCrash: number;
  noAnswer: number;
  shed: number;
  refusedStored: number;
  /** ms from `pg_ctl promote` returning to the first acknowledgement after it. */
  writeGapMs: number;
  /** ms from the last acknowledgement before the crash to the first after the promotion. */
  noWriteMs: number;
  /** ms the crash and the promotion commands took. */
  crashCmdMs: number;
  promoteCmdMs: number;
  slowestMs: number;
  streamGap: number;
  /** Of the stream gap, pings the promoted server has (must be 0: only lost pings may be missing). */
  streamGapStored: number;
  /** Events the client received that the promoted server does not have. */
  streamedNotStored: number;
  streamDuplicates: number;
  /**
   * Pings acknowledged after the promotion that the promoted server stored under an id the client had
   * already been sent, for a ping the promoted server lacks (asynchronous: the sequence went back with the
   * lost pings).
   */
  reusedIds: number;
  streamReceived: number;
  reconnects: number;
  resets: number;
  largestIdStep: number;
  /** The last ping, sent after the load, reached the stream client. */
  caughtUp: boolean;
  pingdExited: boolean;
  logLines: string;
  /** /readyz: the first 503 after the crash, and the first 200 after the promotion (ms after each). */
  notReadyAfterMs: number;
  readyAfterMs: number;
  /** pingd_pings_total by outcome at the end. */
  outcomes: string;
  /** pingd_db_pool_connections{state="total"}: the last sample before the crash, the least between crash and promotion, the last of the run. */
  poolTotals: [number, number, number];
  pass: boolean;
}

const LEVELS: Record<number, string> = { 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

/**
 * pingd's log from `since` (epoch ms) on (pino JSON lines): each message once, in the order first seen,
 * with its level, its count and its `reason` when it has one; the loopback ports are written P1, P2.
 */
function logSummary(log: string, since: number, ports: [number, number]): string {
  const counts = new Map<string, number>();
  for (const line of log.split('\n')) {
    if (!line.startsWith('{')) continue;
    let entry: { msg?: unknown; level?: number; time?: number; reason?: unknown };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue; // a line cut by the capture's bound
    }
    if ((entry.time ?? 0) < since) continue;
    const msg = String(entry.msg ?? '')
      .replaceAll(`:${ports[0]}`, ':P1')
      .replaceAll(`:${ports[1]}`, ':P2');
    const key = `${LEVELS[entry.level ?? 30] ?? entry.level} “${msg.slice(0, 160)}”${entry.reason ? ` (${String(entry.reason)})` : ''}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([k, n]) => `${k} ×${n}`).join('; ');
}

async function runOnce(mode: Mode, lagMs: number, s: Settings): Promise<FailoverResult> {
  const pair = await startReplicatedPair({ synchronous: mode === 'synchronous', linkDelayMs: lagMs });
  let pingd: Child | undefined;
  let follower: StreamFollower | undefined;
  try {
    const url = `postgres://postgres@127.0.0.1:${pair.primary.port},127.0.0.1:${pair.standby.port}/postgres?target_session_attrs=read-write&connect_timeout=2`;
    pingd = await startPingd({ env: { DATABASE_URL: url, LOG_LEVEL: 'info' }, keepLog: true });
    const origin = pingd.url;
    const since = Date.now();
    follower = await followStream(`${origin}/stream?types=ping`);
    if (follower.connections[0]?.status !== 200) throw new Error('the /stream client could not connect');
    const answers: Answer[] = [];
    const tag = `fo${mode[0]}${Date.now().toString(36)}`;
    const load = startPingLoad({
      origin,
      connections: 32,
      rate: s.rate,
      tag,
      timeoutMs: 30_000,
      onAnswer: (weblog, outcome, due, at) => answers.push({ weblog, outcome, due, at }),
    });
    const t0 = performance.now();
    // /readyz as a load balancer asks it; the pool's open connections as Prometheus would see them, each second.
    const probes: { at: number; status: number }[] = [];
    const pool: { at: number; total: number }[] = [];
    let probing = true;
    const prober = (async () => {
      for (let i = 0; probing; i++) {
        const status = await fetch(`${origin}/readyz`)
          .then(async (r) => (await r.arrayBuffer(), r.status))
          .catch(() => 0);
        probes.push({ at: performance.now(), status });
        if (i % 4 === 0) {
          const m = /^pingd_db_pool_connections\{state="total"\} (\S+)$/m.exec(await fetch(`${origin}/metrics`).then((r) => r.text()));
          if (m) pool.push({ at: performance.now(), total: Number(m[1]) });
        }
        await sleep(250);
      }
    })();
    log(
      `failover ${mode}, lag ${lagMs} ms: pingd ${origin}, primary :${pair.primary.port}, standby :${pair.standby.port}; ${s.rate} pings/s`,
    );
    await sleep(t0 + s.crashAt * 1000 - performance.now());
    const crashStart = performance.now();
    await pair.primary.crash();
    const crashed = performance.now();
    log(
      `failover ${mode}, lag ${lagMs} ms: primary crashed at ${s2(crashStart - t0)} s (pg_ctl took ${Math.round(crashed - crashStart)} ms)`,
    );
    await sleep(crashStart + s.promoteAfter * 1000 - performance.now());
    const promoteStart = performance.now();
    await pair.standby.promote();
    const promoted = performance.now();
    log(
      `failover ${mode}, lag ${lagMs} ms: standby promoted at ${s2(promoteStart - t0)} s (pg_ctl promote took ${Math.round(promoted - promoteStart)} ms)`,
    );
    await sleep(t0 + s.seconds * 1000 - performance.now());
    const totals = await load.stop();
    probing = false;
    await prober;

    // The last ping, after every other was answered: once the client has it, it has every event before it
    // that it will ever be sent.
    const last = `http://${tag}-last.soak.example.com/`;
    const lastReply = await fetch(`${origin}/RPC2`, {
      method: 'POST',
      headers: { 'content-type': 'text/xml' },
      body: pingBody(last).toString('utf8'),
    })
      .then((r) => r.text())
      .catch((e: Error) => e.message);
    const lastAcked = lastReply.includes('<boolean>0</boolean>');
    let caughtUp = false;
    for (const until = performance.now() + 30_000; lastAcked && performance.now() < until; await sleep(100))
      if (dataOf<{ url: string }>(follower.events()).some((p) => p.url === last)) {
        caughtUp = true;
        break;
      }

    // Per second of the run (by due time): acknowledged / refused, for the log.
    const perSecond: string[] = [];
    for (const a of answers) {
      const sec = Math.floor((a.due - t0) / 1000);
      const [ak, rf] = (perSecond[sec] ?? '0/0').split('/').map(Number);
      perSecond[sec] = a.outcome === 'ack' ? `${ak + 1}/${rf}` : `${ak}/${rf + 1}`;
    }
    log(`failover ${mode}, lag ${lagMs} ms: acknowledged/refused per second: ${[...perSecond].map((x) => x ?? '0/0').join(' ')}`);
    const acked = answers.filter((a) => a.outcome === 'ack');
    const unanswered = (a: Answer) => a.outcome === 'timeout' || a.outcome.startsWith('error:');
    const noAnswer = answers.filter(unanswered);
    const refused = answers.filter((a) => a.outcome !== 'ack' && !unanswered(a));
    const sentUrls = [...answers.map((a) => a.weblog), last];
    const stored = new Set(
      (await pair.standby.query<{ url: string }>('select url from pings where url = any($1)', [sentUrls])).map((r) => r.url),
    );
    const events = follower.events();
    const pings = dataOf<{ id: number; url: string }>(events, 'ping');
    const seen = new Map<string, number>();
    for (const p of pings) seen.set(p.url, (seen.get(p.url) ?? 0) + 1);
    const ackedUrls = [...acked.map((a) => a.weblog), ...(lastAcked ? [last] : [])];
    const ids = events.filter((e) => e.event === 'ping').map((e) => Number(e.id));
    let largestIdStep = 0;
    for (let i = 1; i < ids.length; i++) largestIdStep = Math.max(largestIdStep, ids[i] - ids[i - 1]);
    const metrics = await fetch(`${origin}/metrics`).then((r) => r.text());
    const outcomes = [...metrics.matchAll(/^pingd_pings_total\{([^}]*)\} (\S+)$/gm)]
      .filter((m) => Number(m[2]) > 0)
      .map((m) => `${m[1]} ${m[2]}`)
      .join(', ');
    // Ids the client was sent for pings the promoted server lacks, and acknowledged pings stored there
    // under one of those ids.
    const goneIds = pings.filter((p) => !stored.has(p.url)).map((p) => p.id);
    const highestGone = goneIds.length ? Math.max(...goneIds) : 0;
    const [{ n: reusedIds }] = await pair.standby.query<{ n: number }>(
      'select count(*)::int as n from pings where url = any($1) and id <= $2',
      [ackedUrls.filter((u) => !seen.has(u)), highestGone],
    );
    const firstAckAfter = Math.min(...acked.filter((a) => a.at > promoted).map((a) => a.at));
    const lastAckBefore = Math.max(...acked.filter((a) => a.at < crashStart).map((a) => a.at));
    const r: FailoverResult = {
      mode,
      lagMs,
      sent: totals.sent + 1,
      acknowledged: ackedUrls.length,
      lost: ackedUrls.filter((u) => !stored.has(u)).length,
      refused: refused.length + (lastAcked ? 0 : 1),
      refusedBeforeCrash: refused.filter((a) => a.due < crashStart).length,
      noAnswer: noAnswer.length,
      shed: totals.failures.get('shed') ?? 0,
      refusedStored: refused.filter((a) => stored.has(a.weblog)).length,
      writeGapMs: firstAckAfter - promoted,
      noWriteMs: firstAckAfter - lastAckBefore,
      crashCmdMs: crashed - crashStart,
      promoteCmdMs: promoted - promoteStart,
      slowestMs: Math.max(...answers.map((a) => a.at - a.due)),
      streamGap: ackedUrls.filter((u) => !seen.has(u)).length,
      streamGapStored: ackedUrls.filter((u) => !seen.has(u) && stored.has(u)).length,
      streamedNotStored: [...seen.keys()].filter((u) => !stored.has(u)).length,
      streamDuplicates: [...seen.values()].filter((n) => n > 1).length,
      reusedIds,
      streamReceived: pings.length,
      reconnects: follower.connections.length - 1,
      resets: events.filter((e) => e.event === 'reset').length,
      largestIdStep,
      caughtUp,
      pingdExited: pingd.proc.exitCode !== null,
      logLines: logSummary((pingd as Child & { log: string }).log, since, [pair.primary.port, pair.standby.port]),
      notReadyAfterMs: (probes.find((p) => p.at > crashStart && p.status === 503)?.at ?? NaN) - crashStart,
      readyAfterMs: (probes.find((p) => p.at > promoted && p.status === 200)?.at ?? NaN) - promoted,
      outcomes,
      poolTotals: [
        pool.filter((p) => p.at < crashStart).at(-1)?.total ?? NaN,
        Math.min(...pool.filter((p) => p.at > crashed && p.at < promoteStart).map((p) => p.total)),
        pool.at(-1)?.total ?? NaN,
      ],
      pass: false,
    };
    r.pass =
      !r.pingdExited &&
      r.noAnswer === 0 &&
      r.streamGapStored === 0 &&
      r.streamDuplicates === 0 &&
      (mode === 'asynchronous' || (r.lost === 0 && r.streamGap === 0));
    log(`failover ${mode}, lag ${lagMs} ms: ${JSON.stringify({ ...r, logLines: undefined })}`);
    log(`failover ${mode}, lag ${lagMs} ms: pingd logged ${r.logLines || 'nothing'}`);
    return r;
  } finally {
    follower?.close();
    await pingd?.stop().catch(() => undefined);
    await pair.destroy();
  }
}

/** A run's name: its replication, and the WAL link's delay when there is one. */
const label = (r: FailoverResult) => (r.lagMs ? `${r.mode}, WAL ${r.lagMs} ms late` : r.mode);

function table(rs: FailoverResult[]): string[] {
  const out = [
    '| replication | sent | acknowledged | lost | refused | no answer | refused but stored | write gap after promotion (s) | no acknowledgement for (s) | slowest answer (s) | stream gap | streamed, not on the promoted server | stream duplicates | stream reconnects / resets | largest id step | /readyz 503 after crash / 200 after promotion (s) | pingd exited |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | --- |',
  ];
  for (const r of rs) {
    const must = r.mode === 'synchronous';
    out.push(
      `| ${label(r)} | ${r.sent} | ${r.acknowledged} | ${must ? `${ok(r.lost === 0)} ` : ''}${r.lost} | ${r.refused}${r.refusedBeforeCrash ? ` (${r.refusedBeforeCrash} before the crash)` : ''}${r.shed ? ` (${r.shed} shed)` : ''} | ${r.noAnswer} | ${r.refusedStored} | ${s2(r.writeGapMs)} | ${s2(r.noWriteMs)} | ${s2(r.slowestMs)} | ${must ? `${ok(r.streamGap === 0)} ` : ''}${r.streamGap}${!must && r.streamGap > 0 ? ` (${ok(r.streamGapStored === 0)} ${r.streamGapStored} on the promoted server)` : ''}${r.reusedIds ? ` (${r.reusedIds} under an id already sent for a lost ping)` : ''}${r.caughtUp ? '' : ' (the last ping never arrived)'} | ${r.streamedNotStored} | ${r.streamDuplicates} | ${r.reconnects} / ${r.resets} | ${r.largestIdStep} | ${s2(r.notReadyAfterMs)} / ${s2(r.readyAfterMs)} | ${r.pingdExited ? '❌ yes' : 'no'} |`,
    );
  }
  return out;
}

export async function runFailover(o: DirectOptions): Promise<boolean> {
  if (!privatePostgresAvailable()) {
    log('failover: needs root and PostgreSQL 15 server binaries (/usr/lib/postgresql/15/bin): nothing measured');
    return false;
  }
  const s: Settings = {
    seconds: envNumber('BENCH_FAILOVER_SECONDS', 60),
    crashAt: envNumber('BENCH_FAILOVER_CRASH_AT', 20),
    promoteAfter: envNumber('BENCH_FAILOVER_PROMOTE_AFTER', 5),
    rate: envNumber('BENCH_FAILOVER_RATE', 200),
  };
  if (s.crashAt + s.promoteAfter >= s.seconds)
    throw new Error('BENCH_FAILOVER_CRASH_AT + BENCH_FAILOVER_PROMOTE_AFTER must be under BENCH_FAILOVER_SECONDS');
  const modes = (process.env.BENCH_FAILOVER_MODES || 'synchronous,asynchronous').split(',').map((m) => m.trim()) as Mode[];
  const lags = (process.env.BENCH_FAILOVER_LAGS_MS || '0,50').split(',').map((x) => Number(x));
  if (lags.some((x) => !Number.isInteger(x) || x < 0)) throw new Error('BENCH_FAILOVER_LAGS_MS: whole milliseconds, comma-separated');
  const started = new Date();
  const loadAtStart = loadavg()[0];
  const load0 = loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
  const commit = git(PINGD_ROOT, ['rev-parse', '--short', 'HEAD']);
  const dirty = git(PINGD_ROOT, ['status', '--porcelain', '--', 'src', 'migrations']);
  const measured = `${PINGD_ROOT === ROOT ? 'this checkout' : PINGD_ROOT} at ${commit || 'an unknown commit'}${dirty ? ' with uncommitted changes under src/ or migrations/' : ''}`;
  const results: FailoverResult[] = [];
  const errors: string[] = [];
  for (const lagMs of lags)
    for (const mode of modes) {
      try {
        results.push(await runOnce(mode, lagMs, s));
      } catch (err) {
        log(`failover ${mode}, lag ${lagMs} ms failed: ${(err as Error).stack ?? err}`);
        errors.push(`${mode}, lag ${lagMs} ms: ${(err as Error).message.split('\n')[0].slice(0, 300)}`);
      }
    }
  const cpu = cpus();
  const md = [
    `### Failover ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `pingd: ${measured}. Machine: ${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}; load average at start ${load0}, at end ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}. Wall time ${Math.round((Date.now() - started.getTime()) / 1000)} s. ` +
      `${s.rate} XML-RPC pings/s (open model, a new weblog each) for ${s.seconds} s; the primary crashed (\`pg_ctl stop -m immediate\`) at ${s.crashAt} s, ` +
      `the standby promoted (\`pg_ctl promote\`) ${s.promoteAfter} s later; pingd with its defaults (DB_TIMEOUT_MS 5000, VERIFY_PINGS=off) on ` +
      '`postgres://…@127.0.0.1:P1,127.0.0.1:P2/postgres?target_session_attrs=read-write&connect_timeout=2`, one /stream client (`?types=ping`) throughout. ' +
      'Two private PostgreSQL 15 clusters on loopback (fsync off), each run on a new pair; "WAL N ms late": the standby streams through a proxy that delivers the primary\'s WAL N ms late, and what is on its way at the crash never arrives.',
    '',
    ...table(results),
    '',
    ...(errors.length ? [`Errors: ${errors.join('; ')}`, ''] : []),
    "What pingd logged from the start of the load (LOG_LEVEL=info: each message's level, text, reason and count) and its ping counters at the end:",
    '',
    ...results.map(
      (r) =>
        `- ${label(r)}: ${r.logLines || 'nothing'}; pingd_pings_total ${r.outcomes}; pingd_db_pool_connections{state="total"} ${r.poolTotals[0]} before the crash, ${r.poolTotals[1]} at least in the gap, ${r.poolTotals[2]} at the end.`,
    ),
    '',
    'Lost = acknowledged (flerror 0) and absent from the promoted server. Refused = flerror 1 ("database unavailable") or an HTTP refusal; no answer = a timeout (30 s) or a socket error. ' +
      'Slowest answer: from the ping\'s due time, so it includes the wait for one of the load\'s 32 connections. Write gap = from `pg_ctl promote` returning to the first acknowledgement. Stream gap = acknowledged pings the /stream client never received, counting its reconnects with Last-Event-ID; asynchronously, only pings lost with the old primary may be among them ("on the promoted server" must be 0).',
    '',
  ].join('\n');
  console.log(md);
  if (o.write)
    log(
      `results written to ${recordRun({ scenario: 'failover', title: 'Failover: the primary crashed, the standby promoted', started, markdown: md, backends: ['postgres'], loadAtStart }).join(', ')}`,
    );
  return errors.length === 0 && results.every((r) => r.pass);
}

// Run directly: node --import tsx bench/failover.ts [--write]
if (isMain(import.meta.url)) runDirect('failover', runFailover);
