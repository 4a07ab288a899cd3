// Owns the `scale` benchmark's one-shot measurements, each in a child process of its own so that its peak
// RSS is its own (with the embedded database, PGlite's heap is in it too): rendering changes.xml as of a
// given moment, rendering one closed archive hour, and reading the sizes of the ping log and the database.
//
//   node --import tsx bench/lib/scale-probe.ts <changes|archive|sizes> <DATABASE_URL or DATA_DIR> [at ms] [hour ms]
//
// Prints one JSON line (ProbeResult) on stdout.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { openDatabase } from '../../src/platform/db/database.js';
import { Renderer } from '../../src/publishing/render/renderer.js';
import { changesDocument } from '../../src/publishing/documents/changes.js';
import { DocumentRegistry } from '../../src/publishing/documents/registry.js';
import { ROOT, track } from './servers.js';

export type ProbeKind = 'changes' | 'archive' | 'sizes';

export interface Sizes {
  /** The ping log: every partition (or the one table) with its indexes and TOAST. */
  pingsBytes: number;
  pingsHeapBytes: number;
  pingsIndexBytes: number;
  partitions: number;
  weblogsBytes: number;
  databaseBytes: number;
  pings: number;
}

export interface ProbeResult {
  kind: ProbeKind;
  /** The measured render (changes: the second tick of the process). */
  ms?: number;
  /** changes: the process's first tick (with the embedded database's ANALYZE of weblogs and pings). */
  firstMs?: number;
  /** Peak RSS of the probe process, and its RSS before the measured work. */
  peakMb?: number;
  startMb?: number;
  entries?: number;
  identityBytes?: number;
  gzipBytes?: number;
  sizes?: Sizes;
}

const mb = (bytes: number) => Math.round((bytes / (1 << 20)) * 10) / 10;
const quiet = {
  info: () => undefined,
  warn: () => undefined,
  error: (o: object, m?: string) => process.stderr.write(`error: ${m} ${JSON.stringify(o)}\n`),
};

async function probe(kind: ProbeKind, target: string, at: number, hour: number): Promise<ProbeResult> {
  const isUrl = /^postgres(ql)?:/.test(target);
  const db = await openDatabase({
    databaseUrl: isUrl ? target : undefined,
    dataDir: isUrl ? '' : target,
    poolMax: 4,
    timeoutMs: 1_800_000,
  });
  try {
    if (kind === 'sizes') {
      // pg_total_relation_size of a partitioned table is 0: its partitions (pg_inherits) hold the bytes.
      const [r] = await db.query<Record<string, number>>(
        `with parts as (select c.oid from pg_class c where c.oid = 'pings'::regclass and c.relkind = 'r'
                        union all select inhrelid from pg_inherits where inhparent = 'pings'::regclass)
         select (select coalesce(sum(pg_total_relation_size(oid)), 0) from parts)::float8 as total,
                (select coalesce(sum(pg_relation_size(oid)), 0) from parts)::float8 as heap,
                (select coalesce(sum(pg_indexes_size(oid)), 0) from parts)::float8 as idx,
                (select count(*) from parts)::float8 as parts,
                pg_total_relation_size('weblogs')::float8 as weblogs,
                pg_database_size(current_database())::float8 as db,
                (select sum(n) from ping_totals)::float8 as pings`,
      );
      return {
        kind,
        sizes: {
          pingsBytes: Number(r.total),
          pingsHeapBytes: Number(r.heap),
          pingsIndexBytes: Number(r.idx),
          partitions: Number(r.parts),
          weblogsBytes: Number(r.weblogs),
          databaseBytes: Number(r.db),
          pings: Number(r.pings),
        },
      };
    }
    const renderer = new Renderer(new DocumentRegistry([changesDocument()]), { db, log: quiet, deltaWindowSec: 900 });
    const start = process.memoryUsage().rss;
    const t0 = performance.now();
    let entries: number | undefined;
    let identityBytes: number | undefined;
    let gzipBytes: number | undefined;
    let firstMs: number | undefined;
    if (kind === 'changes') {
      // Twice: a renderer's first tick on the embedded database also refreshes the planner statistics of
      // weblogs and pings (ANALYZE, every 10 minutes: PGlite has no autovacuum); the second is a steady one.
      for (let i = 0; i < 2; i++) {
        const ti = performance.now();
        const r = await renderer.tick({ now: new Date(at), liveOnly: true, force: true });
        const x = r?.rendered[0];
        if (!x) throw new Error(`changes.xml not rendered: ${JSON.stringify(r)}`);
        ({ entries, identityLength: identityBytes, gzipLength: gzipBytes } = x);
        if (i === 0) firstMs = Math.round(performance.now() - ti);
      }
    } else {
      const r = await renderer.renderHour(hour, { now: new Date(at) });
      if (r === null) throw new Error('the render lock is busy');
      if (r !== 'identical') ({ entries, identityLength: identityBytes, gzipLength: gzipBytes } = r);
    }
    const ms = firstMs === undefined ? performance.now() - t0 : performance.now() - t0 - firstMs;
    return {
      kind,
      ms: Math.round(ms),
      firstMs,
      peakMb: mb(process.resourceUsage().maxRSS * 1024),
      startMb: mb(start),
      entries,
      identityBytes,
      gzipBytes,
    };
  } finally {
    await db.close();
  }
}

/** Runs one probe in a child process; rejects when it fails. */
export function runProbe(kind: ProbeKind, target: string, at = 0, hour = 0): Promise<ProbeResult> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'bench/lib/scale-probe.ts'), kind, target, String(at), String(hour)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    track(p);
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('exit', (code) => {
      const line = out.trim().split('\n').pop() ?? '';
      if (code !== 0 || !line.startsWith('{'))
        return reject(new Error(`scale probe ${kind} exited with ${code}: ${err.trim().slice(-800)}`));
      resolve(JSON.parse(line) as ProbeResult);
    });
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [kind, target, at, hour] = process.argv.slice(2);
  probe(kind as ProbeKind, target, Number(at), Number(hour)).then(
    (r) => process.stdout.write(`${JSON.stringify(r)}\n`),
    (err: Error) => {
      process.stderr.write(`probe failed: ${err.stack ?? err.message}\n`);
      process.exit(1);
    },
  );
}
