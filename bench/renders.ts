// Owns the `render` scenario of `npm run bench`: runs bench/publish-render.ts (render time, peak memory and
// bytes of each document) in its own process and reads its JSON lines into the render table.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { ROOT, track } from './lib/servers.js';
import type { RenderRow } from './lib/report.js';
import { OPTS, wanted } from './lib/options.js';

/** Runs bench/publish-render.ts (the publishing helper's) when it exists; reads its JSON lines. */
export async function renders(): Promise<{ rows: RenderRow[]; raw: string } | undefined> {
  if (!wanted('render')) return undefined;
  const script = join(ROOT, 'bench', 'publish-render.ts');
  if (!existsSync(script)) return { rows: [], raw: 'bench/publish-render.ts does not exist yet: render scenarios skipped.' };
  const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    // PostgreSQL only unless asked: seeding a 1M-ping hour takes minutes per backend.
    const childEnv = {
      BENCH_PUBLISH_BACKENDS: OPTS.backends.includes('postgres') ? 'postgres' : 'pglite',
      ...process.env,
      BENCH_DATABASE_URL: OPTS.databaseUrl,
    };
    const p = spawn(process.execPath, ['--import', 'tsx', '--import', new URL('./lib/orphan-guard.ts', import.meta.url).href, script], {
      cwd: ROOT,
      env: childEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    track(p);
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => {
      // Its progress and readable table, as it goes.
      process.stderr.write(d);
      stderr = (stderr + d.toString()).slice(-4000);
    });
    p.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
  const rows: RenderRow[] = [];
  const raw: string[] = [];
  for (const line of out.stdout.split('\n')) {
    const l = line.trim();
    if (!l) continue;
    try {
      const j = JSON.parse(l) as Record<string, unknown>;
      const n = (k: string[]) => k.map((x) => j[x]).find((v) => typeof v === 'number') as number | undefined;
      const s = (k: string[]) => k.map((x) => j[x]).find((v) => typeof v === 'string') as string | undefined;
      const row: RenderRow = {
        case: s(['case', 'document', 'name', 'label']) ?? l.slice(0, 60),
        ms: n(['ms', 'renderMs', 'render_ms']),
        peakMb: n(['peakMb', 'peakMB', 'peak_mb', 'peakRssMb', 'peakHeapMb']),
        bytes: n(['bytes']),
        target: s(['target']),
        pass: typeof j.pass === 'boolean' ? j.pass : undefined,
        note: s(['note']),
      };
      // The render-time target (stated for PostgreSQL), when the script states none.
      if (!row.target && row.ms !== undefined && /changes\.xml, 100k.*postgres/.test(row.case)) {
        row.target = '≤ 1000 ms';
        row.pass = row.ms <= 1000;
      }
      rows.push(row);
    } catch {
      raw.push(l);
    }
  }
  if (out.code !== 0) raw.push(`publish-render exited with ${out.code}: ${out.stderr.trim().split('\n').slice(-5).join(' / ')}`);
  return { rows, raw: raw.join('\n') };
}
