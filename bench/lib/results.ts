// Owns what a benchmark run leaves behind with --write: its scenario's current page
// (bench/results/<scenario>.md, rewritten by every run of this checkout) and one JSON line appended to
// bench/results/history.jsonl (every run, this checkout's or BENCH_PINGD_ROOT's). Earlier runs live only in
// the history; bench/results/evidence/ holds the frozen files that code and docs cite. A rewritten page is
// followed by docs/performance.md and the README's "How fast" table, which are made from the pages
// (scripts/performance.ts).
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpus, loadavg, totalmem } from 'node:os';
import { git } from './git.js';
import { ROOT, PINGD_ROOT } from './servers.js';
import { writePerformanceFiles } from '../../scripts/performance.js';

export const RESULTS_DIR = join('bench', 'results');
export const HISTORY = join(RESULTS_DIR, 'history.jsonl');

export interface RunRecord {
  /** The page's name: intake, documents, renders, ping-hosts, hardening, feeds, fanout, web, wrk, soak, scale, multi, stream, verify, web-audit, spam. */
  scenario: string;
  /** What the page is about, for its title. */
  title: string;
  started: Date;
  /** The run's own report (its header and tables). */
  markdown: string;
  /** Backends the run measured. */
  backends: string[];
  /** Load average (1 min) when the run started; now when not given. */
  loadAtStart?: number;
}

const cell = (s: string) =>
  s
    .replace(/\*\*/g, '')
    .replace(/[✅❌]/gu, '')
    .trim();

/**
 * Every number in the report's tables, keyed "<row> · <column>" (the row named by its first cell, and its
 * second when that column is the backend): the history's machine-readable figures, whatever the scenario.
 */
export function tableFigures(markdown: string): Record<string, number> {
  const out: Record<string, number> = {};
  const lines = markdown.split('\n');
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i].startsWith('|') || !/^\|\s*-{3}/.test(lines[i + 1])) continue;
    const head = lines[i].split('|').slice(1, -1).map(cell);
    for (let j = i + 2; j < lines.length && lines[j].startsWith('|'); j++) {
      const cells = lines[j].split('|').slice(1, -1).map(cell);
      const byBackend = /backend/i.test(head[1] ?? '');
      const key = byBackend ? `${cells[0]} / ${cells[1]}` : cells[0];
      for (let k = byBackend ? 2 : 1; k < cells.length; k++) {
        const m = /^(-?[\d,]*\.?\d+)\s*(%?)/.exec(cells[k]);
        if (!m || !head[k]) continue;
        const n = Number(m[1].replace(/,/g, ''));
        if (Number.isFinite(n)) out[`${key} · ${head[k]}`] = m[2] ? Number((n / 100).toPrecision(12)) : n;
      }
      i = j;
    }
  }
  return out;
}

/** Writes the scenario's current page (this checkout's runs only) and appends the history line; returns what was written. */
export function recordRun(rec: RunRecord, root = ROOT): string[] {
  const dir = join(root, RESULTS_DIR);
  mkdirSync(dir, { recursive: true });
  const commit = git(PINGD_ROOT, ['rev-parse', '--short', 'HEAD']) || null;
  const dirty = git(PINGD_ROOT, ['status', '--porcelain', '--', 'src', 'migrations']);
  const cpu = cpus();
  const machine = `${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
  const load = rec.loadAtStart ?? loadavg()[0];
  const written: string[] = [];
  appendFileSync(
    join(root, HISTORY),
    `${JSON.stringify({
      date: rec.started.toISOString().slice(0, 16) + 'Z',
      commit: commit && dirty ? `${commit}+dirty` : commit,
      scenario: rec.scenario,
      backend: rec.backends.join(','),
      machine,
      load: Math.round(load * 100) / 100,
      figures: tableFigures(rec.markdown),
      source: PINGD_ROOT === ROOT ? 'npm run bench' : `npm run bench, BENCH_PINGD_ROOT=${PINGD_ROOT}`,
    })}\n`,
  );
  written.push(join(root, HISTORY));
  // A run of another checkout (an earlier commit, to compare) is history, not the current figures.
  if (PINGD_ROOT !== ROOT) return written;
  const page = join(dir, `${rec.scenario}.md`);
  writeFileSync(
    page,
    [
      `# ${rec.title} (\`${rec.scenario}\`): current figures`,
      '',
      `- Date: ${rec.started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
      `- Commit: ${commit ?? 'unknown'}${dirty ? ` (uncommitted changes in ${dirty.split('\n').length} file(s) under src/ or migrations/)` : ''}`,
      `- Machine: ${machine}; load generator on the same cores`,
      `- Load: ${load.toFixed(2)} (1-min average) at start, ${loadavg()[0].toFixed(2)} at end`,
      '',
      rec.markdown.trim(),
      '',
      `Rewritten by \`npm run bench -- --write\` (scenario \`${rec.scenario}\`); earlier runs in [history.jsonl](history.jsonl).`,
      '',
    ].join('\n'),
  );
  written.push(page);
  // The generated page and the README's table belong to a checkout (a test's bare results folder has none).
  if (existsSync(join(root, 'README.md'))) written.push(...writePerformanceFiles(root));
  return written;
}
