// Owns presenting a benchmark run: the results tables (markdown, readable in a terminal too). The scenario
// pages and the history are bench/lib/results.ts's; docs/performance.md is made from the pages
// (scripts/performance.ts).

export interface Row {
  scenario: string;
  backend: string;
  rps: number;
  p50: number;
  p99: number;
  baselineRps: number;
  ratio: number;
  ratioMin: number;
  ratioMax: number;
  target?: string;
  pass?: boolean;
  serverUsPerReq?: number;
  baselineUsPerReq?: number;
  dbUsPerReq?: number;
  loadgenUsPerReq?: number;
  batch?: string;
  failures: number;
}

export interface RenderRow {
  case: string;
  ms?: number;
  peakMb?: number;
  bytes?: number;
  target?: string;
  pass?: boolean;
  note?: string;
}

const f0 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : Math.round(n).toLocaleString('en-US'));
const f1 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : n < 10 ? n.toFixed(1) : Math.round(n).toString());
const pct = (n: number) => `${(100 * n).toFixed(1)}%`;
const verdict = (r: { target?: string; pass?: boolean }) => (r.target ? `${r.target} ${r.pass ? '✅' : '❌'}` : '');

export function loadTable(rows: Row[]): string {
  const out = [
    '| scenario | backend | req/s | p50 ms | p99 ms | baseline req/s | ratio (min–max) | target | CPU µs/req pingd (baseline) | db µs/req | batch (mean size, commit ms) | failures |',
    '| --- | --- | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | --- | ---: |',
  ];
  for (const r of rows) {
    out.push(
      `| ${r.scenario} | ${r.backend} | ${f0(r.rps)} | ${f1(r.p50)} | ${f1(r.p99)} | ${f0(r.baselineRps)} | ${pct(r.ratio)} (${pct(r.ratioMin)}–${pct(r.ratioMax)}) | ${verdict(r)} | ${f0(r.serverUsPerReq)} (${f0(r.baselineUsPerReq)}) | ${f0(r.dbUsPerReq)} | ${r.batch ?? ''} | ${r.failures} |`,
    );
  }
  return out.join('\n');
}

export function renderTable(rows: RenderRow[]): string {
  const out = ['| publishing case | render ms | peak MB | bytes | target | note |', '| --- | ---: | ---: | ---: | --- | --- |'];
  for (const r of rows) out.push(`| ${r.case} | ${f0(r.ms)} | ${f0(r.peakMb)} | ${f0(r.bytes)} | ${verdict(r)} | ${r.note ?? ''} |`);
  return out.join('\n');
}
