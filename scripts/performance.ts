// Owns docs/performance.md and the README's "How fast" table: both made from the scenario pages in
// bench/results/ (one current table per scenario, each run overwriting its own, as fastify/benchmarks
// keeps them), never edited by hand. `npm run docs` writes them (scripts/docs.ts), and so does every
// `npm run bench -- --write` right after it rewrites a page (bench/lib/results.ts). A page added to
// bench/results/ appears by itself: PAGE_ORDER places the known ones, any other follows alphabetically.
// What the figures meant when they were taken, and what was changed because of them, is not here:
// docs/design/decisions.md and bench/results/evidence/.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fillBlock, table } from './markdown.js';

export const PERFORMANCE_PAGE = 'docs/performance.md';
export const README = 'README.md';
export const RESULTS_DIR = 'bench/results';
/** The README's block: `<!-- generated:how-fast -->` … `<!-- /generated -->`. */
export const HOW_FAST = 'how-fast';

/**
 * The order of the sections on docs/performance.md, one per page of bench/results/. A heading given here
 * is the section's (other pages link to its anchor, so it must not follow the page's title, which each
 * run rewrites); without one, the page's title is used. Pages not listed come after these, by name.
 */
export const PAGE_ORDER: { page: string; heading?: string }[] = [
  { page: 'intake', heading: 'Intake' },
  { page: 'documents', heading: 'Serving the documents' },
  { page: 'renders', heading: 'Rendering' },
  { page: 'render-tick', heading: 'Renderer CPU per tick' },
  { page: 'wrk', heading: 'HTTP ratios with wrk' },
  { page: 'scale', heading: 'A month of pings' },
  { page: 'soak', heading: 'Sustained load' },
  { page: 'multi', heading: 'Several instances' },
  { page: 'failover', heading: 'Failover' },
  { page: 'stream', heading: 'Live stream' },
  { page: 'replay', heading: 'Stream replays' },
  { page: 'push', heading: 'Push fan-out' },
  { page: 'ping-hosts', heading: 'Intake with verification on' },
  { page: 'verify', heading: 'Verification' },
  { page: 'spam-intake', heading: 'Intake with spam scoring' },
  { page: 'spam', heading: 'Spam score' },
  { page: 'hardening', heading: 'Hardening' },
  { page: 'feeds', heading: 'Hostile fetched feeds' },
  { page: 'fanout', heading: 'Bounded fan-out' },
  { page: 'attacks', heading: 'Attacks on intake' },
  { page: 'web', heading: 'Web pages' },
  { page: 'web-audit', heading: 'Web audit' },
];

/** The header lines every results page opens with (bench/lib/results.ts writes them). */
const HEADER = ['Date', 'Commit', 'Machine', 'Load'] as const;

export interface ResultsPage {
  /** The file's name without `.md`: the scenario. */
  name: string;
  title: string;
  /** Date, Commit, Machine, Load (and Source when the page has one), as the page states them. */
  header: Map<string, string>;
  /** Everything after the header: the tables and their notes. */
  body: string;
}

/** Reads one results page: its `# ` title, its `- Name: value` header lines, then its body. */
export function parseResultsPage(name: string, text: string): ResultsPage {
  const lines = text.split('\n');
  let i = 0;
  while (i < lines.length && !lines[i].startsWith('# ')) i++;
  const title = (lines[i] ?? `# ${name}`)
    .slice(2)
    .replace(/:\s*current figures\s*$/i, '')
    .trim();
  i++;
  const header = new Map<string, string>();
  for (; i < lines.length; i++) {
    const m = /^- ([A-Z][a-z]+): (.*)$/.exec(lines[i]);
    if (m) header.set(m[1], m[2].trim());
    else if (lines[i].trim() !== '' || header.size > 0) break;
  }
  return { name, title, header, body: lines.slice(i).join('\n').trim() };
}

/** Every results page of `root`, in PAGE_ORDER, then the others alphabetically. */
export function resultsPages(root: string): ResultsPage[] {
  const dir = join(root, RESULTS_DIR);
  const names = readdirSync(dir)
    .filter((f) => f.endsWith('.md') && f !== 'README.md')
    .map((f) => f.slice(0, -3));
  const rank = (n: string) => {
    const i = PAGE_ORDER.findIndex((p) => p.page === n);
    return i < 0 ? PAGE_ORDER.length : i;
  };
  return names
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))
    .map((n) => parseResultsPage(n, readFileSync(join(dir, `${n}.md`), 'utf8')));
}

/** What a page's Commit line leaves unsaid, said plainly: no commit, or a tree with uncommitted changes. */
export function commitWarnings(commit: string | undefined): string[] {
  const out: string[] = [];
  const sha = commit !== undefined && /\b[0-9a-f]{7,40}\b/.test(commit);
  if (!sha) out.push('commit: not recorded');
  else if (/not recorded|unknown/i.test(commit)) out.push('commit: not recorded for part of the page');
  if (commit !== undefined && /uncommitted|dirty/i.test(commit)) out.push('tree: uncommitted changes when measured');
  return out;
}

const shas = (commit: string | undefined) => [...new Set((commit ?? '').match(/\b[0-9a-f]{7,40}\b/g) ?? [])];
const dates = (date: string | undefined) => [...new Set((date ?? '').match(/\d{4}-\d\d-\d\d/g) ?? [])];

/** GitHub's anchor for a heading (as test/docs/links.test.ts computes it). */
export function anchor(heading: string): string {
  return heading
    .replace(/`/g, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

export function headingOf(p: ResultsPage): string {
  return PAGE_ORDER.find((o) => o.page === p.name)?.heading ?? p.title.replace(/\s*\(`[^)]*`\)\s*/g, ' ').trim();
}

/**
 * A page's body as docs/ sees it: its relative links made relative to docs/ (`from`, the path from the
 * linking page to bench/results/), its headings moved below the section's.
 */
function rebased(body: string, from: string): string {
  let fence = false;
  return body
    .split('\n')
    .map((line) => {
      if (/^\s*```/.test(line)) fence = !fence;
      if (fence) return line;
      const l = line.replace(/\]\(([^)\s]+)\)/g, (whole, target: string) =>
        /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#') || target.startsWith('/') ? whole : `](${from}${target})`,
      );
      const h = /^(#{1,2})\s/.exec(l);
      return h ? `###${l.slice(h[1].length)}` : l;
    })
    .join('\n');
}

const INTRO = `# Performance

<!-- Generated by \`npm run docs\` (scripts/performance.ts) from bench/results/*.md: do not edit. -->

The current figures of each benchmark, one section per scenario, each copied from its page in
[\`bench/results/\`](../bench/results/README.md) with the date, commit, machine and load of the run that made it.
A run of a scenario rewrites its page and this one; earlier runs are lines of
[\`history.jsonl\`](../bench/results/history.jsonl). What was tried, measured and changed because of these
figures is in [Decisions](design/decisions.md); the dated runs and notes that code and docs cite are in
[\`bench/results/evidence/\`](../bench/results/evidence/) (the notebook this page used to be is
[\`2026-11-28-performance-notes.md\`](../bench/results/evidence/2026-11-28-performance-notes.md)).

**What is measured, against what.** Each scenario runs pingd (on PostgreSQL and on the embedded database)
and, seconds apart on the same machine, a **baseline**: a minimal Fastify app that reads the same requests
and answers the same bytes, each in its own process. The machine is small (2 cores) and the load generator
shares its cores, so a table gives requests per second and latency, but above all the **ratio** to the
baseline (\`35.1%\` or \`0.35×\`: pingd answered 35 requests for every 100 the bare app did), the CPU each
request cost pingd and the baseline, and the database's. Intake counts only durable pings: every
acknowledged ping is checked to be a stored row. Other scenarios state their bounds (a document's age, the
memory of the embedded server, pings lost at a failover) and whether the run met them (✅, ❌).

**Reading it.** Absolute figures move with whatever else the machine runs; the ratio, taken from pairs of
runs seconds apart, and the CPU per request move much less. Compare a ratio with its target and with the
same scenario's earlier runs, and look at the load line: a run at a load average well above 2 on 2 cores
shared its cores with other work. pingd **as deployed** runs its renderer and verification beside the
requests; **renderer and verification stopped** is intake alone, the configuration the targets are stated
for. A page whose run did not record its commit, or ran on a tree with uncommitted changes, says so.

**Running it.** \`npm install\`, a reachable PostgreSQL (or \`BENCH_BACKENDS=pglite\`), then \`npm run bench\`
(the default set, 4 to 6 minutes); \`npm run bench -- --help\` lists every scenario and setting, and
[Development](development.md#benchmarks) says what each sends. \`npm run bench -- --write\` also rewrites
the scenario's page in \`bench/results/\`, appends its line to \`history.jsonl\` and regenerates this page
and the README's table; \`npm run docs\` regenerates them from the pages as they are.`;

/** docs/performance.md as the pages of bench/results/ say now. */
export function performancePage(pages: ResultsPage[]): string {
  const from = '../bench/results/';
  const summary = table(
    ['scenario', 'date', 'commit', 'page'],
    pages.map((p) => {
      const warn = commitWarnings(p.header.get('Commit'));
      const commits = [...shas(p.header.get('Commit')), ...warn.map((w) => `**${w}**`)].join(', ');
      return [
        `[${headingOf(p)}](#${anchor(headingOf(p))})`,
        dates(p.header.get('Date')).join(', ') || 'not recorded',
        commits,
        `[${p.name}.md](${from}${p.name}.md)`,
      ];
    }),
  );
  const sections = pages.map((p) => {
    const warn = commitWarnings(p.header.get('Commit'));
    const head = HEADER.map((k) => `- ${k}: ${p.header.get(k) ?? 'not recorded on the page'}`);
    return [
      `## ${headingOf(p)}`,
      '',
      `From [\`bench/results/${p.name}.md\`](${from}${p.name}.md)${p.title !== headingOf(p) ? `: *${p.title}*` : ''}.${warn.length ? ` **${warn.map((w) => w[0].toUpperCase() + w.slice(1)).join('; ')}.**` : ''}`,
      '',
      ...head,
      '',
      rebased(p.body, from),
    ].join('\n');
  });
  return `${[INTRO, '## Current results', summary, ...sections].join('\n\n')}\n`;
}

// ---- the README's "How fast" ---------------------------------------------------------------------------

type Cells = Record<string, string>;

/** The rows of every table in a page's body, each keyed by its column names (bold and ✅/❌ removed). */
export function tableRows(body: string): Cells[] {
  const clean = (s: string) =>
    s
      .replace(/\*\*/g, '')
      .replace(/[✅❌]/gu, '')
      .trim();
  const split = (l: string) => l.split('|').slice(1, -1).map(clean);
  const lines = body.split('\n');
  const out: Cells[] = [];
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i].startsWith('|') || !/^\|\s*:?-{3}/.test(lines[i + 1])) continue;
    const head = split(lines[i]);
    let j = i + 2;
    for (; j < lines.length && lines[j].startsWith('|'); j++) {
      const cells = split(lines[j]);
      out.push(Object.fromEntries(head.map((h, k) => [h, cells[k] ?? ''])));
    }
    i = j;
  }
  return out;
}

/** `55.1% (53.1%–56.4%; …)` → `0.55×`; `1.16 (runs …)` → `1.16×`. */
export function times(text: string | undefined): string {
  const m = /^(-?[\d.]+)\s*(%?)/.exec(text ?? '');
  if (!m) return '?';
  return m[2] ? `${(Number(m[1]) / 100).toFixed(2)}×` : `${m[1].replace(/×$/, '')}×`;
}

const p99 = (pair: string | undefined) => (pair ?? '').split('/')[1]?.trim() ?? '?';

/** How pingd ran, from a backend cell such as `postgres, as deployed`. */
function configuration(backend: string | undefined): string {
  if (/as deployed/.test(backend ?? '')) return 'as deployed';
  if (/stopped/.test(backend ?? '')) return 'renderer and verification stopped';
  return 'not stated by the run';
}

interface Headline {
  page: string;
  measure: string;
  /** The row this headline reads; among several, one of pingd as deployed is preferred. */
  row: (c: Cells) => boolean;
  figure: (c: Cells) => string;
}

/** The README's rows: the headline figure of each main scenario. */
export const HEADLINES: Headline[] = [
  {
    page: 'wrk',
    measure: 'durable XML-RPC pings, 64 connections, PostgreSQL',
    row: (c) => c.case === 'ping' && c.backend?.startsWith('postgres'),
    figure: (c) => `${c['pingd req/s']} pings/s, p99 ${p99(c['p50 / p99 ms'])} ms: ${times(c['ratio (min–max; runs)'])} bare Fastify`,
  },
  {
    page: 'wrk',
    measure: 'the same on the embedded database',
    row: (c) => c.case === 'ping' && c.backend?.startsWith('pglite'),
    figure: (c) => `${c['pingd req/s']} pings/s, p99 ${p99(c['p50 / p99 ms'])} ms: ${times(c['ratio (min–max; runs)'])}`,
  },
  {
    page: 'wrk',
    measure: 'a poll answered `304`, PostgreSQL',
    row: (c) => c.case === '304' && c.backend?.startsWith('postgres'),
    figure: (c) => `${c['pingd req/s']} requests/s: ${times(c['ratio (min–max; runs)'])}`,
  },
  {
    page: 'scale',
    measure: 'intake with a month of pings in the log (100M), PostgreSQL',
    row: (c) => c.measurement?.startsWith('durable intake, pings/s'),
    figure: (c) => `${times(c['big / empty'])} the intake on an empty database`,
  },
  {
    page: 'soak',
    measure: '200 new weblogs/s for 10 minutes, embedded',
    row: (c) => c.run?.startsWith('pglite 200/s'),
    figure: (c) =>
      `peak RSS ${c['pingd RSS MB (idle → peak)']?.split('→')[1]?.trim()} MB, p99 ${p99(c['p50 / p99 ms'])} ms, documents ≤ ${c['max age shortChanges / changes s']?.split('/')[0]?.trim()} s old`,
  },
  {
    page: 'push',
    measure: 'WebSub fan-out of one change to 1,000 subscribers, embedded',
    row: (c) => c.surface === 'websub' && c.N === '1000',
    figure: (c) =>
      `${c['pingd deliveries/s']?.replace(/\/s$/, '')} deliveries/s, p50 / p99 ${c['pingd p50 / p99 publish → delivery']}: ${times(c['pingd / bare']?.replace(/\*/g, ''))} a bare Node sender`,
  },
  {
    page: 'failover',
    measure: 'primary crashed under 200 pings/s, synchronous standby promoted',
    row: (c) => c.replication === 'synchronous',
    figure: (c) => `${c.lost} of ${c.acknowledged} acknowledged pings lost`,
  },
];

/** The README's "How fast" table. */
export function howFastBlock(pages: ResultsPage[]): string {
  const rows = HEADLINES.map((h) => {
    const page = pages.find((p) => p.name === h.page);
    const link = `[${h.page}](${RESULTS_DIR}/${h.page}.md)`;
    if (!page) return [h.measure, '', `no page ${link}`, ''];
    const candidates = tableRows(page.body).filter(h.row);
    const c = candidates.find((x) => /as deployed/.test(x.backend ?? '')) ?? candidates[0];
    const commit = page.header.get('Commit');
    const run = [dates(page.header.get('Date')).join(', '), ...shas(commit), ...commitWarnings(commit)].join(', ');
    if (!c) return [h.measure, '', `not found on ${link}`, run];
    return [h.measure, configuration(c.backend), h.figure(c), `${run} (${link})`];
  });
  return table(['measure', 'pingd', 'figure', 'run'], rows);
}

/** docs/performance.md and README.md (its block replaced) as they should be now: path → content. */
export function performanceFiles(root: string): Map<string, string> {
  const pages = resultsPages(root);
  const readme = readFileSync(join(root, README), 'utf8');
  return new Map([
    [PERFORMANCE_PAGE, performancePage(pages)],
    [README, fillBlock(readme, HOW_FAST, howFastBlock(pages), README)],
  ]);
}

/** Writes both where they changed (for `npm run bench -- --write`); returns the paths written. */
export function writePerformanceFiles(root: string): string[] {
  const written: string[] = [];
  for (const [path, text] of performanceFiles(root)) {
    const full = join(root, path);
    if (existsSync(full) && readFileSync(full, 'utf8') === text) continue;
    writeFileSync(full, text);
    written.push(full);
  }
  return written;
}
