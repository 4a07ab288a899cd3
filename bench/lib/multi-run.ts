// Owns one setup of the multi-instance bench: N pingd processes on one fresh PostgreSQL database behind the
// round-robin proxy, the closed-loop ping load through it, and the checks afterwards (every acknowledged
// ping stored once, one renderer at a time, the same /changes.xml from every instance).
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { loadavg } from 'node:os';
import { startPingd, type Child } from './servers.js';
import { createScenarioDatabase } from './soak-database.js';
import { startPingLoad, percentile } from './soak-load.js';
import { startProxy, type Proxy } from './multi-proxy.js';

const log = (s: string) => process.stderr.write(`${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const loadStr = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
/** Renderings closer than this count as overlapping (created_at is stamped a query after the render's clock starts). */
const OVERLAP_TOLERANCE_MS = 50;

export interface SetupResult {
  instances: number;
  loadStart: string;
  loadEnd: string;
  rps: number;
  p50: number;
  p99: number;
  acks: number;
  failures: number;
  failureKinds: string;
  rows: number;
  /** Acknowledged URLs without exactly one row. */
  notOnce: number;
  /** (url, received_at) pairs stored more than once. */
  duplicates: number;
  /** max(id) − min(id) + 1 − rows. */
  idGap: number;
  handed: number[];
  perInstance: InstanceFigures[];
  /** Mean sessions of this database waiting on an advisory lock, and active, over the run (sampled 4×/s). */
  advisoryWaiting: number;
  activeSessions: number;
  renderings: number;
  overlaps: number;
  minGapMs: number;
  sameDocument: boolean;
  documentNote: string;
  pass: boolean;
}

export interface InstanceFigures {
  accepted: number;
  rendered: number;
  busy: number;
  /** Group commits, and their summed sizes and durations (s). */
  batches: number;
  batchPings: number;
  commitSec: number;
}

async function instanceMetrics(origin: string): Promise<InstanceFigures> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  const total = (re: RegExp) => [...text.matchAll(re)].reduce((a, m) => a + Number(m[1]), 0);
  return {
    accepted: total(/^pingd_pings_total\{[^}]*outcome="accepted"[^}]*\} (\S+)$/gm),
    rendered: total(/^pingd_publish_renders_total\{[^}]*outcome="rendered"[^}]*\} (\S+)$/gm),
    busy: total(/^pingd_publish_render_lock_busy_total (\S+)$/gm),
    batches: total(/^pingd_commit_batch_size_count(?:\{[^}]*\})? (\S+)$/gm),
    batchPings: total(/^pingd_commit_batch_size_sum(?:\{[^}]*\})? (\S+)$/gm),
    commitSec: total(/^pingd_commit_duration_seconds_sum(?:\{[^}]*\})? (\S+)$/gm),
  };
}

/** /changes.xml as one instance serves it (gzip bytes as sent). */
function getChanges(origin: string): Promise<{ status: number; etag: string; sha: string; updated: string }> {
  const u = new URL(origin);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: u.hostname, port: u.port, path: '/changes.xml', headers: { 'accept-encoding': 'gzip' }, agent: false },
      (res) => {
        const h = createHash('sha256');
        res.on('data', (c: Buffer) => h.update(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            etag: String(res.headers.etag ?? ''),
            sha: h.digest('hex').slice(0, 16),
            updated: String(res.headers['last-modified'] ?? ''),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

export interface SetupOptions {
  adminUrl: string;
  instances: number;
  connections: number;
  seconds: number;
  proxyHost: string;
}

export async function runSetup(o: SetupOptions): Promise<SetupResult> {
  const db = await createScenarioDatabase(o.adminUrl, 'multi');
  const pingds: Child[] = [];
  let proxy: Proxy | undefined;
  try {
    // All at once: their migrations meet under the migration lock, as replicas started together would.
    pingds.push(...(await Promise.all(Array.from({ length: o.instances }, () => startPingd({ env: db.env })))));
    proxy = await startProxy(
      o.proxyHost,
      pingds.map((p) => p.port),
    );
    const tag = `m${o.instances}x${Date.now().toString(36)}`;
    const warm = startPingLoad({ origin: proxy.origin, connections: o.connections, tag: `${tag}w`, keepUrls: true });
    await sleep(3000);
    const w = await warm.stop();
    const loadStart = loadStr();
    log(
      `multi ${o.instances} pingd: proxy ${proxy.origin} → ${pingds.map((p) => p.port).join(', ')}; warm-up ${w.acks} acks; load ${loadStart}`,
    );
    const load = startPingLoad({ origin: proxy.origin, connections: o.connections, tag, keepUrls: true });
    const t0 = performance.now();
    // What the database's sessions wait on meanwhile: a ping batch waiting for another's EVENT_ORDER_LOCK
    // shows as wait_event 'advisory' (the render lock is only ever tried, never waited for).
    const waits = { samples: 0, advisory: 0, active: 0 };
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const [r] = await db.query<{ advisory: string; active: string }>(
          "select count(*) filter (where wait_event_type = 'Lock' and wait_event = 'advisory') as advisory, count(*) filter (where state = 'active') as active from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()",
        );
        waits.samples++;
        waits.advisory += Number(r.advisory);
        waits.active += Number(r.active);
        await sleep(250);
      }
    })();
    await sleep(o.seconds * 1000);
    sampling = false;
    await sampler;
    const win = load.take();
    const totals = await load.stop();
    const seconds = (performance.now() - t0) / 1000;
    const loadEnd = loadStr();
    const rest = load.take();
    const lat = [...win.latencies, ...rest.latencies];
    const acks = totals.acks + w.acks;
    const failures = [...totals.failures.values(), ...w.failures.values()].reduce((a, b) => a + b, 0);
    const failureKinds = [...totals.failures, ...w.failures].map(([k, n]) => `${n} × ${k}`).join(', ');
    log(
      `multi ${o.instances} pingd: ${totals.acks} acks in ${seconds.toFixed(1)} s (${(totals.acks / seconds).toFixed(0)}/s), p99 ${percentile(lat, 99).toFixed(1)} ms, ${failures} failures${failureKinds ? ` (${failureKinds})` : ''}; load ${loadEnd}`,
    );
    const handed = await proxy.handed();

    // The renderer catches up with the last ping: every instance then serves the same current rendering.
    const lastAckMs = Date.now();
    let docs: Awaited<ReturnType<typeof getChanges>>[] = [];
    const until = Date.now() + 90_000;
    for (;;) {
      docs = await Promise.all(pingds.map((p) => getChanges(p.url)));
      const fresh = docs.every((d) => d.status === 200 && Date.parse(d.updated) >= lastAckMs - 1000);
      if ((fresh && new Set(docs.map((d) => `${d.etag} ${d.sha}`)).size === 1) || Date.now() > until) break;
      await sleep(1000);
    }
    const sameDocument =
      docs.every((d) => d.status === 200) && new Set(docs.map((d) => d.etag)).size === 1 && new Set(docs.map((d) => d.sha)).size === 1;
    const documentNote = sameDocument
      ? `${docs[0].etag}, sha256 ${docs[0].sha}…`
      : docs.map((d) => `${d.status} ${d.etag} ${d.sha} ${d.updated}`).join(' | ');
    const perInstance = await Promise.all(pingds.map((p) => instanceMetrics(p.url)));

    // Stored once, checked by URL (the weblog URLs as sent are already in pingd's normal form).
    const urls = [...warm.ackedUrls, ...load.ackedUrls];
    const [counts] = await db.query<{ rows: string; min_id: string; max_id: string }>(
      'select count(*) as rows, min(id) as min_id, max(id) as max_id from pings',
    );
    const rows = Number(counts.rows);
    const [once] = await db.query<{ not_once: string }>(
      `select count(*) as not_once from unnest($1::text[]) as a(url) left join (select url, count(*) as n from pings group by url) p using (url) where coalesce(p.n, 0) <> 1`,
      [urls],
    );
    const [dups] = await db.query<{ n: string }>(
      'select count(*) as n from (select 1 from pings group by url, received_at having count(*) > 1) d',
    );
    const idGap = rows ? Number(counts.max_id) - Number(counts.min_id) + 1 - rows : 0;

    // One renderer: no two renderings' intervals overlap (all instances write to the one table).
    const rs = await db.query<{ start_ms: string; render_ms: number }>(
      'select extract(epoch from created_at) * 1000 as start_ms, render_ms from renderings where complete order by created_at, id',
    );
    let overlaps = 0;
    let minGapMs = Infinity;
    let endMs = -Infinity;
    for (const r of rs) {
      const start = Number(r.start_ms);
      if (Number.isFinite(endMs)) {
        const gap = start - endMs;
        minGapMs = Math.min(minGapMs, gap);
        if (gap < -OVERLAP_TOLERANCE_MS) overlaps++;
      }
      endMs = Math.max(endMs, start + r.render_ms);
    }
    const res: SetupResult = {
      instances: o.instances,
      loadStart,
      loadEnd,
      rps: totals.acks / seconds,
      p50: percentile(lat, 50),
      p99: percentile(lat, 99),
      acks,
      failures,
      failureKinds,
      rows,
      notOnce: Number(once.not_once),
      duplicates: Number(dups.n),
      idGap,
      handed,
      perInstance,
      advisoryWaiting: waits.advisory / Math.max(1, waits.samples),
      activeSessions: waits.active / Math.max(1, waits.samples),
      renderings: rs.length,
      overlaps,
      minGapMs: Number.isFinite(minGapMs) ? minGapMs : NaN,
      sameDocument,
      documentNote,
      pass: false,
    };
    res.pass = failures === 0 && acks === rows && res.notOnce === 0 && res.duplicates === 0 && overlaps === 0 && sameDocument;
    log(
      `multi ${o.instances} pingd: rows ${rows} (acks ${acks}), not once ${res.notOnce}, duplicates ${res.duplicates}, id gap ${idGap}; renderings ${rs.length}, overlaps ${overlaps}; per instance ${JSON.stringify(perInstance)}; changes.xml ${documentNote}`,
    );
    return res;
  } finally {
    await proxy?.stop().catch(() => undefined);
    await Promise.all(pingds.map((p) => p.stop().catch(() => undefined)));
    await db.drop().catch((e: Error) => log(`multi: dropping ${db.name} failed: ${e.message}`));
  }
}
